"""Run an evaluation: answer every (question, method), judge every (question, method, round), score.

Crash-safe and resumable: each answer and verdict is appended to a JSONL file in the run
directory the moment it exists (flushed and fsynced). Rerunning the same command skips answers
and verdicts already there; a torn last line left by a crash is discarded on load. A run
directory belongs to one generator, index, classifier and prompt version (checked via run.json);
verdicts are keyed by judge, so different judges can share a run directory without mixing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from typedrag.config import Settings
from typedrag.evaluation.datasets import EvalQuestion, load_dataset, stratified_sample
from typedrag.evaluation.judges import JUDGE_TEMPERATURE, Judge, build_judge
from typedrag.evaluation.linkage import RankConvention, question_rank, select_references
from typedrag.evaluation.metrics import Score, cells
from typedrag.jsonlog import JsonlLog
from typedrag.llm.base import LLMError
from typedrag.nfq import NFQType
from typedrag.prompts import LINKAGE_JUDGE, PROMPT_VERSION
from typedrag.questions import QuestionError
from typedrag.result import Usage

ANSWERS = "answers.jsonl"
VERDICTS = "verdicts.jsonl"
RUN_FILE = "run.json"
METHODS = ("llm", "rag", "typed")
OFFLINE_LLM_NOTE = (
    "llm (LLM-only) not run: the offline engine has no closed-book answer, so there is nothing to score; "
    "give a generator with --llm/--base-url for this baseline"
)
SELECTION_RULE = (
    "filter by --types (predicted), then the first --limit of a seeded shuffle stratified over source files "
    "(proportional quotas, largest remainder)"
)


class RunError(ValueError):
    """The run directory cannot be used as asked (message says why and what to do)."""


@dataclass
class EvalOptions:
    dataset: Path
    out: Path
    methods: tuple[str, ...] = METHODS
    limit: int | None = None
    types: tuple[NFQType, ...] = ()
    rounds: int = 3
    convention: RankConvention = RankConvention.LINKAGE
    concurrency: int = 4
    seed: int = 0
    show_progress: bool = True


@dataclass
class EvalOutcome:
    summary: dict[str, Any]
    files: dict[str, Path]


def evaluate(options: EvalOptions, settings: Settings) -> EvalOutcome:
    """Run (or resume) the evaluation and write the reports into `options.out`."""
    from typedrag.factory import Resources

    resources = Resources()
    try:
        return asyncio.run(resources.run(_evaluate(options, settings, resources)))
    finally:
        resources.close()


async def _evaluate(options: EvalOptions, settings: Settings, resources) -> EvalOutcome:
    from typedrag.evaluation.report import write_report
    from typedrag.factory import build_pipeline

    started = time.perf_counter()
    unknown = set(options.methods) - set(METHODS)
    if unknown or not options.methods:
        raise RunError(f"unknown methods {sorted(unknown)}; choose from {', '.join(METHODS)}")
    methods = list(dict.fromkeys(options.methods))
    notes = []
    if settings.llm.is_offline and "llm" in methods:
        methods.remove("llm")
        notes.append(OFFLINE_LLM_NOTE)
    dataset = load_dataset(options.dataset)
    pipeline = build_pipeline(settings, resources, need_index=any(m != "llm" for m in methods))
    questions, predictions = await _select(dataset, options, pipeline)
    judge = build_judge(settings.judge, settings.cache_dir, resources)
    rounds = 1 if judge.is_proxy else options.rounds
    if judge.is_proxy and options.rounds != 1:
        notes.append("the proxy judge is deterministic, so it runs one round whatever --rounds says")
    classifier = ", ".join(sorted({p.source for p in predictions.values()})) or "none"
    index = _index_fingerprint(settings, pipeline.retriever) if methods != ["llm"] else {}
    identity = {
        "dataset": str(options.dataset.resolve()),
        "generator": pipeline.engine.name,
        "index": index.get("path"),
        "corpus": index.get("passages_sha256"),
        "classifier": classifier,
        "assume_non_factoid": settings.assume_non_factoid,
        "prompt_version": PROMPT_VERSION,
        "top_k": settings.top_k,
        "aspect_k": settings.aspect_k,
    }
    _claim(options.out, identity)

    answers_log, verdicts_log = JsonlLog(options.out / ANSWERS), JsonlLog(options.out / VERDICTS)
    answers = {(r["question_id"], r["method"]): r for r in answers_log.records}
    verdicts = {(r["question_id"], r["method"], r["judge"], r["round"]): r for r in verdicts_log.records}
    errors: list[str] = []
    progress = Progress(
        TextColumn("{task.description:>9}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not options.show_progress,
    )
    answer_bar = progress.add_task("answers", total=len(questions) * len(methods))
    verdict_bar = progress.add_task("verdicts", total=len(questions) * len(methods) * rounds)
    limit = asyncio.Semaphore(options.concurrency)

    async def run_method(question: EvalQuestion, method: str) -> None:
        record = answers.get((question.id, method))
        if record is None:
            try:
                result = await pipeline.answer(question.text, method, decision=predictions[question.id])
            except (LLMError, QuestionError) as error:
                errors.append(f"answer {question.id} {method}: {error}")
                progress.advance(answer_bar)
                progress.advance(verdict_bar, rounds)
                return
            record = _answer_record(question, method, predictions[question.id].label.value, result)
            answers_log.append(record)
            answers[(question.id, method)] = record
        progress.advance(answer_bar)
        references = select_references(question)
        pending = [r for r in range(1, rounds + 1) if (question.id, method, judge.name, r) not in verdicts]
        progress.advance(verdict_bar, rounds - len(pending))
        await asyncio.gather(*(judge_round(question, method, record["answer"], references, r) for r in pending))

    async def judge_round(question: EvalQuestion, method: str, answer: str, references, round_: int) -> None:
        try:
            verdict = await judge.place(question.text, references, answer, round_)
        except LLMError as error:
            errors.append(f"judge {question.id} {method} round {round_}: {error}")
            return
        finally:
            progress.advance(verdict_bar)
        record = _verdict_record(question, method, judge.name, round_, references, verdict)
        verdicts_log.append(record)
        verdicts[(question.id, method, judge.name, round_)] = record

    async def run_question(question: EvalQuestion) -> None:
        async with limit:
            for method in methods:
                await run_method(question, method)

    try:
        with progress:
            await asyncio.gather(*(run_question(q) for q in questions))
    finally:
        answers_log.close()
        verdicts_log.close()

    scores = _scores(questions, methods, predictions, answers, verdicts, judge.name, rounds, options.convention)
    summary = {
        "configuration": {
            "dataset": identity["dataset"],
            "questions_in_dataset": len(dataset),
            "questions_selected": len(questions),
            "limit": options.limit,
            "types": [t.value for t in options.types],
            "selection": SELECTION_RULE,
            "seed": options.seed,
            "methods": methods,
            "requested_methods": list(options.methods),
            "generator": {"engine": pipeline.engine.name, "model": settings.llm.model, "base_url": settings.llm.base_url},
            "judge": _judge_config(judge, settings),
            "rank_convention": options.convention.value,
            "rounds": rounds,
            "round_aggregation": "median rank of the rounds whose verdict parsed; none parsed = judge failure",
            "classifier": classifier,
            "index": index or None,
            "top_k": settings.top_k,
            "aspect_k": settings.aspect_k,
            "concurrency": options.concurrency,
            "prompt_version": PROMPT_VERSION,
            "git": _git_state(),
        },
        "notes": notes,
        "errors_this_run": errors,
        "per_method": _per_method(scores, methods, questions, answers, verdicts, judge.name, rounds),
        "cells": [asdict(c) for c in cells(scores)],
        "seconds_this_run": round(time.perf_counter() - started, 1),
    }
    files = write_report(options.out, summary)
    return EvalOutcome(summary, files)


def _answer_record(question: EvalQuestion, method: str, predicted_type: str, result) -> dict[str, Any]:
    return {
        "question_id": question.id,
        "method": method,
        "source": question.source,
        "predicted_type": predicted_type,
        "gold_type": question.gold_type,
        "answer": result.answer,
        "strategy": result.strategy,
        "generator": result.engines.generator,
        "fallbacks": [f.reason for f in result.fallbacks],
        "usage": result.usage.model_dump(),
        "total_ms": result.timings_ms.get("total"),
    }


def _verdict_record(question: EvalQuestion, method: str, judge: str, round_: int, references, verdict) -> dict[str, Any]:
    return {
        "question_id": question.id,
        "method": method,
        "judge": judge,
        "round": round_,
        "position": verdict.position,
        "references": len(references),
        "reference_grades": [r.grade for r in references],
        "reply": verdict.reply,
        "retried": verdict.retried,
        "usage": Usage.of(verdict.calls).model_dump(),
    }


async def _select(dataset: list[EvalQuestion], options: EvalOptions, pipeline) -> tuple[list[EvalQuestion], dict]:
    """Questions to run and their types, decided once by the pipeline's own routing and shared by every
    method's row; the whole dataset is classified only when filtering by type."""
    pool = dataset if options.types else stratified_sample(dataset, options.limit, options.seed)
    limit = asyncio.Semaphore(options.concurrency)

    async def decide(question: EvalQuestion):
        async with limit:
            return await pipeline.decide_type(question.text)

    predictions = dict(zip((q.id for q in pool), await asyncio.gather(*(decide(q) for q in pool))))
    if options.types:
        pool = stratified_sample([q for q in pool if predictions[q.id].label in options.types], options.limit, options.seed)
    if not pool:
        raise RunError("no question to evaluate: the dataset is empty or no question has the --types asked for")
    return pool, {q.id: predictions[q.id] for q in pool}


def _claim(out: Path, identity: dict) -> None:
    """Record what produced this run directory's answers; refuse to mix in answers from anything else."""
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


def _scores(questions, methods, predictions, answers, verdicts, judge_name, rounds, convention) -> list[Score]:
    scores = []
    for question in questions:
        count = len(select_references(question))
        for method in methods:
            common = {
                "question_id": question.id,
                "method": method,
                "source": question.source,
                "type": predictions[question.id].label.value,
                "references": count,
            }
            if (question.id, method) not in answers:
                scores.append(Score(**common, rank=None, failure="answer"))
                continue
            positions = [
                verdicts[key]["position"]
                for r in range(1, rounds + 1)
                if (key := (question.id, method, judge_name, r)) in verdicts
            ]
            rank = question_rank(positions, count, convention)
            scores.append(Score(**common, rank=rank, failure=None if rank is not None else "judge"))
    return scores


def _per_method(scores, methods, questions, answers, verdicts, judge_name, rounds) -> dict[str, dict]:
    """Counts, failures, and generator and judge calls/tokens for each method (selected questions only)."""
    result = {}
    for method in methods:
        mine = [s for s in scores if s.method == method]
        answer_records = [answers[(q.id, method)] for q in questions if (q.id, method) in answers]
        verdict_records = [
            verdicts[key]
            for q in questions
            for r in range(1, rounds + 1)
            if (key := (q.id, method, judge_name, r)) in verdicts
        ]
        result[method] = {
            "questions": len(mine),
            "scored": sum(s.rank is not None for s in mine),
            "answer_failures": sum(s.failure == "answer" for s in mine),
            "judge_failures": sum(s.failure == "judge" for s in mine),
            "verdict_rounds": len(verdict_records),
            "unparsable_rounds": sum(v["position"] is None for v in verdict_records),
            "retried_rounds": sum(v["retried"] for v in verdict_records),
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


def _judge_config(judge: Judge, settings: Settings) -> dict[str, Any]:
    if judge.is_proxy:
        return {"kind": "proxy", "name": judge.name, "rule": "see typedrag.evaluation.judges.ProxyJudge"}
    return {
        "kind": "llm",
        "name": judge.name,
        "model": settings.judge.model,
        "base_url": settings.judge.base_url,
        "temperature": JUDGE_TEMPERATURE,
        "prompt": LINKAGE_JUDGE.name,
        "prompt_sha256": hashlib.sha256((LINKAGE_JUDGE.system + LINKAGE_JUDGE.user).encode()).hexdigest()[:16],
    }


def _index_fingerprint(settings: Settings, retriever: Any) -> dict[str, Any]:
    if settings.backend == "milvus":  # a run resumes only against the same server, collection, mode and corpus
        return {"path": retriever.name, "passages_sha256": retriever.manifest["corpus"]["passages_sha256"]}
    index = Path(settings.index)
    manifest = index / "manifest.json"
    if not manifest.is_file():
        return {"path": str(index.resolve())}
    data = manifest.read_bytes()
    corpus = json.loads(data).get("corpus", {})
    return {
        "path": str(index.resolve()),
        "manifest_sha256": hashlib.sha256(data).hexdigest(),
        "passages_sha256": corpus.get("passages_sha256"),
    }


def _git_state() -> dict[str, Any] | None:
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        status = subprocess.run(["git", "-C", str(here), "status", "--porcelain"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
