"""Small local models and "not in the sources": how many decomposing questions fall back to plain RAG, with the
offline reader's check of a model's not-in-sources reply (the default) and without it.

Each question is asked typed, forced to its type, first with the check on, then off (the model's replies are
in the response cache by then, so the second pass costs only what differs). Prints per question the strategy
that answered, the aspects dropped because the model said their passages do not answer, and the reader's
overrides; then the fallbacks to plain RAG in each pass.

    TYPEDRAG_CACHE_DIR=/tmp/nis-cache python bench/bench_not_in_sources.py --llm local:MODEL.gguf --index demo-index
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
from typedrag.factory import Resources, build_pipeline  # noqa: E402

# The issue's two examples (issue 44), then questions of our own over the demo index's subjects.
QUESTIONS = [
    ("REASON", "Why did the Roman Republic collapse?"),
    ("DEBATE", "Should cities ban cars from their centres?"),
    ("REASON", "Why did the Western Roman Empire fall?"),
    ("REASON", "Why do leaves change colour in autumn?"),
    ("INSTRUCTION", "How do I bake bread at home?"),
    ("INSTRUCTION", "How do I start learning to play the guitar?"),
    ("DEBATE", "Should countries build more nuclear power plants?"),
    ("DEBATE", "Is it a good idea to ban smoking in public places?"),
]
OVERRIDE = "the reader finds a sentence of them that does"
MODEL_SAID = "the model said its sources do not answer"

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--llm", required=True, help="local:PATH.gguf, or a model name at --base-url")
parser.add_argument("--base-url", default=None)
parser.add_argument("--index", type=Path, required=True)
parser.add_argument("--timeout", type=float, default=900.0)
parser.add_argument("--dump", type=Path, default=None)


async def ask_all(pipeline, check: bool) -> list[dict]:
    pipeline.settings.check_not_in_sources = check
    rows = []
    for kind, question in QUESTIONS:
        started = time.perf_counter()
        result = await pipeline.answer(question, "typed", kind)
        row = {
            "check": check,
            "type": kind,
            "question": question,
            "strategy": result.strategy,
            "abstained": result.abstained,
            "seconds": round(time.perf_counter() - started, 1),
            "said_not_in_sources": sum("do not answer it:" in (a.error or "") for a in result.aspects)
            + sum(OVERRIDE in f.reason for f in result.fallbacks),
            "dropped": [(a.label, a.error) for a in result.aspects if a.error],
            "overrides": [f"{f.step}: {f.reason}" for f in result.fallbacks if OVERRIDE in f.reason],
            "fallbacks": [f"{f.step}: {f.reason}" for f in result.fallbacks],
            "calls": len(result.llm_calls),
            "cached": sum(c.cached for c in result.llm_calls),
            "answer": result.answer,
        }
        rows.append(row)
        print(
            f"  check {'on ' if check else 'off'} {kind:<11} {row['strategy']:<11} overrides {len(row['overrides'])} "
            f"{row['seconds']:>6} s  {question}",
            file=sys.stderr,
            flush=True,
        )
    return rows


async def main() -> None:
    args = parser.parse_args()
    print(machine_line())
    print(f"model: {args.llm}; index: {args.index}")
    settings = load_settings(
        {"index": str(args.index), "llm.model": args.llm, "llm.base_url": args.base_url, "llm.timeout": args.timeout}
    )
    resources = Resources()
    try:
        pipeline = build_pipeline(settings, resources, need_classifier=False)
        rows = []
        for check in (True, False):
            rows += await resources.run(ask_all(pipeline, check))
    finally:
        resources.close()
    print("\n| question | type | check on: answered by, overrides | check off: answered by |\n|---|---|---|---|")
    on = [r for r in rows if r["check"]]
    off = [r for r in rows if not r["check"]]
    for a, b in zip(on, off):
        print(
            f"| {a['question']} | {a['type']} | {a['strategy']}{' (abstained)' if a['abstained'] else ''}, {len(a['overrides'])} "
            f"| {b['strategy']}{' (abstained)' if b['abstained'] else ''} |"
        )
    for name, group in (("check on", on), ("check off", off)):
        fell = sum(r["strategy"] == "rag" for r in group)
        print(
            f"\n{name}: {fell} of {len(group)} decomposing questions fell back to plain RAG; "
            f"overrides {sum(len(r['overrides']) for r in group)}; calls {sum(r['calls'] for r in group)}, "
            f"{sum(r['cached'] for r in group)} from the cache"
        )
    if args.dump:
        args.dump.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(main())
