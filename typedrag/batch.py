"""Batch `ask` and `classify` over a file of questions.

Answers are appended to a crash-safe JSONL log as each completes; rerunning the same command
skips ids already there, so a killed batch loses nothing and duplicates nothing. Transient
failures (endpoint errors) are not logged, so the rerun retries them; bad questions are logged
with their error, since retrying cannot fix them.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import json
import logging
from pathlib import Path
from typing import TextIO

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from typedrag.classify.base import TypePrediction
from typedrag.errors import LLMError, QuestionError
from typedrag.jsonlog import JsonlLog, json_row, numbered_lines
from typedrag.nfq import NFQType
from typedrag.pipeline import Pipeline
from typedrag.text import for_terminal


logger = logging.getLogger("typedrag.batch")
ANSWER_KEYS = ("id", "question")  # every record of an `ask --out` log holds these (and a result or an error)


def content_id(question: str) -> str:
    """The id of a question without one: `q-` + the first 12 hex digits of the sha256 of its text with
    whitespace collapsed. It follows the question when lines are added, removed or reordered, so a
    resumed batch neither answers a question twice nor skips one (line numbers did both)."""
    return "q-" + hashlib.sha256(" ".join(question.split()).encode()).hexdigest()[:12]


def read_questions(path: Path) -> list[tuple[str, str]]:
    """(id, question) pairs from a .txt file (one per line) or JSONL ({question, id?}); ids default to
    `content_id`. A repeated id (the same question twice in a .txt) is reported and skipped."""
    items: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    try:
        lines = list(numbered_lines(path))
    except ValueError as error:  # a line that is not UTF-8, named
        raise QuestionError(str(error)) from None
    for number, line in lines:
        if path.suffix != ".jsonl":
            question = line.strip()
            item_id = content_id(question)
        else:
            try:
                row = json_row(line)
                question = row["question"]
                if (
                    not isinstance(question, str)
                    or not isinstance(row.get("id"), str | int | None)
                    or isinstance(row.get("id"), bool)
                ):
                    raise TypeError
            except ValueError as error:
                raise QuestionError(f"{path}:{number}: not JSON ({' '.join(str(error).split())[:200]})") from None
            except (KeyError, TypeError):
                raise QuestionError(
                    f"{path}:{number}: expected a JSON object with a 'question' field of text (and an 'id', text or a number)"
                ) from None
            item_id = str(row["id"]) if row.get("id") is not None else content_id(question)
        if item_id in seen:
            logger.warning(
                for_terminal(f"{path}:{number}: duplicate id {item_id!r} (first on line {seen[item_id]}), skipped")
            )
            continue
        seen[item_id] = number
        items.append((item_id, question))
    return items


def _finished(records: list[dict]) -> set[str]:
    """Ids already in an output log; a log written with the old `line-N` ids counts by its questions."""
    done = set()
    for record in records:
        done.add(record["id"])
        if str(record["id"]).startswith("line-") and isinstance(record.get("question"), str):
            done.add(content_id(record["question"]))
    return done


async def answer_file(
    pipeline: Pipeline,
    questions: Path,
    out: Path,
    method: str,
    forced_type: str | None,
    concurrency: int,
) -> tuple[int, int]:
    """Answer every question not yet in `out`; returns (answered now, failed now)."""
    if out.exists() and questions.exists() and out.samefile(questions):
        raise QuestionError(f"--out {out} is the question file itself; give --out a new file for the answers")
    items = read_questions(questions)
    log = JsonlLog(out, ANSWER_KEYS)
    finished = _finished(log.records)
    pending = [(i, q) for i, q in items if i not in finished]
    limit = asyncio.Semaphore(concurrency)
    counts = {"done": 0, "failed": 0}
    columns = (TextColumn("answering"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task("answering", total=len(pending))

        async def one(item_id: str, question: str) -> None:
            async with limit:
                try:
                    result = await pipeline.answer(question, method, forced_type)
                    log.append({"id": item_id, "question": question, "result": result.model_dump(mode="json")})
                    counts["done"] += 1
                except QuestionError as error:
                    log.append({"id": item_id, "question": question, "error": str(error)})
                    counts["failed"] += 1
                except LLMError:
                    counts["failed"] += 1  # not logged: the next run retries it
                progress.advance(task)

        try:
            await asyncio.gather(*(one(i, q) for i, q in pending))
        finally:
            log.close()
    return counts["done"], counts["failed"]


def write_predictions(
    stream: TextIO, items: list[tuple[str, str]], predictions: list[TypePrediction], fmt: str, shown=str
) -> None:
    """JSONL (control characters escaped by JSON) or CSV, whose text fields pass through `shown`."""
    labels = list(NFQType)
    if fmt == "csv":
        writer = csv.writer(stream)
        writer.writerow(["id", "question", "type", "confidence", "source", *[l.value for l in labels]])
        for (item_id, question), p in zip(items, predictions):
            probs = [f"{p.probabilities.get(l, 0.0):.4f}" for l in labels]
            writer.writerow([shown(item_id), shown(question), str(p.label), f"{p.confidence:.4f}", p.source, *probs])
        return
    for (item_id, question), p in zip(items, predictions):
        record = {
            "id": item_id,
            "question": question,
            "type": str(p.label),
            "confidence": round(p.confidence, 4),
            "source": p.source,
            "probabilities": {str(l): round(v, 4) for l, v in p.probabilities.items()},
        }
        stream.write(json.dumps(record, ensure_ascii=False) + "\n")
