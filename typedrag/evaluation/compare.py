"""`compare`: answer a question set with two systems, judge each pair blind, and say which helps more.

For a user's own questions (graded references optional): system a and system b (two methods, or two
configurations of one) answer every question; a blind pairwise judge (typedrag.evaluation.pairwise) reads
each pair in both orders; wins, ties, answering and noise sentences are counted per question type and
overall, with a 95% interval on b's share of the decided items. When the questions carry graded
references, each answer can also be placed among them with LINKAGE (typedrag.evaluation.linkage).

Resumable and cached like `evaluate`: answers, judgments and LINKAGE verdicts are appended to JSONL logs
in the run directory as they arrive; a rerun skips what is there (a judgment is reused only for the same
question, the same two answers and the same judge prompt), so a killed run loses nothing and asks nothing
twice. Judge replies also go through the response cache. Without a judge (no LLM configured) the systems
still answer and the report shows where they differ; it says in one line what it could not do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from typedrag.errors import LLMError, QuestionError, RunError
from typedrag.evaluation.datasets import EvalQuestion, load_questions
from typedrag.evaluation.judges import LLMJudge
from typedrag.evaluation.linkage import RankConvention, question_rank, select_references
from typedrag.evaluation.metrics import Score, cells
from typedrag.evaluation.pairwise import PairwiseJudge, Tally, combine, first_shown, prompt_fingerprint, winner_of
from typedrag.jsonlog import JsonlLog
from typedrag.llm.structured import REPLY_CHARS, short
from typedrag.pipeline import Method, Pipeline
from typedrag.prompts import PROMPT_VERSION
from typedrag.redact import redact_url
from typedrag.result import Usage

ANSWERS = "answers.jsonl"
JUDGMENTS = "judgments.jsonl"
LINKAGE_LOG = "linkage.jsonl"
RUN_FILE = "run.json"
ANSWER_KEYS = ("question_id", "system", "answer")
JUDGMENT_KEYS = ("question_id", "judge", "round")
LINKAGE_KEYS = ("question_id", "system", "judge", "round")
ALL = "all"
NO_JUDGE = (
    "no judge: without an LLM (--judge MODEL, or --llm) typedrag cannot say which answer is better; "
    "both systems answered, and the report lists where their answers differ"
)


@dataclass(frozen=True)
class Side:
    """One of the two compared systems: `pipeline` answering with `method`, reported as `name`."""

    name: str
    pipeline: Pipeline
    method: Method | str = Method.TYPED
    described: str = ""  # how the user wrote it (e.g. "typed,top_k=8"), for the report


@dataclass
class CompareOptions:
    """How many questions, how many at once, the order seed, LINKAGE rounds (when there are references)."""

    limit: int | None = None
    concurrency: int = 4
    seed: int = 0
    linkage_rounds: int = 1
    show_progress: bool = True


@dataclass
class CompareOutcome:
    """The run's summary (what summary.json holds) and the files written."""

    summary: dict[str, Any]
    files: dict[str, Path] = field(default_factory=dict)


def compare(
    questions: Path | str | Sequence[EvalQuestion],
    a: Side,
    b: Side,
    *,
    judge: PairwiseJudge | None = None,
    linkage_judge: LLMJudge | None = None,
    out: Path | str | None = None,
    options: CompareOptions | None = None,
) -> CompareOutcome:
    """Run (or resume) a comparison of `a` and `b` and write its report into `out` (a temporary folder if None).

    >>> from typedrag import OfflineEngine, Pipeline
    >>> from typedrag.evaluation import EvalQuestion
    >>> from typedrag.testing import ListRetriever
    >>> pipeline = Pipeline(OfflineEngine(), ListRetriever(["Cats purr when content, and when hurt."]))
    >>> data = [EvalQuestion("q1", "Why do cats purr?", "mine", ())]
    >>> outcome = compare(data, Side("rag", pipeline, "rag"), Side("typed", pipeline, "typed"),
    ...                   options=CompareOptions(show_progress=False))
    >>> outcome.summary["overall"]["items"], outcome.summary["judge"] is None
    (1, True)
    """
    return asyncio.run(acompare(questions, a, b, judge=judge, linkage_judge=linkage_judge, out=out, options=options))


async def acompare(
    questions: Path | str | Sequence[EvalQuestion],
    a: Side,
    b: Side,
    *,
    judge: PairwiseJudge | None = None,
    linkage_judge: LLMJudge | None = None,
    out: Path | str | None = None,
    options: CompareOptions | None = None,
) -> CompareOutcome:
    """`compare` for callers already inside an event loop."""
    started = time.perf_counter()
    options = options or CompareOptions()
    if a.name == b.name:
        raise RunError(f"the two systems need different names (both are {a.name!r})")
    source = str(Path(questions).resolve()) if isinstance(questions, (str, Path)) else "(in memory)"
    pool = load_questions(Path(questions)) if isinstance(questions, (str, Path)) else list(questions)
    selected = pool[: options.limit] if options.limit else pool
    if not selected:
        raise RunError("no question to compare: the question file is empty")
    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="typedrag-compare-"))
    _claim(out, _identity(a, b, options.seed))
    notes: list[str] = []
    referenced = [q for q in selected if q.references]
    if referenced and linkage_judge is None:
        notes.append(
            f"{len(referenced)} questions carry graded references, but LINKAGE needs an LLM judge: not run"
            if judge is None
            else f"{len(referenced)} questions carry graded references; LINKAGE not asked for (--linkage-rounds 0)"
        )
    run = _Run(a, b, judge, linkage_judge, options, out)
    errors = await run.go(selected)
    types = await _types(selected, run, a, b)
    items = [run.item(q, types[q.id]) for q in selected]
    tallies = _tallies(items)
    summary = {
        "questions_file": source,
        "questions_in_file": len(pool),
        "questions_selected": len(selected),
        "systems": {side.name: _describe(side) for side in (a, b)},
        "a": a.name,
        "b": b.name,
        "judge": _judge_config(judge),
        "type_source": _type_source(selected, a, b),
        "seed": options.seed,
        "prompt_version": PROMPT_VERSION,
        "notes": notes + ([NO_JUDGE] if judge is None else []),
        "errors_this_run": errors,
        "overall": tallies.pop(ALL).as_dict(),
        "by_type": {t: tally.as_dict() for t, tally in tallies.items()},
        "linkage": _linkage(selected, run, types, linkage_judge, referenced),
        "usage": run.usage(),
        "items": items,
        "seconds_this_run": round(time.perf_counter() - started, 1),
    }
    from typedrag.evaluation.compare_report import write_compare_report

    return CompareOutcome(summary, write_compare_report(out, summary))


class _Run:
    """The answering and judging of one comparison: logs, progress, the cap on questions in flight."""

    def __init__(
        self,
        a: Side,
        b: Side,
        judge: PairwiseJudge | None,
        linkage_judge: LLMJudge | None,
        options: CompareOptions,
        out: Path,
    ) -> None:
        self.sides = {"a": a, "b": b}
        self.judge, self.linkage_judge, self.options = judge, linkage_judge, options
        self.fingerprint = prompt_fingerprint()
        self.answers_log = JsonlLog(out / ANSWERS, ANSWER_KEYS)
        self.judgments_log = JsonlLog(out / JUDGMENTS, JUDGMENT_KEYS)
        self.linkage_log = JsonlLog(out / LINKAGE_LOG, LINKAGE_KEYS)
        self.answers = {(r["question_id"], r["system"]): r for r in self.answers_log.records}
        self.judgments = {_judgment_key(r): r for r in self.judgments_log.records if r.get("winner") is not None}
        self.linkage = {(r["question_id"], r["system"], r["judge"], r["round"]): r for r in self.linkage_log.records}
        self.errors: list[str] = []
        self.progress = Progress(
            TextColumn("{task.description:>9}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=not options.show_progress,
        )

    async def go(self, questions: list[EvalQuestion]) -> list[str]:
        """Answer and judge everything not yet logged; returns the errors of this run."""
        self.answer_bar = self.progress.add_task("answers", total=2 * len(questions))
        self.judge_bar = self.progress.add_task("judged", total=len(questions) if self.judge else 0)
        limit = asyncio.Semaphore(self.options.concurrency)

        async def one(question: EvalQuestion) -> None:
            async with limit:
                records = await asyncio.gather(*(self.answer(question, key) for key in "ab"))
                if all(r is not None for r in records):
                    await asyncio.gather(self.judge_pair(question, *records), self.place(question, records))
                else:
                    self.progress.advance(self.judge_bar)

        try:
            with self.progress:
                await asyncio.gather(*(one(q) for q in questions))
        finally:
            for log in (self.answers_log, self.judgments_log, self.linkage_log):
                log.close()
        return self.errors

    def answer_record(self, question: EvalQuestion, key: str) -> dict | None:
        """The logged answer of system `key` to `question`, if it was asked as the file now words it."""
        record = self.answers.get((question.id, self.sides[key].name))
        return record if record is not None and record.get("question") == question.text else None

    async def answer(self, question: EvalQuestion, key: str) -> dict | None:
        side = self.sides[key]
        record = self.answer_record(question, key)
        if record is None:
            try:
                result = await side.pipeline.answer(question.text, side.method)
            except (LLMError, QuestionError) as error:
                self.errors.append(f"answer {question.id} {side.name}: {error}")
                self.progress.advance(self.answer_bar)
                return None
            record = _answer_record(question, side.name, result)
            self.answers_log.append(record)
            self.answers[(question.id, side.name)] = record
        self.progress.advance(self.answer_bar)
        return record

    async def judge_pair(self, question: EvalQuestion, first: dict, second: dict) -> None:
        """Both orders of the pair, each asked unless a judgment of this very pair is logged."""
        if self.judge is None:
            return
        try:
            if first["answer"].strip() == second["answer"].strip():
                return  # the same text: a tie nobody needs to be asked about
            pair = _pair_hash(question.text, first["answer"], second["answer"])
            opening = first_shown(question.id, self.options.seed)
            orders = {1: opening, 2: "b" if opening == "a" else "a"}
            pending = [
                r for r in (1, 2) if (question.id, self.judge.name, r, pair, self.fingerprint) not in self.judgments
            ]
            await asyncio.gather(*(self.one_order(question, pair, r, orders[r], first, second) for r in pending))
        finally:
            self.progress.advance(self.judge_bar)

    async def one_order(
        self, question: EvalQuestion, pair: str, round_: int, shown_first: str, a: dict, b: dict
    ) -> None:
        texts = {"a": a["answer"], "b": b["answer"]}
        other = "b" if shown_first == "a" else "a"
        try:
            judgment = await self.judge.judge(question.text, texts[shown_first], texts[other])
        except LLMError as error:
            self.errors.append(f"judge {question.id} round {round_}: {error}")
            return
        verdict = judgment.verdict
        record = {
            "question_id": question.id,
            "judge": self.judge.name,
            "round": round_,
            "pair": pair,
            "prompt": self.fingerprint,
            "shown_first": shown_first,
            "winner": winner_of(verdict.winner, shown_first) if verdict is not None else None,
            "verdict": verdict.model_dump() if verdict is not None else None,
            "structured": judgment.call.structured,
            "reply": short(judgment.reply, REPLY_CHARS)
            if verdict is None
            else None,  # a bounded excerpt, not megabytes a line
            "error": judgment.call.error,
            "usage": Usage.of([judgment.call]).model_dump(),
        }
        self.judgments_log.append(record)  # a failed round is kept as a record of the failure, and asked again next run
        if verdict is None:
            self.errors.append(f"judge {question.id} round {round_}: {judgment.call.error}")
            return
        self.judgments[_judgment_key(record)] = record

    async def place(self, question: EvalQuestion, records: list[dict]) -> None:
        """LINKAGE rounds for each answer of a question with references (an LLM judge only)."""
        if self.linkage_judge is None or not question.references:
            return
        references = select_references(question)
        jobs = [
            (record, round_)
            for record in records
            for round_ in range(1, self.options.linkage_rounds + 1)
            if (question.id, record["system"], self.linkage_judge.name, round_) not in self.linkage
        ]

        async def one(record: dict, round_: int) -> None:
            try:
                verdict = await self.linkage_judge.place(question.text, references, record["answer"], round_)
            except LLMError as error:
                self.errors.append(f"linkage {question.id} {record['system']} round {round_}: {error}")
                return
            entry = {
                "question_id": question.id,
                "system": record["system"],
                "judge": self.linkage_judge.name,
                "round": round_,
                "position": verdict.position,
                "references": len(references),
                "reply": short(verdict.reply, REPLY_CHARS),
                "retried": verdict.retried,
                "usage": Usage.of(verdict.calls).model_dump(),
            }
            self.linkage_log.append(entry)
            self.linkage[(question.id, record["system"], self.linkage_judge.name, round_)] = entry

        await asyncio.gather(*(one(record, round_) for record, round_ in jobs))

    def rounds(self, question: EvalQuestion) -> list[dict]:
        """The logged judgments of the question's current pair, by round."""
        first, second = self.answer_record(question, "a"), self.answer_record(question, "b")
        if self.judge is None or first is None or second is None:
            return []
        pair = _pair_hash(question.text, first["answer"], second["answer"])
        found = [self.judgments.get((question.id, self.judge.name, r, pair, self.fingerprint)) for r in (1, 2)]
        return [r for r in found if r is not None]

    def item(self, question: EvalQuestion, type_: str) -> dict[str, Any]:
        """One question's row of the report: both answers, each round's verdict and the outcome."""
        first, second = self.answer_record(question, "a"), self.answer_record(question, "b")
        row: dict[str, Any] = {
            "id": question.id,
            "question": question.text,
            "type": type_,
            "answers": {"a": first["answer"] if first else None, "b": second["answer"] if second else None},
            "strategies": {"a": first and first.get("strategy"), "b": second and second.get("strategy")},
            "identical": bool(first and second and first["answer"].strip() == second["answer"].strip()),
            "rounds": [],
            "outcome": None,
        }
        if first is None or second is None:
            row["outcome"] = "no answer"
            return row
        if row["identical"]:
            row["outcome"] = "tie"
            return row
        rounds = self.rounds(question)
        row["rounds"] = [
            {
                "round": r["round"],
                "shown_first": r["shown_first"],
                "winner": r["winner"],
                "reason": r["verdict"]["reason"],
                "a": _reading(r, "a"),
                "b": _reading(r, "b"),
            }
            for r in rounds
        ]
        if self.judge is not None:
            row["outcome"] = combine([r["winner"] for r in rounds]) if len(rounds) == 2 else "judge failed"
        return row

    def usage(self) -> dict[str, dict[str, int]]:
        """Calls and tokens: each system's answers, the pairwise judge and LINKAGE (logged records, all runs)."""
        totals = {
            name: _total([r["usage"] for r in self.answers.values() if r["system"] == name])
            for name in (s.name for s in self.sides.values())
        }
        totals["judge"] = _total([r["usage"] for r in self.judgments.values()])
        totals["linkage"] = _total([r["usage"] for r in self.linkage.values()])
        return totals


def _reading(record: dict, system: str) -> dict:
    """The judge's reading of `system`'s answer in one round (the verdict names answers by shown position)."""
    label = "answer_a" if record["shown_first"] == system else "answer_b"
    return record["verdict"][label]


def _judgment_key(record: dict) -> tuple:
    return (record["question_id"], record["judge"], record["round"], record.get("pair"), record.get("prompt"))


def _pair_hash(question: str, first: str, second: str) -> str:
    return hashlib.sha256(json.dumps([question, first, second]).encode()).hexdigest()[:16]


def _answer_record(question: EvalQuestion, system: str, result) -> dict[str, Any]:
    return {
        "question_id": question.id,
        "system": system,
        "answer": result.reply,  # with knowledge = "labelled", what the model added follows, labelled: the judge reads it all
        "unsourced": list(result.unsourced.sentences) if result.unsourced is not None else [],
        "question": question.text,
        "method": result.method,
        "type": result.type.type if result.type is not None else None,
        "type_source": result.type.source if result.type is not None else None,
        "strategy": result.strategy,
        "generator": result.engines.generator,
        "abstained": result.abstained,
        "fallbacks": [f.reason for f in result.fallbacks],
        "usage": result.usage.model_dump(),
        "total_ms": result.timings_ms.get("total"),
    }


def _tallies(items: list[dict]) -> dict[str, Tally]:
    tallies: dict[str, Tally] = {}
    for item in items:
        for group in (ALL, item["type"]):
            tally = tallies.setdefault(group, Tally())
            tally.items += 1
            outcome = item["outcome"]
            if outcome in ("a", "b"):
                tally.wins[outcome] += 1
            elif outcome == "tie":
                tally.ties += 1
                tally.identical += item["identical"]
            elif outcome in ("judge failed", "no answer"):
                tally.failures += 1
            rounds = item["rounds"]
            if len(rounds) == 2 and rounds[0]["winner"] == rounds[1]["winner"]:
                tally.consistent += 1
            for system in "ab":
                for reading in rounds:
                    share = 1 / len(rounds)  # the mean of the orders' readings
                    tally.satisfies[system] += share * reading[system]["satisfies"]
                    tally.answering[system] += share * reading[system]["answering"]
                    tally.noise[system] += share * reading[system]["noise"]
    ordered = {ALL: tallies.pop(ALL, Tally())}
    ordered.update(sorted(tallies.items()))
    return ordered


async def _types(questions: list[EvalQuestion], run: _Run, a: Side, b: Side) -> dict[str, str]:
    """Each question's group: its type in the file, else the type a typed system routed it by, else the
    shipped classifier's (asked once here, through the first system's pipeline)."""
    types: dict[str, str] = {}
    for question in questions:
        if question.gold_type:
            types[question.id] = question.gold_type.strip().upper().replace("_", "-").replace(" ", "-")
            continue
        routed = [r.get("type") for key in "ab" if (r := run.answer_record(question, key)) and r.get("type")]
        if routed:
            types[question.id] = routed[0]
    missing = [q for q in questions if q.id not in types]
    for question in missing:
        try:
            types[question.id] = str((await a.pipeline.decide_type(question.text)).label)
        except (LLMError, QuestionError):
            types[question.id] = "unknown"
    return types


def _type_source(questions: list[EvalQuestion], a: Side, b: Side) -> str:
    if questions and all(q.gold_type for q in questions):
        return "the question file"
    typed = [s.name for s in (a, b) if Method(s.method) is Method.TYPED]
    given = "the question file where it names one, else " if any(q.gold_type for q in questions) else ""
    return given + (f"the type {typed[0]} routed by" if typed else "the shipped classifier")


def _linkage(questions, run: _Run, types: dict[str, str], judge: LLMJudge | None, referenced) -> dict | None:
    """MRR/MPR of each system among the references (LINKAGE convention), overall and per type."""
    if judge is None or not referenced:
        return None
    scores = []
    for question in referenced:
        count = len(select_references(question))
        for side in run.sides.values():
            positions = [
                run.linkage[k]["position"]
                for r in range(1, run.options.linkage_rounds + 1)
                if (k := (question.id, side.name, judge.name, r)) in run.linkage
            ]
            rank = question_rank(positions, count, RankConvention.LINKAGE)
            scores.append(
                Score(
                    question.id,
                    side.name,
                    "questions",
                    types[question.id],
                    count,
                    rank,
                    None if rank is not None else "judge",
                )
            )
    single = sum(len(select_references(q)) == 1 for q in referenced)
    return {
        "judge": judge.name,
        "rounds": run.options.linkage_rounds,
        "questions": len(referenced),
        "single_reference_questions": single,
        "cells": [asdict(c) for c in cells(scores) if c.source == ALL],
    }


def _describe(side: Side) -> dict[str, Any]:
    pipeline = side.pipeline
    model = getattr(pipeline.engine, "model", None)
    index = pipeline.retriever.describe() if pipeline.retriever is not None else None
    return {
        "method": str(Method(side.method)),
        "described": side.described or str(side.method),
        "generator": pipeline.engine.name,
        "model": getattr(model, "model", None),
        "base_url": redact_url(getattr(model, "base_url", None)),
        "index": None if index is None else str(Path(index.index_dir).resolve()) if index.index_dir else index.name,
        "passages_sha256": index.manifest.get("corpus", {}).get("passages_sha256")
        if index and index.manifest is not None
        else None,
        "top_k": pipeline.settings.top_k,
        "aspect_k": pipeline.settings.aspect_k,
        "classifier": _classifier_name(pipeline),
    }


def _classifier_name(pipeline: Pipeline) -> str:
    """The classifier a typed answer routes by; the shipped one by one name whether or not it is loaded yet."""
    from typedrag.classify.shipped import ShippedClassifier

    classifier = pipeline.classifier
    return "shipped" if classifier is None or isinstance(classifier, ShippedClassifier) else classifier.name


def _identity(a: Side, b: Side, seed: int) -> dict[str, Any]:
    return {"systems": {side.name: _describe(side) for side in (a, b)}, "seed": seed, "prompt_version": PROMPT_VERSION}


def _claim(out: Path, identity: dict) -> None:
    """Record what produced this run directory's answers; refuse to mix in answers from anything else."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / RUN_FILE
    if path.exists():
        existing = json.loads(path.read_text(encoding="utf-8"))
        if existing != json.loads(json.dumps(identity)):
            changed = sorted(k for k in set(existing) | set(identity) if existing.get(k) != identity.get(k))
            raise RunError(
                f"{out} holds a comparison of a different set-up ({', '.join(changed)} changed); use another --out"
            )
        return
    path.write_text(json.dumps(identity, indent=2) + "\n", encoding="utf-8")


def _judge_config(judge: PairwiseJudge | None) -> dict[str, Any] | None:
    if judge is None:
        return None
    model = judge.model
    return {
        "name": judge.name,
        "model": getattr(model, "model", None),
        "base_url": redact_url(getattr(model, "base_url", None)),
        "prompt": "pairwise_judge",
        "prompt_sha256": prompt_fingerprint(),
        "orders": "each pair judged in both orders; the system shown first in round 1 drawn per question",
        "temperature": 0.0,
    }


def _total(usages: list[dict]) -> dict[str, int]:
    total = dict.fromkeys(Usage.model_fields, 0)
    for usage in usages:
        for key in total:
            total[key] += usage.get(key, 0)
    return total
