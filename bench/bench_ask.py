"""`ask` on the embedded default (tantivy + MiniLM + shipped classifier + offline engine).

Cold: a new `typedrag ask` process answering its first question (imports, index open, model
loads included). Warm: the next questions in one process. Targets: cold <= 10 s, warm <= 1 s.
`--otlp` traces every answer, exported over OTLP/HTTP to a receiver on loopback (the otel extra;
docs/lab/2026-12-02-tracing-cost.md compares the two).

    python bench/bench_ask.py --index demo-index        # build it with: typedrag index demo:vital-articles --index demo-index
    python bench/bench_ask.py --index demo-index --otlp
    python bench/bench_ask.py --index demo-index --retrieval bm25     # another search than the index's own

Besides wall time it reports the CPU time of the warm answers (all threads of the process): on a machine
shared with other work, wall time measures the neighbours as much as typedrag.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

WARM_UP = "What is the speed of light?"
QUESTIONS = [  # distinct questions, three per type, so warm runs measure new work, not caches
    "How does photosynthesis work?",
    "What is inflation in economics?",
    "How does a vaccine protect against disease?",
    "What is the difference between a comet and an asteroid?",
    "Which is better for swimming, a lake or the sea?",
    "What are the similarities between Buddhism and Hinduism?",
    "What are good ways to learn to play the piano?",
    "Any advice for someone visiting Japan for the first time?",
    "What should I read to understand the French Revolution?",
    "Why did the Western Roman Empire fall?",
    "Why is the sky blue?",
    "Why did the dinosaurs go extinct?",
    "How do I make bread?",
    "How do you grow tomatoes?",
    "How can I learn a foreign language quickly?",
    "Should nuclear power be used to fight climate change?",
    "Is capitalism better than socialism?",
    "Should zoos exist?",
]


def cold(index: str, method: str, retrieval: str | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "typedrag.cli",
            "ask",
            QUESTIONS[3],
            "--index",
            index,
            "--method",
            method,
            "--json",
            *(["--retrieval", retrieval] if retrieval else []),
        ],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


async def warm(index: str, method: str, retrieval: str | None = None) -> list[tuple[str, float, str, float]]:
    from typedrag.config import load_settings
    from typedrag.factory import Resources, build_pipeline

    try:
        from typedrag.telemetry import configure_from_environment
    except ImportError:  # a typedrag from before tracing
        pass
    else:
        configure_from_environment()  # as the command line does: traces only if OTEL_* variables ask for them
    pipeline = build_pipeline(
        load_settings({"index": index, "llm.model": "offline", "retrieval": retrieval}), Resources()
    )
    await pipeline.answer(WARM_UP, method)  # the first question pays the model loads
    timings = []
    for question in QUESTIONS:
        started, cpu = time.perf_counter(), time.process_time()
        result = await pipeline.answer(question, method)
        timings.append((question, time.perf_counter() - started, result.strategy, time.process_time() - cpu))
    return timings


def warm_in_new_process(index: str, method: str, retrieval: str | None = None) -> list[tuple[str, float, str, float]]:
    """Each method in its own process, so one method's embedding cache cannot speed up another's."""
    code = f"import asyncio, json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import bench_ask; print(json.dumps(asyncio.run(bench_ask.warm({index!r}, {method!r}, {retrieval!r}))))"
    output = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return [tuple(row) for row in json.loads(output.strip().splitlines()[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", default="demo-index")
    parser.add_argument(
        "--otlp", action="store_true", help="trace every answer, exported to an OTLP/HTTP receiver on loopback"
    )
    parser.add_argument("--retrieval", help="bm25, dense or hybrid (default: as the index was built)")
    args = parser.parse_args()
    receiver = None
    if args.otlp:
        from typedrag.testing.otlp_receiver import OTLPReceiver

        receiver = OTLPReceiver().__enter__()
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint  # for the `ask` and warm processes
    tracing = "traced, OTLP/HTTP to loopback" if args.otlp else "untraced"
    searched = f"retrieval {args.retrieval}" if args.retrieval else "retrieval as built"
    print(f"# ask on the embedded default · index {args.index} · {searched} · {tracing} · {machine_line()}\n")
    print(
        "| method | cold (new process, 1st question) s | warm p50 s | warm p95 s | warm max s | warm CPU p50 s | warm per strategy (median s) |"
    )
    print("|---|---|---|---|---|---|---|")
    for method in ("rag", "typed"):
        cold_s = statistics.median(cold(args.index, method, args.retrieval) for _ in range(3))
        timings = warm_in_new_process(args.index, method, args.retrieval)
        walls = sorted(t for _, t, _, _ in timings)
        cpu_p50 = statistics.median(c for _, _, _, c in timings)
        by_strategy: dict[str, list[float]] = {}
        for _, wall, strategy, _ in timings:
            by_strategy.setdefault(strategy, []).append(wall)
        per = ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in sorted(by_strategy.items()))
        p95 = walls[min(len(walls) - 1, round(0.95 * (len(walls) - 1)))]
        print(
            f"| {method} | {cold_s:.2f} | {statistics.median(walls):.2f} | {p95:.2f} | {walls[-1]:.2f} | {cpu_p50:.2f} | {per} |"
        )
    if receiver is not None:
        traces = {span.trace_id for span in receiver.spans}
        print(f"\n{len(receiver.spans)} spans in {len(traces)} traces received")
        receiver.__exit__(None, None, None)


if __name__ == "__main__":
    main()
