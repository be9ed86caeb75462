"""The Typed-RAG paper's own LINKAGE figures (Lee et al., arXiv 2503.15879, Table 3), carried over with where
each came from, so a Wiki-NFQA run's report sets its figures beside the paper's, per source dataset.

Only figures copied from a source someone can check are here: each `PaperFigure` names it. A cell of the table
with no figure here is shown as not carried over, never guessed. To complete the table, copy the paper's
figures into `FIGURES` with `carried_from` naming the paper's table (and keep `SETTING` to the run they belong
to: the paper reports more than one generator and judge).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PAPER = "Lee et al., Typed-RAG, arXiv 2503.15879, Table 3"
# The paper's run that the figures below belong to: its generator and its LINKAGE judge.
SETTING = "Llama-3.2-3B generator, Mistral-7B judge"
# Wiki-NFQA's source datasets, by the stems of its files (typedrag.evaluation.datasets names a question's source
# by its file), in the order the paper's table lists them.
SOURCES = ("nq", "squad", "trivia", "hotpotqa", "2wikimultihopqa", "musique")
SOURCE_NAMES = {
    "nq": "NQ-NF",
    "squad": "SQuAD-NF",
    "trivia": "TriviaQA-NF",
    "hotpotqa": "HotpotQA-NF",
    "2wikimultihopqa": "2WikiMultiHopQA-NF",
    "musique": "MuSiQue-NF",
}
# The rank convention the paper's figures were computed with (typedrag.evaluation.linkage.RankConvention).
CONVENTION = "typed-rag"


@dataclass(frozen=True)
class PaperFigure:
    """One cell of the paper's table: a method's MRR (and MPR, when known) on one source dataset."""

    method: str  # llm | rag | typed
    source: str  # a Wiki-NFQA file stem (SOURCES)
    mrr: float | None
    mpr: float | None
    setting: str
    carried_from: str  # where the figure was copied from, for a reader to check


ISSUE_53 = 'typedrag issue 53, which quotes the paper\'s Table 3 ("NQ 0.766 vs 0.589", Typed-RAG vs the LLM)'
FIGURES: tuple[PaperFigure, ...] = (
    PaperFigure("typed", "nq", 0.766, None, SETTING, ISSUE_53),
    PaperFigure("llm", "nq", 0.589, None, SETTING, ISSUE_53),
)


def is_wiki_nfqa(sources: set[str]) -> bool:
    """Whether a run's questions come from Wiki-NFQA's files (at least one of them, and nothing else)."""
    return bool(sources) and sources <= set(SOURCES)


def paper_figure(method: str, source: str, setting: str = SETTING) -> PaperFigure | None:
    """The paper's figure for `method` on `source`, or None when it is not carried over."""
    return next((f for f in FIGURES if (f.method, f.source, f.setting) == (method, source, setting)), None)


def carried_over() -> list[dict[str, Any]]:
    """Every figure carried over, as plain data (for summary.json)."""
    return [f.__dict__.copy() for f in FIGURES]
