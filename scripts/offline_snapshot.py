"""Every offline answer on the key-term corpora and the conversational set, with its trace, as JSON lines:
to check that a change to the code behind the answers leaves them byte-identical.

Each question of bench/data/keyterms*.jsonl, and each user turn of bench/data/conversations.jsonl (with the
conversation so far: earlier turns and the answers this method gave them), is answered with `rag` and with
`typed` by the offline engine, one at a time, on the indexes bench/bench_quality.py builds (plus PostgreSQL's
manual for the conversations). A line holds the whole result but what differs from run to run (timings and
latencies). Run it on two checkouts and diff:

    PYTHONPATH=/path/to/old python scripts/offline_snapshot.py --corpora-dir /tmp/corpora --out old.jsonl
    PYTHONPATH=/path/to/new python scripts/offline_snapshot.py --corpora-dir /tmp/corpora --out new.jsonl
    diff old.jsonl new.jsonl && echo identical
    python scripts/offline_snapshot.py --compare old.jsonl new.jsonl [--drop FIELD] [--unordered-fallbacks]

`--as-built` answers over the indexes already in --corpora-dir without syncing them: for two checkouts either side
of a CHUNKER_VERSION change, which would each rebuild them (and two builds of one corpus can order BM25 ties
differently, which moves a few sources).

`--drop FIELD` (repeatable) leaves a field of the result out of every line, for a change that alters it on
purpose. `--unordered-fallbacks` sorts each result's fallbacks: before typedrag listed them in the flow's
order, steps run together recorded theirs in the order they happened to end, which changed from run to run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_quality import CORPORA, DATA, Corpus, index_corpus  # noqa: E402

from typedrag.config import load_settings  # noqa: E402
from typedrag.factory import Resources, build_pipeline  # noqa: E402

POSTGRES = Corpus(
    "postgres",
    DATA / "conversations.jsonl",
    ("/usr/share/doc/postgresql-doc-15/html",),
    "postgresql-doc-15",
    "manual, HTML",
)
CONVERSATION_CORPORA = {
    "demo": "wikipedia-demo",
    "python": "python-docs",
    "handbook": "debian-handbook",
    "postgres": "postgres",
}
METHODS = ("rag", "typed")
RUN_TO_RUN = {"latency_ms", "queued_ms"}  # an LLM call's (or a step's) time


def stable(data, drop: set[str]):
    """`data` without what changes from run to run."""
    if isinstance(data, dict):
        return {k: stable(v, drop) for k, v in data.items() if k not in RUN_TO_RUN and k not in drop}
    if isinstance(data, list):
        return [stable(v, drop) for v in data]
    return data


def line(where: str, method: str, result, drop: set[str], unordered: bool) -> str:
    data = normal(result.model_dump(mode="json", exclude={"timings_ms"}), drop, unordered)
    return json.dumps({"where": where, "method": method, "result": data}, ensure_ascii=False, sort_keys=True)


def normal(data: dict, drop: set[str], unordered: bool) -> dict:
    """A result's data without what changes from run to run, the `drop` fields, and (`unordered`) with its
    fallbacks sorted."""
    data = stable({k: v for k, v in data.items() if k not in drop}, set())
    if unordered and "fallbacks" in data:
        data["fallbacks"].sort(key=lambda f: (f["step"], f["reason"]))
    return data


def compare(old: Path, new: Path, drop: set[str], unordered: bool) -> int:
    """Print how many answers are identical, and where the others differ (in which fields); 1 if any does."""
    olds = [json.loads(text) for text in old.read_text(encoding="utf-8").splitlines()]
    news = [json.loads(text) for text in new.read_text(encoding="utf-8").splitlines()]
    if [(o["where"], o["method"]) for o in olds] != [(n["where"], n["method"]) for n in news]:
        print(f"the two files answer different questions ({len(olds)} and {len(news)} answers)")
        return 1
    differ = []
    for o, n in zip(olds, news):
        a, b = normal(o["result"], drop, unordered), normal(n["result"], drop, unordered)
        if a != b:
            differ.append((o["where"], o["method"], sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))))
    print(
        f"{len(olds) - len(differ)} of {len(olds)} answers identical"
        + (f" (leaving out {', '.join(sorted(drop))})" if drop else "")
    )
    for where, method, fields in differ:
        print(f"  {where} {method}: {', '.join(fields)}")
    return 1 if differ else 0


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora-dir", type=Path, help="where the indexes are built (or synced)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("OLD", "NEW"), help="compare two snapshots instead")
    parser.add_argument("--drop", action="append", default=[], help="a result field to leave out")
    parser.add_argument("--unordered-fallbacks", action="store_true", help="sort each result's fallbacks")
    parser.add_argument("--limit", type=int, default=0, help="at most this many questions per file (0: all)")
    parser.add_argument(
        "--as-built",
        action="store_true",
        help="answer over the indexes in --corpora-dir as they are, never synced: two checkouts either side of a "
        "CHUNKER_VERSION change would each rebuild them, and two builds can order BM25 ties differently",
    )
    args = parser.parse_args()
    drop = set(args.drop)
    if args.compare:
        raise SystemExit(compare(*args.compare, drop, args.unordered_fallbacks))
    if args.corpora_dir is None or args.out is None:
        parser.error("--corpora-dir and --out are needed to take a snapshot")
    args.corpora_dir.mkdir(parents=True, exist_ok=True)
    resources = Resources()
    pipelines = {}
    for corpus in (*CORPORA, POSTGRES):
        if args.as_built:
            index = args.corpora_dir / corpus.name if (args.corpora_dir / corpus.name).exists() else None
        else:
            index = index_corpus(corpus, args.corpora_dir)
        if index is not None:
            pipelines[corpus.name] = build_pipeline(load_settings({"index": str(index)}), resources)
    with args.out.open("w", encoding="utf-8") as out:
        for corpus in CORPORA:
            pipeline = pipelines.get(corpus.name)
            if pipeline is None:
                continue
            items = [
                json.loads(text) for text in corpus.keyterms.read_text(encoding="utf-8").splitlines() if text.strip()
            ]
            for item in items[: args.limit or None]:
                for method in METHODS:
                    result = await pipeline.answer(item["question"], method)
                    out.write(
                        line(f"{corpus.name}/{item['id']}", method, result, drop, args.unordered_fallbacks) + "\n"
                    )
            print(f"{corpus.name}: {len(items[: args.limit or None])} questions", file=sys.stderr, flush=True)
        conversations = [
            json.loads(text)
            for text in (DATA / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
            if text.strip()
        ]
        for conversation in conversations[: args.limit or None]:
            pipeline = pipelines.get(CONVERSATION_CORPORA[conversation["corpus"]])
            if pipeline is None:
                continue
            for method in METHODS:
                history: list[dict[str, str]] = []
                for number, turn in enumerate(conversation["turns"]):
                    result = await pipeline.answer(turn["user"], method, history=history)
                    out.write(
                        line(
                            f"conversation/{conversation['id']}/{number}",
                            method,
                            result,
                            drop,
                            args.unordered_fallbacks,
                        )
                        + "\n"
                    )
                    history += [
                        {"role": "user", "content": turn["user"]},
                        {"role": "assistant", "content": result.answer},
                    ]
        print(f"conversations: {len(conversations[: args.limit or None])}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
