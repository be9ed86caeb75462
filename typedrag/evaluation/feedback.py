"""`typedrag eval export-feedback`: the questions users asked on `serve` and their verdicts, as an evaluation set.

One JSONL row per distinct question of a collection, in the format `eval compare` and `eval retrieval` read:
`question` (a follow-up as it was answered, rewritten to stand alone), `id` (stable across exports), `type`
(as typedrag routed it), and `relevant`: the passages users marked as helpful, each a group of its own, where
they marked any. Beside them, what the readers ignore and a person reads: `collection`, `verdict` (up, down or
mixed), `votes`, `comments` and the answers' `trace_ids`. Who voted is not written.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from typedrag.commands import DatabaseOpt, DataOpt

FEEDBACK_FILE = Path("typedrag-feedback.jsonl")


def feedback_questions(records: Iterable[Any]) -> list[dict[str, Any]]:
    """Verdicts (typedrag.store.FeedbackRecord, oldest first) grouped into one row per collection and question."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        question = " ".join(record.question.split())
        if not question:
            continue
        key = (record.collection, question.casefold())
        row = rows.get(key)
        if row is None:
            digest = hashlib.sha256(f"{record.collection}\n{question.casefold()}".encode()).hexdigest()[:16]
            row = rows[key] = {
                "id": f"fb-{digest}",
                "question": question,
                "type": None,
                "collection": record.collection,
                "verdict": None,
                "votes": {"up": 0, "down": 0},
                "comments": [],
                "relevant": [],
                "trace_ids": [],
            }
        row["votes"][record.verdict] += 1
        row["type"] = record.type or row["type"]  # the latest routing
        if record.comment and record.comment not in row["comments"]:
            row["comments"].append(record.comment)
        row["relevant"] += [p for p in record.helpful if p not in row["relevant"]]
        if record.trace_id and record.trace_id not in row["trace_ids"]:
            row["trace_ids"].append(record.trace_id)
    for row in rows.values():
        up, down = row["votes"]["up"], row["votes"]["down"]
        row["verdict"] = "up" if not down else "down" if not up else "mixed"
        if not row["relevant"]:
            del row["relevant"]
        if row["type"] is None:
            del row["type"]
    return list(rows.values())


def write_jsonl(rows: list[dict[str, Any]], out: Path) -> None:
    """All rows or none: written beside `out`, then moved over it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    with partial.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    partial.replace(out)


def export_feedback_command(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="The JSONL file to write (replaced if it exists).")
    ] = FEEDBACK_FILE,
    collection: Annotated[
        Optional[str], typer.Option("--collection", help="Only the questions asked in this collection.")
    ] = None,
    verdict: Annotated[
        Optional[str], typer.Option("--verdict", help="Only questions whose verdict is up, down or mixed.")
    ] = None,
    data: DataOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Write the questions users asked on `typedrag serve` and their verdicts as JSONL, with the passages they marked as
    helpful as relevant ids: the file `eval compare` and `eval retrieval --questions` read as it is."""
    from typedrag.commands import errors, fail, settings_from, store_from
    from typedrag.store import StoreError, StoreUnavailable
    from typedrag.text import for_terminal

    if verdict is not None and verdict not in ("up", "down", "mixed"):
        fail("--verdict is up, down or mixed")
    store = store_from(settings_from(data=data, database=database))
    try:
        rows = feedback_questions(store.feedback_records(collection))
    except (StoreError, StoreUnavailable) as error:
        fail(str(error))
    finally:
        store.close()
    if verdict is not None:
        rows = [row for row in rows if row["verdict"] == verdict]
    if not rows:
        fail(
            "no feedback to export"
            + (" with those filters" if collection or verdict else ": nobody has rated an answer yet")
        )
    try:
        write_jsonl(rows, out)
    except OSError as error:
        fail(f"cannot write {out}: {error.strerror or error}")
    with_relevant = sum("relevant" in row for row in rows)
    errors.print(
        for_terminal(
            f"{len(rows):,} questions -> {out} ({with_relevant:,} with passages marked helpful; "
            f"up {sum(r['verdict'] == 'up' for r in rows):,}, down {sum(r['verdict'] == 'down' for r in rows):,}, "
            f"mixed {sum(r['verdict'] == 'mixed' for r in rows):,})"
        ),
        markup=False,
    )
