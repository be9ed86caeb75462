"""The evaluation harness: Wiki-NFQA (or your own graded data) judged with LINKAGE, scored by MRR and MPR.

- datasets: load questions with graded references; the seeded, source-stratified --limit sample
- linkage: reference selection, the judge prompt, verdict parsing, rank conventions, rounds
- judges: the LLM judge and the offline embedding-similarity proxy
- metrics: MRR / MPR per system x type x source
- runner: `evaluate(dataset, pipeline or systems, judge=...)`, concurrent, resumable and crash-safe
- report: Markdown/CSV tables, the MPR chart, summary.json
- pairwise, compare, compare_report: `eval compare`, two systems on the user's questions judged blind pairwise
  (`from typedrag.evaluation.compare import compare, Side`)
- question_writer: `eval questions`, questions of each type written by an LLM from the user's documents
- command: `typedrag eval` and its subcommands, thin wrappers around `evaluate` and `compare`

Names are imported on first use, so `import typedrag.evaluation.command` stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "EvalQuestion": "datasets",
    "Reference": "datasets",
    "load_dataset": "datasets",
    "Judge": "judges",
    "LLMJudge": "judges",
    "ProxyJudge": "judges",
    "RankConvention": "linkage",
    "CompareOptions": "compare",
    "CompareOutcome": "compare",
    "PairwiseJudge": "pairwise",
    "Side": "compare",
    "EvalOptions": "runner",
    "EvalOutcome": "runner",
    "System": "runner",
    "aevaluate": "runner",
    "evaluate": "runner",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'typedrag.evaluation' has no attribute {name!r}")
    return getattr(import_module(f"typedrag.evaluation.{_EXPORTS[name]}"), name)
