"""`ask` on the embedded default (tantivy + MiniLM + shipped classifier + offline engine).

Cold: a new `typedrag ask` process answering its first question (imports, index open, model
loads included). Warm: the next questions in one process. Targets: cold <= 10 s, warm <= 1 s.

    python bench/bench_ask.py --index demo-index        # build it with: typedrag index demo:vital-articles --index demo-index
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

QUESTIONS = [
    "How does photosynthesis work?",
    "What is the difference between a comet and an asteroid?",
    "What are good ways to learn to play the piano?",
    "Why did the Western Roman Empire fall?",
    "How do I make bread?",
    "Should nuclear power be used to fight climate change?",
]


def cold(index: str, method: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "typedrag.cli", "ask", QUESTIONS[1], "--index", index, "--method", method, "--json"],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


async def warm(index: str, method: str, rounds: int) -> list[tuple[str, float, str]]:
    from typedrag.config import load_settings
    from typedrag.factory import Resources, build_pipeline

    pipeline = build_pipeline(load_settings({"index": index, "llm.model": "offline"}), Resources())
    await pipeline.answer(QUESTIONS[0], method)  # first question pays the model loads
    timings = []
    for _ in range(rounds):
        for question in QUESTIONS:
            started = time.perf_counter()
            result = await pipeline.answer(question, method)
            timings.append((question, time.perf_counter() - started, result.strategy))
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", default="demo-index")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"# ask on the embedded default · index {args.index} · {machine_line()}\n")
    print("| method | cold (new process, 1st question) s | warm p50 s | warm max s | warm per strategy (median s) |")
    print("|---|---|---|---|---|")
    for method in ("rag", "typed"):
        cold_s = statistics.median(cold(args.index, method) for _ in range(3))
        timings = asyncio.run(warm(args.index, method, args.rounds))
        walls = [t for _, t, _ in timings]
        by_strategy: dict[str, list[float]] = {}
        for _, wall, strategy in timings:
            by_strategy.setdefault(strategy, []).append(wall)
        per = ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in sorted(by_strategy.items()))
        print(f"| {method} | {cold_s:.2f} | {statistics.median(walls):.2f} | {max(walls):.2f} | {per} |")


if __name__ == "__main__":
    main()
