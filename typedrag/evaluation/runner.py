"""`evaluate`: answer every (question, system), judge every (question, system, round), score, report.

A system is a pipeline answering with one method (`rag`, `typed`, ...), so anything built in
Python can be evaluated: `evaluate(dataset, pipeline)` compares that pipeline's methods,
`evaluate(dataset, [System("mine", my_pipeline, "typed"), ...])` compares pipelines.

Crash-safe and resumable: each answer and verdict is appended to a JSONL file in the run
directory the moment it exists (flushed and fsynced). Rerunning the same call skips answers
and verdicts already there; a torn last line left by a crash is discarded on load. A run
directory belongs to one set-up (generators, index, classifier, prompt version; checked via
run.json); verdicts are keyed by judge, so different judges can share a run directory.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from typedrag.classify.base import TypePrediction
from typedrag.errors import LLMError, QuestionError, RunError
from typedrag.evaluation.datasets import EvalQuestion, load_dataset, stratified_sample
from typedrag.evaluation.filler import meta_sentences
from typedrag.evaluation.judges import JUDGE_TEMPERATURE, Judge, ProxyJudge
from typedrag.evaluation.linkage import LINKAGE_JUDGE, RankConvention, question_rank, select_references
from typedrag.evaluation.metrics import Score, cells
from typedrag.jsonlog import JsonlLog
from typedrag.llm.structured import REPLY_CHARS, short
from typedrag.pipeline import Method, Pipeline
from typedrag.prompts import PROMPT_VERSION
from typedrag.redact import redact_url
from typedrag.result import Usage

ANSWERS = "answers.jsonl"
VERDICTS = "verdicts.jsonl"
# The keys every record of each log holds, first key first: how a log recognises a file as its own.
ANSWER_KEYS = ("question_id", "method", "answer")
VERDICT_KEYS = ("question_id", "method", "judge", "round")
RUN_FILE = "run.json"
METHODS = tuple(m.value for m in Method)
OFFLINE_LLM_NOTE = (
    "llm (LLM-only) not run: the offline engine has no closed-book answer, so there is nothing to score; "
    "give a generator with --llm/--base-url for this baseline"
)
SELECTION_RULE = (
    "filter by --types (predicted), then the first --limit of a seeded shuffle stratified over source files "
    "(proportional quotas, largest remainder)"
)


@dataclass(frozen=True)
class System:
    """One row of the results: `pipeline` answering with `method`, reported as `name`."""

    name: str
    pipeline: Pipeline
    method: Method | str = Method.TYPED


@dataclass
class EvalOptions:
    """Which questions, how many judge rounds, which rank convention, how much at once."""

    limit: int | None = None
    types: tuple[str, ...] = ()
    rounds: int = 3
    convention: RankConvention = RankConvention.LINKAGE
    concurrency: int = 4
    seed: int = 0
    show_progress: bool = True


@dataclass
class EvalOutcome:
    """The run's summary (what summary.json holds) and the files written."""

    summary: dict[str, Any]
    files: dict[str, Path]


def evaluate(
    dataset: Path | str | Sequence[EvalQuestion],
    systems: Pipeline | Sequence[System],
    *,
    methods: Sequence[str] = METHODS,
    judge: Judge | None = None,
    out: Path | str | None = None,
    options: EvalOptions | None = None,
) -> EvalOutcome:
    """Run (or resume) an evaluation and write its reports into `out` (a new temporary folder if None).

    `systems` is a list of `System`s, or one pipeline whose `methods` are compared (an extractive
    engine has no LLM-only answer, so `llm` is then left out and noted). `judge` defaults to the
    embedding-similarity proxy, which is labelled as such in every report.

    >>> from typedrag import OfflineEngine, Pipeline, evaluate
    >>> from typedrag.evaluation import EvalQuestion, Reference
    >>> from typedrag.testing import ListRetriever
    >>> data = [EvalQuestion("q1", "Why do cats purr?", "mine", (Reference("Contentment or pain.", 1),))]
    >>> pipeline = Pipeline(OfflineEngine(), ListRetriever(["Cats purr when content, and when hurt."]))
    >>> outcome = evaluate(data, pipeline, methods=["rag"], options=EvalOptions(show_progress=False))
    >>> outcome.summary["per_method"]["rag"]["scored"]
    1
    """
    return asyncio.run(aevaluate(dataset, systems, methods=methods, judge=judge, out=out, options=options))


async def aevaluate(
    dataset: Path | str | Sequence[EvalQuestion],
    systems: Pipeline | Sequence[System],
    *,
    methods: Sequence[str] = METHODS,
    judge: Judge | None = None,
    out: Path | str | None = None,
    options: EvalOptions | None = None,
) -> EvalOutcome:
    """`evaluate` for callers already inside an event loop."""
    started = time.perf_counter()
    options = options or EvalOptions()
    judge = judge or ProxyJudge()
    questions_all = load_dataset(Path(dataset)) if isinstance(dataset, (str, Path)) else list(dataset)
    notes: list[str] = []
    systems, requested = _systems(systems, methods, notes)
    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="typedrag-eval-"))
    rounds = 1 if judge.is_proxy else options.rounds
    if judge.is_proxy and options.rounds != 1:
        notes.append("the proxy judge is deterministic, so it runs one round whatever --rounds says")

    questions, predictions, unclassified = await _select(questions_all, options, _decider(systems))
    notes += _single_reference_notes(questions, judge)
    classifier = ", ".join(sorted({p.source for p in predictions.values()})) or "none"
    identity = _identity(dataset, systems, classifier)
    _claim(out, identity)
    run = _Run(systems, judge, rounds, options, out)
    errors = unclassified + await run.go(questions, predictions)

    scores = _scores(questions, run, predictions, options.convention)
    first = systems[0].pipeline
    summary = {
        "configuration": {
            "dataset": identity["dataset"],
            "questions_in_dataset": len(questions_all),
            "questions_selected": len(questions),
            "limit": options.limit,
            "types": list(options.types),
            "selection": SELECTION_RULE,
            "seed": options.seed,
            "methods": [s.name for s in systems],
            "requested_methods": requested,
            "systems": {
                s.name: {"method": str(Method(s.method)), "generator": s.pipeline.engine.name} for s in systems
            },
            "generator": _generator(first),
            "judge": _judge_config(judge),
            "rank_convention": options.convention.value,
            "rounds": rounds,
            "round_aggregation": "median rank of the rounds whose verdict parsed; none parsed = judge failure",
            "classifier": classifier,
            "index": identity["index_fingerprint"] or None,
            "top_k": first.settings.top_k,
            "aspect_k": first.settings.aspect_k,
            "knowledge": first.settings.knowledge,
            "concurrency": options.concurrency,
            "prompt_version": PROMPT_VERSION,
            "git": _git_state(),
        },
        "notes": notes,
        "errors_this_run": errors,
        "per_method": _per_method(scores, run, questions),
        "cells": [asdict(c) for c in cells(scores)],
        "seconds_this_run": round(time.perf_counter() - started, 1),
    }
    from typedrag.evaluation.report import write_report

    return EvalOutcome(summary, write_report(out, summary))


def _single_reference_notes(questions: list[EvalQuestion], judge: Judge) -> list[str]:
    """Say so when questions have one reference grade: LINKAGE can only place an answer above or below it, and
    the proxy places every answer below it, so every method gets the same score there."""
    single = sum(len(select_references(q)) == 1 for q in questions)
    if not single:
        return []
    what = (
        "the proxy judge places every answer below a lone reference, so every method gets the same score on them"
        if judge.is_proxy
        else "LINKAGE can only place an answer above or below a lone reference, so it separates methods little there"
    )
    return [
        f"{single} of {len(questions)} questions have one reference grade: {what}. To compare methods on questions "
        "without graded references, use `typedrag eval compare` (a blind pairwise judge)"
    ]


def _systems(
    systems: Pipeline | Sequence[System], methods: Sequence[str], notes: list[str]
) -> tuple[list[System], list[str]]:
    """The systems to run, and the row names asked for (a method left out still gets an n/a row)."""
    if not isinstance(systems, Pipeline):
        if not systems:
            raise RunError("nothing to evaluate: give a pipeline or at least one System")
        return list(systems), [s.name for s in systems]
    unknown = set(methods) - set(METHODS)
    if unknown or not methods:
        raise RunError(f"unknown methods {sorted(unknown)}; choose from {', '.join(METHODS)}")
    chosen = list(dict.fromkeys(methods))
    if not systems.engine.generative and Method.LLM in chosen:
        chosen.remove(Method.LLM)
        notes.append(OFFLINE_LLM_NOTE)
    if not chosen:
        raise RunError("nothing to evaluate: the only method asked for needs a generative engine (--llm)")
    return [System(m, systems, m) for m in chosen], list(dict.fromkeys(methods))


def _decider(systems: list[System]) -> Pipeline:
    """The pipeline that decides each question's type once, for every system's row."""
    typed = [s.pipeline for s in systems if Method(s.method) is Method.TYPED]
    return typed[0] if typed else systems[0].pipeline


class _Run:
    """The answering and judging of one run: logs, progress, the cap on questions in flight."""

    def __init__(self, systems: list[System], judge: Judge, rounds: int, options: EvalOptions, out: Path) -> None:
        self.systems, self.judge, self.rounds, self.options = systems, judge, rounds, options
        self.answers_log = JsonlLog(out / ANSWERS, ANSWER_KEYS)
        self.verdicts_log = JsonlLog(out / VERDICTS, VERDICT_KEYS)
        self.answers = {(r["question_id"], r["method"]): r for r in self.answers_log.records}
        self.verdicts = {(r["question_id"], r["method"], r["judge"], r["round"]): r for r in self.verdicts_log.records}
        self.errors: list[str] = []
        self.progress = Progress(
            TextColumn("{task.description:>9}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            disable=not options.show_progress,
        )

    async def go(self, questions: list[EvalQuestion], predictions: dict[str, TypePrediction]) -> list[str]:
        """Answer and judge everything not yet logged; returns the errors of this run."""
        count = len(questions) * len(self.systems)
        self.answer_bar = self.progress.add_task("answers", total=count)
        self.verdict_bar = self.progress.add_task("verdicts", total=count * self.rounds)
        limit = asyncio.Semaphore(self.options.concurrency)

        async def one_question(question: EvalQuestion) -> None:
            async with limit:
                for system in self.systems:
                    await self.one_system(question, system, predictions[question.id])

        try:
            with self.progress:
                await asyncio.gather(*(one_question(q) for q in questions))
        finally:
            self.answers_log.close()
            self.verdicts_log.close()
        return self.errors

    async def one_system(self, question: EvalQuestion, system: System, decision: TypePrediction) -> None:
        record = self.answers.get((question.id, system.name))
        if record is None:
            try:
                result = await system.pipeline.answer(question.text, system.method, decision=decision)
            except (LLMError, QuestionError) as error:
                self.errors.append(f"answer {question.id} {system.name}: {error}")
                self.progress.advance(self.answer_bar)
                self.progress.advance(self.verdict_bar, self.rounds)
                return
            record = _answer_record(question, system.name, str(decision.label), result)
            self.answers_log.append(record)
            self.answers[(question.id, system.name)] = record
        self.progress.advance(self.answer_bar)
        references = select_references(question)
        pending = [
            r for r in range(1, self.rounds + 1) if (question.id, system.name, self.judge.name, r) not in self.verdicts
        ]
        self.progress.advance(self.verdict_bar, self.rounds - len(pending))
        await asyncio.gather(*(self.one_round(question, system.name, record["answer"], references, r) for r in pending))

    async def one_round(self, question: EvalQuestion, name: str, answer: str, references, round_: int) -> None:
        try:
            verdict = await self.judge.place(question.text, references, answer, round_)
        except LLMError as error:
            self.errors.append(f"judge {question.id} {name} round {round_}: {error}")
            return
        finally:
            self.progress.advance(self.verdict_bar)
        record = _verdict_record(question, name, self.judge.name, round_, references, verdict)
        self.verdicts_log.append(record)
        self.verdicts[(question.id, name, self.judge.name, round_)] = record

    def positions(self, question_id: str, name: str) -> list[int | None]:
        keys = [(question_id, name, self.judge.name, r) for r in range(1, self.rounds + 1)]
        return [self.verdicts[key]["position"] for key in keys if key in self.verdicts]

    def verdict_records(self, question_id: str, name: str) -> list[dict[str, Any]]:
        keys = [(question_id, name, self.judge.name, r) for r in range(1, self.rounds + 1)]
        return [self.verdicts[key] for key in keys if key in self.verdicts]


def _answer_record(question: EvalQuestion, method: str, predicted_type: str, result) -> dict[str, Any]:
    return {
        "question_id": question.id,
        "method": method,
        "source": question.source,
        "predicted_type": predicted_type,
        "gold_type": question.gold_type,
        "answer": result.reply,  # with knowledge = "labelled", what the model added follows, labelled: the judge ranks it all
        "knowledge": result.knowledge,
        "unsourced": list(result.unsourced.sentences) if result.unsourced is not None else [],
        "abstained": result.abstained,
        # sentences about what the sources do not say (typedrag.evaluation.filler), in an answer that is no abstention
        "meta_sentences": 0 if result.abstained else len(meta_sentences(result.answer)),
        "strategy": result.strategy,
        "generator": result.engines.generator,
        "fallbacks": [f.reason for f in result.fallbacks],
        "usage": result.usage.model_dump(),
        "total_ms": result.timings_ms.get("total"),
    }


def _verdict_record(
    question: EvalQuestion, method: str, judge: str, round_: int, references, verdict
) -> dict[str, Any]:
    return {
        "question_id": question.id,
        "method": method,
        "judge": judge,
        "round": round_,
        "position": verdict.position,
        "references": len(references),
        "reference_grades": [r.grade for r in references],
        "reply": short(verdict.reply, REPLY_CHARS),  # a bounded excerpt: a runaway judge must not fill the log
        "retried": verdict.retried,
        "usage": Usage.of(verdict.calls).model_dump(),
    }


async def _select(
    dataset: list[EvalQuestion], options: EvalOptions, decider: Pipeline
) -> tuple[list[EvalQuestion], dict[str, TypePrediction], list[str]]:
    """Questions to run and their types, decided once by the pipeline's own routing and shared by every
    system's row; the whole dataset is classified only when filtering by type.

    A question whose type the classifier cannot give (the LLM classifier's endpoint failed, or its reply
    did not parse even after the repair) is skipped and reported, never silently typed by another
    classifier, which would mix two classifiers in one run's "predicted type"; a rerun asks again
    (unparsable replies are not cached). Returns (questions, predictions, one error line per skipped).
    """
    pool = dataset if options.types else stratified_sample(dataset, options.limit, options.seed)
    limit = asyncio.Semaphore(options.concurrency)
    types = {decider.route_label(t) for t in options.types}

    async def decide(question: EvalQuestion) -> TypePrediction | LLMError:
        async with limit:
            try:
                return await decider.decide_type(question.text)
            except LLMError as error:
                return error

    decided = dict(zip((q.id for q in pool), await asyncio.gather(*(decide(q) for q in pool))))
    skipped = [
        f"classify {qid}: {error}; question skipped" for qid, error in decided.items() if isinstance(error, LLMError)
    ]
    predictions = {qid: p for qid, p in decided.items() if not isinstance(p, LLMError)}
    pool = [q for q in pool if q.id in predictions]
    if types:
        pool = stratified_sample([q for q in pool if predictions[q.id].label in types], options.limit, options.seed)
    if not pool:
        detail = f" ({len(skipped)} could not be classified: {skipped[0]})" if skipped else ""
        raise RunError(
            f"no question to evaluate: the dataset is empty or no question has the --types asked for{detail}"
        )
    return pool, {q.id: predictions[q.id] for q in pool}, skipped


def _identity(dataset, systems: list[System], classifier: str) -> dict[str, Any]:
    """What produced a run directory's answers; a rerun must match it to add to them."""
    first = systems[0].pipeline
    retrievers = [s.pipeline.retriever for s in systems if s.pipeline.retriever is not None]
    fingerprint = _index_fingerprint(retrievers[0]) if retrievers else {}
    return {
        "dataset": str(Path(dataset).resolve()) if isinstance(dataset, (str, Path)) else "(in memory)",
        "generator": ", ".join(dict.fromkeys(s.pipeline.engine.name for s in systems)),
        "index": fingerprint.get("path"),
        "corpus": fingerprint.get("passages_sha256"),
        "classifier": classifier,
        "assume_non_factoid": first.settings.assume_non_factoid,
        "prompt_version": PROMPT_VERSION,
        "top_k": first.settings.top_k,
        "aspect_k": first.settings.aspect_k,
        "knowledge": first.settings.knowledge,
        "index_fingerprint": fingerprint,
    }


def _claim(out: Path, identity: dict) -> None:
    """Record what produced this run directory's answers; refuse to mix in answers from anything else."""
    identity = {k: v for k, v in identity.items() if k != "index_fingerprint"}
    out.mkdir(parents=True, exist_ok=True)
    path = out / RUN_FILE
    if path.exists():
        existing = json.loads(path.read_text(encoding="utf-8"))
        changed = sorted(k for k in identity if existing.get(k) != identity[k])
        if changed:
            detail = "; ".join(f"{k}: {existing.get(k)!r} -> {identity[k]!r}" for k in changed)
            raise RunError(f"{out} holds answers from a different set-up ({detail}); use another --out")
        return
    path.write_text(json.dumps(identity, indent=2) + "\n", encoding="utf-8")


def _scores(questions: list[EvalQuestion], run: _Run, predictions, convention: RankConvention) -> list[Score]:
    scores = []
    for question in questions:
        count = len(select_references(question))
        for system in run.systems:
            common = {
                "question_id": question.id,
                "method": system.name,
                "source": question.source,
                "type": str(predictions[question.id].label),
                "references": count,
            }
            if (question.id, system.name) not in run.answers:
                scores.append(Score(**common, rank=None, failure="answer"))
                continue
            rank = question_rank(run.positions(question.id, system.name), count, convention)
            scores.append(Score(**common, rank=rank, failure=None if rank is not None else "judge"))
    return scores


def _per_method(scores: list[Score], run: _Run, questions: list[EvalQuestion]) -> dict[str, dict]:
    """Counts, failures, and generator and judge calls/tokens for each system (selected questions only)."""
    result = {}
    for system in run.systems:
        name = system.name
        mine = [s for s in scores if s.method == name]
        answer_records = [run.answers[(q.id, name)] for q in questions if (q.id, name) in run.answers]
        verdict_records = [v for q in questions for v in run.verdict_records(q.id, name)]
        result[name] = {
            "questions": len(mine),
            "scored": sum(s.rank is not None for s in mine),
            "answer_failures": sum(s.failure == "answer" for s in mine),
            "judge_failures": sum(s.failure == "judge" for s in mine),
            "verdict_rounds": len(verdict_records),
            "unparsable_rounds": sum(v["position"] is None for v in verdict_records),
            "retried_rounds": sum(v["retried"] for v in verdict_records),
            "abstained": sum(r.get("abstained", False) for r in answer_records),
            "meta_sentences": sum(r.get("meta_sentences", 0) for r in answer_records),
            "answers_with_unsourced": sum(bool(r.get("unsourced")) for r in answer_records),
            "generator_usage": _total_usage(r["usage"] for r in answer_records),
            "judge_usage": _total_usage(v["usage"] for v in verdict_records),
        }
    return result


def _total_usage(usages) -> dict[str, int]:
    total = dict.fromkeys(Usage.model_fields, 0)
    for usage in usages:
        for key in total:
            total[key] += usage.get(key, 0)
    return total


def _generator(pipeline: Pipeline) -> dict[str, Any]:
    model = getattr(pipeline.engine, "model", None)
    return {
        "engine": pipeline.engine.name,
        "model": getattr(model, "model", None),
        "base_url": redact_url(getattr(model, "base_url", None)),
    }


def _judge_config(judge: Judge) -> dict[str, Any]:
    if judge.is_proxy:
        return {"kind": "proxy", "name": judge.name, "rule": "see typedrag.evaluation.judges.ProxyJudge"}
    model = getattr(judge, "model", None)
    return {
        "kind": "llm",
        "name": judge.name,
        "model": getattr(model, "model", None),
        "base_url": redact_url(getattr(model, "base_url", None)),
        "temperature": JUDGE_TEMPERATURE,
        "prompt": LINKAGE_JUDGE.name,
        "prompt_sha256": hashlib.sha256((LINKAGE_JUDGE.system + LINKAGE_JUDGE.user).encode()).hexdigest()[:16],
    }


def _index_fingerprint(retriever) -> dict[str, Any]:
    """Where the index behind `retriever` is and the checksums of its manifest (tantivy and Milvus have one):
    a run resumes only against the same index and corpus."""
    index = retriever.describe()
    manifest, index_dir = index.manifest, index.index_dir
    if manifest is None:
        return {"path": index.name}
    data = json.dumps(manifest, sort_keys=True).encode()
    return {
        "path": str(Path(index_dir).resolve()) if index_dir is not None else index.name,
        "manifest_sha256": hashlib.sha256(data).hexdigest(),
        "passages_sha256": manifest.get("corpus", {}).get("passages_sha256"),
    }


def _git_state() -> dict[str, Any] | None:
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        )
        status = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
