"""Evaluation throughput: Wiki-NFQA through `typedrag eval` with a latency-sleeping OpenAI-protocol
server as both generator and judge, at several concurrency levels, then a cached rerun.

Prints questions per minute, LLM calls and tokens per question per method and per predicted type,
and the requests a fully cached rerun sends (target: zero).

    python bench/bench_eval.py --index /tmp/enwiki-index --questions 30 --latency-ms 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

from typedrag.config import load_settings  # noqa: E402
from typedrag.evaluation.judges import LLMJudge  # noqa: E402
from typedrag.evaluation.runner import EvalOptions, aevaluate  # noqa: E402
from typedrag.factory import Resources, build_chat_model, build_pipeline  # noqa: E402
from typedrag.testing.openai_stub import OpenAIStubServer  # noqa: E402

DATASET = Path(__file__).resolve().parents[2] / "shared" / "data" / "wiki-nfqa"


def run(
    server: OpenAIStubServer, index: str, out: Path, cache: Path, questions: int, concurrency: int
) -> tuple[float, int]:
    settings = load_settings(
        {
            "index": index,
            "cache_dir": str(cache),
            "assume_non_factoid": True,
            "llm.model": "latency-stub",
            "llm.base_url": server.base_url,
            "llm.concurrency": 64,
            "judge.model": "latency-stub",
            "judge.base_url": server.base_url,
            "judge.concurrency": 64,
        },
        env={},
    )
    options = EvalOptions(limit=questions, concurrency=concurrency, show_progress=False)
    resources = Resources()
    pipeline = build_pipeline(settings, resources)
    judge = LLMJudge(build_chat_model(settings.judge, settings.cache_dir, resources))
    before = len(server.requests)
    started = time.perf_counter()
    asyncio.run(resources.run(aevaluate(DATASET, pipeline, judge=judge, out=out, options=options)))
    return time.perf_counter() - started, len(server.requests) - before


def per_question_usage(out: Path) -> dict[tuple[str, str], list[dict]]:
    rows: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for line in (out / "answers.jsonl").read_text().splitlines():
        record = json.loads(line)
        rows[(record["method"], record["predicted_type"])].append(record["usage"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--latency-ms", type=float, default=100)
    parser.add_argument("--levels", default="1,8,32")
    args = parser.parse_args()
    print(
        f"# eval throughput · {args.questions} Wiki-NFQA questions · methods llm, rag, typed · 3 judge rounds · "
        f"L = {args.latency_ms:.0f} ms per call · {machine_line()}\n"
    )
    print("| concurrency | wall s | questions/min | LLM requests | requests/question |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, OpenAIStubServer(delay=args.latency_ms / 1000) as server:
        last = None
        for level in (int(x) for x in args.levels.split(",")):
            out, cache = Path(tmp) / f"run-{level}", Path(tmp) / f"cache-{level}"
            wall, requests = run(server, args.index, out, cache, args.questions, level)
            print(
                f"| {level} | {wall:.1f} | {args.questions / wall * 60:.1f} | {requests} | {requests / args.questions:.1f} |"
            )
            last = (out, cache, level)
        out, cache, level = last
        wall, requests = run(server, args.index, Path(tmp) / "rerun", cache, args.questions, level)
        print(f"\ncached rerun (new run directory, same response cache): {wall:.1f} s, {requests} LLM requests\n")
        print(
            "| method | predicted type | questions | calls/question | prompt tokens/question | completion tokens/question |"
        )
        print("|---|---|---|---|---|---|")
        for (method, nfq_type), usages in sorted(per_question_usage(out).items()):
            n = len(usages)
            calls = sum(u["calls"] for u in usages) / n
            prompt = sum(u["prompt_tokens"] for u in usages) / n
            completion = sum(u["completion_tokens"] for u in usages) / n
            print(f"| {method} | {nfq_type} | {n} | {calls:.1f} | {prompt:.0f} | {completion:.0f} |")


if __name__ == "__main__":
    main()
