"""Batch `ask` and `classify` over a file of questions.

Answers are appended to a crash-safe JSONL log as each completes; rerunning the same command
skips ids already there, so a killed batch loses nothing and duplicates nothing. Transient
failures (endpoint errors) are not logged, so the rerun retries them; bad questions are logged
with their error, since retrying cannot fix them.
"""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path
from typing import TextIO

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from typedrag.classify.base import TypePrediction
from typedrag.errors import LLMError, QuestionError
from typedrag.jsonlog import JsonlLog
from typedrag.nfq import NFQType
from typedrag.pipeline import Pipeline


def read_questions(path: Path) -> list[tuple[str, str]]:
    """(id, question) pairs from a .txt file (one per line, id `line-N`) or JSONL ({question, id?})."""
    items: list[tuple[str, str]] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            if path.suffix != ".jsonl":
                items.append((f"line-{number}", line.strip()))
                continue
            try:
                row = json.loads(line)
                question = row["question"]
            except (ValueError, KeyError, TypeError):
                raise QuestionError(f"{path}:{number}: expected a JSON object with a 'question' field") from None
            items.append((str(row.get("id", f"line-{number}")), str(question)))
    return items


async def answer_file(
    pipeline: Pipeline,
    questions: Path,
    out: Path,
    method: str,
    forced_type: str | None,
    concurrency: int,
) -> tuple[int, int]:
    """Answer every question not yet in `out`; returns (answered now, failed now)."""
    items = read_questions(questions)
    log = JsonlLog(out)
    finished = {record["id"] for record in log.records}
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


def write_predictions(stream: TextIO, items: list[tuple[str, str]], predictions: list[TypePrediction], fmt: str) -> None:
    labels = list(NFQType)
    if fmt == "csv":
        writer = csv.writer(stream)
        writer.writerow(["id", "question", "type", "confidence", "source", *[l.value for l in labels]])
        for (item_id, question), p in zip(items, predictions):
            probs = [f"{p.probabilities.get(l, 0.0):.4f}" for l in labels]
            writer.writerow([item_id, question, str(p.label), f"{p.confidence:.4f}", p.source, *probs])
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
