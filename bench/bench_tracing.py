"""What tracing costs an answer: the time of one typedrag span, off and on, and the spans an answer makes.

Off: no TracerProvider (what every command runs with unless OTEL_* variables ask for traces). On: the SDK
with a batch processor exporting over OTLP/HTTP to a receiver on loopback, as `typedrag ask` sets it up.
A span here is a step span nested in an answer span, with the attributes typedrag sets. Then the 18
questions of bench_ask.py are answered once, traced, to count the spans of each.

    python bench/bench_tracing.py --index demo-index     # needs the otel extra

Figures: docs/lab/2026-12-02-tracing-cost.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402
from bench_ask import QUESTIONS  # noqa: E402

SPANS = 1_000  # per round: below the batch processor's queue (2,048), so none is dropped


def per_span_microseconds(rounds: int = 30) -> float:
    """Median over `rounds` of the time per step span (opened, given attributes, closed) under an answer span;
    the export of each round is finished before the next begins."""
    from opentelemetry import trace

    from typedrag import telemetry
    from typedrag.steps import Search

    search = Search(["q"], 5)
    timings = []
    for _ in range(rounds):
        with telemetry.answering("q", "typed"):
            started = time.perf_counter()
            for _ in range(SPANS):
                with telemetry.performing(search, "index") as span:
                    telemetry.describe(span, hits=[5], passage_ids=["a#1", "b#2", "c#3", "d#4", "e#5"])
            timings.append((time.perf_counter() - started) / SPANS * 1e6)
        flush = getattr(trace.get_tracer_provider(), "force_flush", None)
        if flush is not None:
            flush()
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", default="demo-index")
    args = parser.parse_args()
    from typedrag import telemetry
    from typedrag.testing.otlp_receiver import OTLPReceiver

    print(f"# the cost of tracing · {machine_line()}\n")
    off = per_span_microseconds()
    with OTLPReceiver() as receiver:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        problem = telemetry.configure_from_environment()
        assert problem is None and telemetry.tracing(), problem
        on = per_span_microseconds()

        from typedrag.config import load_settings
        from typedrag.factory import Resources, build_pipeline
        from opentelemetry import trace

        pipeline = build_pipeline(load_settings({"index": args.index, "llm.model": "offline"}), Resources())
        trace.get_tracer_provider().force_flush()
        before = len(receiver.spans)
        for question in QUESTIONS:
            asyncio.run(pipeline.answer(question))
        trace.get_tracer_provider().force_flush()
        per_answer = (len(receiver.wait_for(before + 1)) - before) / len(QUESTIONS)
    print(f"A typed answer makes {per_answer:.1f} spans (mean of the 18 questions), step spans and the answer's own.\n")
    print("| tracing | µs per step span | for an answer's spans |")
    print("|---|---|---|")
    print(f"| off (no TracerProvider: one shared no-op) | {off:.2f} | {off * per_answer / 1000:.3f} ms |")
    print(f"| on (SDK, batch processor, OTLP/HTTP to loopback) | {on:.1f} | {on * per_answer / 1000:.2f} ms |")


if __name__ == "__main__":
    main()
