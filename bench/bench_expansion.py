"""Query expansion (the Expand step, `--expand`): does searching a model's rewrite and hypothetical answer
passage beside the question, fused by reciprocal rank, put more of what the answer needs in the top k?

For each question of a key-term set, the question's own top k (what plain RAG answers from) is found twice,
with the question alone and with the model's expansion, through the driver exactly as `ask` finds it. Counts,
over the top k: questions whose passages hold every key-term group, and questions with a passage of the
article the set names; wins and losses per question.

    TYPEDRAG_CACHE_DIR=/tmp/expansion-cache python bench/bench_expansion.py --llm local:MODEL.gguf \\
        --index demo-index --questions bench/data/keyterms.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

from typedrag.config import load_settings  # noqa: E402
from typedrag.driver import Driver, Run, Services  # noqa: E402
from typedrag.engines.base import Trace  # noqa: E402
from typedrag.factory import Resources, build_pipeline  # noqa: E402
from typedrag.strategies.evidence import question_hits  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--llm", required=True, help="local:PATH.gguf, or a model name at --base-url")
parser.add_argument("--base-url", default=None)
parser.add_argument("--index", type=Path, required=True)
parser.add_argument("--questions", type=Path, required=True, help="key-term JSONL: question, groups, articles")
parser.add_argument("--k", type=int, default=5)
parser.add_argument("--limit", type=int, default=None)
parser.add_argument("--timeout", type=float, default=600.0)
parser.add_argument("--dump", type=Path, default=None)


def held(hits, item) -> tuple[bool, bool]:
    text = " ".join(hit.passage.text.lower() for hit in hits)
    terms = all(any(term.lower() in text for term in group) for group in item["groups"])
    article = any(hit.passage.title in item.get("articles", []) for hit in hits)
    return terms, article


async def top(pipeline, question: str, k: int, expand: bool):
    trace = Trace()
    driver = Driver(Services(pipeline.engine, pipeline.retriever, pipeline.reranker, expand=expand), trace)
    hits = await driver.follow(question_hits(question, k), Run())
    return hits, trace


async def run(pipeline, items, k, dump: Path | None) -> list[dict]:
    rows = []
    if dump is not None:
        dump.write_text("", encoding="utf-8")
    for number, item in enumerate(items, 1):
        started = time.perf_counter()
        alone, _ = await top(pipeline, item["question"], k, False)
        widened, trace = await top(pipeline, item["question"], k, True)
        row = {
            "id": item["id"],
            "type": item["type"],
            "question": item["question"],
            "alone": held(alone, item),
            "expanded": held(widened, item),
            "failed": [f.reason for f in trace.fallbacks],
            "seconds": round(time.perf_counter() - started, 1),
            "cached": sum(c.cached for c in trace.calls),
        }
        rows.append(row)
        if dump is not None:  # as it goes: a run stopped early keeps what it measured
            with dump.open("a", encoding="utf-8") as out:
                out.write(json.dumps(row) + "\n")
        print(
            f"  {number}/{len(items)} terms {row['alone'][0]:d}->{row['expanded'][0]:d} article {row['alone'][1]:d}->{row['expanded'][1]:d} "
            f"{row['seconds']} s {item['question']}",
            file=sys.stderr,
            flush=True,
        )
    return rows


async def main() -> None:
    args = parser.parse_args()
    print(machine_line())
    print(f"model: {args.llm}; index: {args.index}; questions: {args.questions}; top {args.k}")
    items = [json.loads(line) for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()][
        : args.limit
    ]
    settings = load_settings(
        {"index": str(args.index), "llm.model": args.llm, "llm.base_url": args.base_url, "llm.timeout": args.timeout}
    )
    resources = Resources()
    try:
        pipeline = build_pipeline(settings, resources, need_classifier=False)
        rows = await resources.run(run(pipeline, items, args.k, args.dump))
    finally:
        resources.close()
    n = len(rows)
    for i, name in ((0, "every key-term group in the top k"), (1, "a passage of the named article in the top k")):
        alone = sum(r["alone"][i] for r in rows)
        expanded = sum(r["expanded"][i] for r in rows)
        wins = sum(r["expanded"][i] and not r["alone"][i] for r in rows)
        losses = sum(r["alone"][i] and not r["expanded"][i] for r in rows)
        print(f"{name}: question alone {alone}/{n}, expanded {expanded}/{n} ({wins} wins, {losses} losses)")
    print(f"expansions failed (recorded, question searched alone): {sum(bool(r['failed']) for r in rows)}")


if __name__ == "__main__":
    asyncio.run(main())
