"""Offline questions that use a name no passage holds: which the manual answers, and what the reader made of them.

    python bench/bench_unmentioned_names.py --questions bench/data/reader-labels/questions.jsonl \\
        --index bash-manual=IDX/bash-manual --index bind9-arm=IDX/bind9-arm ...     # indexes from corpora.tsv

Each question line holds `question`, `answerable` and `corpus` (the reader labels' questions), or any question set
with `answerable` and one `--index` named `*`. For every question whose names no passage holds
(`typedrag.abstain.unmentioned_names`), plain RAG answers offline and the script records how: turned down by the
relevance bar, turned down for the name with the reader's best chance (`Abstention.score`), or answered with it (the
trace's note). It prints the table the name's bar (`abstain.NAMED_BAR`) was chosen on
(docs/lab/2026-12-07-unmentioned-names.md) and, with `--out`, one JSON line per question.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
from pathlib import Path

from typedrag.abstain import NAMED_BAR, UNMENTIONED, unmentioned_names
from typedrag.engines.offline import OfflineEngine
from typedrag.index import open_retriever
from typedrag.pipeline import Pipeline

_STOOD = re.compile(r"answered because the reader model reads a sentence as answering the question at ([0-9.]+)")


def outcome(result) -> tuple[str, float | None]:
    """How the answer went: ("relevance bar" | "name bar" | "answered" | other abstentions' `by`, reader's best)."""
    if result.abstention is not None:
        if result.abstention.by == UNMENTIONED and result.abstention.bar is not None:
            return "name bar", result.abstention.score
        return result.abstention.by if result.abstention.by != UNMENTIONED else "relevance bar", None
    for note in (note for step in result.steps for note in step.notes):
        if found := _STOOD.search(note):
            return "answered", float(found.group(1))
    return "answered", None


async def run(questions: list[dict], indexes: dict[str, str]) -> list[dict]:
    rows = []
    pipelines: dict[str, tuple[Pipeline, object]] = {}
    for item in questions:
        where = indexes.get(item.get("corpus", "*"), indexes.get("*"))
        if where is None:
            continue
        if where not in pipelines:
            retriever = open_retriever(where)
            pipelines[where] = (Pipeline(OfflineEngine(), retriever), retriever)
        pipeline, retriever = pipelines[where]
        names = unmentioned_names(item["question"], retriever)
        if not names:
            continue
        how, best = outcome(await pipeline.answer(item["question"], "rag"))
        rows.append({**item, "names": names, "outcome": how, "best": best})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=Path, nargs="+", required=True)
    parser.add_argument("--index", action="append", default=[], help="CORPUS=INDEX_DIR (CORPUS * for any)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    indexes = dict(spec.split("=", 1) for spec in args.index)
    questions = [json.loads(line) for path in args.questions for line in path.open() if line.strip()]
    rows = asyncio.run(run(questions, indexes))
    if args.out:
        args.out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    table = collections.Counter()
    for row in rows:
        band = row["outcome"] if row["best"] is None else ("at or above" if row["best"] >= NAMED_BAR else "below")
        table[band, bool(row["answerable"])] += 1
    print(f"{len(rows)} of {len(questions)} questions use a name no passage holds; the name's bar {NAMED_BAR}")
    print("| outcome | unanswerable | answerable |\n|---|---:|---:|")
    for band in sorted({band for band, _ in table}):
        print(f"| {band} | {table[band, False]} | {table[band, True]} |")
    for row in sorted(rows, key=lambda r: (r["best"] is None, r["best"] or 0)):
        print(row["answerable"], row["outcome"], row["best"], row["names"], row["question"][:80])


if __name__ == "__main__":
    main()
