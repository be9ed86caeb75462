"""Candidate sentences for reader labels (../shared/data/reader-labels), made the way the existing labels were:
every sentence of 4 words or more (split by `typedrag.text.split_sentences`) of the first ten sources of
typedrag's typed answer, offline, at most 24 per question, sampled, cut at 600 characters.

    python scripts/reader_candidates.py --index IDX/click-docs \\
        --questions Q/click-docs.jsonl --out C/click-docs.jsonl

(bench/data/reader-labels/README.md: how the repository's labels were made, step by step.)

A question line is `{"qid", "corpus", "type", "question"}` (other fields stay in the question file). The output has one
line per pair: `pid, qid, corpus, question, type, passage_id, title, section, sentence` as in the shared pairs,
and what typedrag knows of the sentence: `block` (the kind of the line it came from: prose, item, code, table,
admonition, caption, heading, notice; null when the index does not know), `item_order` (an ordered item's
position), `source_rank` (the source's number in the answer), `page`. A pid is the question's id and a hash of
the passage id and the sentence, so it stays the same whichever pairs a later run samples.
Deterministic: the sample of each question is drawn from a generator seeded with `--seed` and the qid, and the
questions are answered one at a time. A run that stops resumes: questions already in `--out` are skipped.
`--meta` (default: OUT with .meta.jsonl) gets one line per question: the strategy, the type typedrag routed it
as, whether it abstained, and how many candidates there were before sampling.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path

from typedrag.config import load_settings
from typedrag.factory import Resources, build_pipeline
from typedrag.result import Source
from typedrag.text import split_sentences

MIN_WORDS = 4
MAX_CHARS = 600


def pair_id(qid: str, passage_id: str, sentence: str) -> str:
    digest = hashlib.sha1(f"{passage_id}\n{sentence}".encode("utf-8")).hexdigest()[:10]
    return f"{qid}:{digest}"


def sentences_of(source: Source) -> list[dict]:
    """The source's sentences of MIN_WORDS words or more, each with the kind of the line it starts on."""
    text = source.text
    known = len(source.lines) == text.count("\n") + 1  # one kind per line, or the kinds are not this text's
    out = []
    position = 0
    for sentence in split_sentences(text):
        start = text.find(sentence, position)
        if start < 0:  # split_sentences only strips; a sentence is always found, but never guess a line
            line = None
        else:
            line = text.count("\n", 0, start)
            position = start + len(sentence)
        if len(sentence.split()) < MIN_WORDS:
            continue
        kind = source.lines[line] if (line is not None and known) else None
        out.append(
            {
                "sentence": sentence[:MAX_CHARS],
                "block": kind.kind.value if kind is not None else None,
                "item_order": kind.order if kind is not None else None,
            }
        )
    return out


def candidates(
    question: dict, sources: list[Source], *, seed: int, max_pairs: int, max_sources: int
) -> tuple[list[dict], int]:
    """The question's pairs (sampled down to `max_pairs`) and how many candidates there were before sampling.

    Sentences are deduplicated by their text (the first source keeps it); the sample keeps the sources' order,
    and within a passage the sentences are shuffled so that no labeller reads a passage top to bottom."""
    rng = random.Random(f"{seed}:{question['qid']}")
    pool: list[dict] = []
    seen: set[str] = set()
    for source in sorted(sources, key=lambda s: s.number)[:max_sources]:
        for item in sentences_of(source):
            if item["sentence"] in seen:
                continue
            seen.add(item["sentence"])
            pool.append({**item, "source": source})
    total = len(pool)
    if total > max_pairs:
        keep = sorted(rng.sample(range(total), max_pairs))
        pool = [pool[i] for i in keep]
    by_source: dict[int, list[dict]] = {}
    for item in pool:
        by_source.setdefault(item["source"].number, []).append(item)
    pairs = []
    for number in sorted(by_source):
        group = by_source[number]
        rng.shuffle(group)
        for item in group:
            source: Source = item["source"]
            pairs.append(
                {
                    "pid": pair_id(question["qid"], source.passage_id, item["sentence"]),
                    "qid": question["qid"],
                    "corpus": question["corpus"],
                    "question": question["question"],
                    "type": question.get("type"),
                    "passage_id": source.passage_id,
                    "title": source.title,
                    "section": source.section,
                    "sentence": item["sentence"],
                    "block": item["block"],
                    "item_order": item["item_order"],
                    "source_rank": source.number,
                    "page": source.page,
                }
            )
    return pairs, total


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parents[1],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


async def run(args: argparse.Namespace) -> None:
    questions = read_jsonl(args.questions)
    ids = [q["qid"] for q in questions]
    if len(set(ids)) != len(ids):
        raise SystemExit(f"{args.questions}: duplicate qids")
    meta_path = args.meta or args.out.with_suffix(".meta.jsonl")
    done = {row["qid"] for row in read_jsonl(meta_path)} if meta_path.exists() else set()
    if done and args.out.exists():  # a run stopped mid-question: drop that question's pairs, answer it again
        kept = [row for row in read_jsonl(args.out) if row["qid"] in done]
        args.out.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in kept), encoding="utf-8")
    elif args.out.exists():
        args.out.unlink()
    todo = [q for q in questions if q["qid"] not in done]
    if not todo:
        print(f"{args.out}: all {len(questions)} questions done", file=sys.stderr)
        return
    # The offline engine, whatever the environment or a config file says: the labels are of typedrag's default.
    settings = load_settings({"index": str(args.index), "llm.model": "offline"}, env={})
    pipeline = build_pipeline(settings, Resources())
    version = commit()
    with args.out.open("a", encoding="utf-8") as out, meta_path.open("a", encoding="utf-8") as meta:
        for number, question in enumerate(todo, 1):
            result = await pipeline.answer(question["question"], args.method)
            pairs, total = candidates(
                question, result.sources, seed=args.seed, max_pairs=args.max_pairs, max_sources=args.max_sources
            )
            for pair in pairs:
                out.write(json.dumps(pair, ensure_ascii=False) + "\n")
            out.flush()
            meta.write(
                json.dumps(
                    {
                        "qid": question["qid"],
                        "corpus": question["corpus"],
                        "method": args.method,
                        "strategy": result.strategy,
                        "routed_type": result.type.type if result.type else None,
                        "abstained": result.abstained,
                        "sources": len(result.sources),
                        "candidates": total,
                        "pairs": len(pairs),
                        "seed": args.seed,
                        "commit": version,
                        "engines": result.engines.model_dump(mode="json"),
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
            meta.flush()
            if number % 10 == 0 or number == len(todo):
                print(f"{args.out.name}: {number}/{len(todo)} questions", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True, help="a typedrag index")
    parser.add_argument("--questions", type=Path, required=True, help="JSON lines: qid, corpus, type, question")
    parser.add_argument("--out", type=Path, required=True, help="the pairs, JSON lines")
    parser.add_argument("--meta", type=Path, help="one line per question (default: OUT with .meta.jsonl)")
    parser.add_argument("--method", default="typed", choices=("typed", "rag"))
    parser.add_argument("--seed", type=int, default=55)
    parser.add_argument("--max-pairs", type=int, default=24)
    parser.add_argument("--max-sources", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
