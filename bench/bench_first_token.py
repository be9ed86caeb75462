"""Time to first token of a streamed answer, against an OpenAI-protocol server that takes L ms per
whole reply and, when asked to stream, sends its first token after F ms and then R tokens a second.

For every type and N = 2..5 aspects (evidence-based has none): the time until the answer's first
`token` event, the total time, and the streaming time (first to last token of the final step).
Goals: first token <= (round trips before the final step)·L + F + 50 ms (0 for evidence-based,
1 for comparison and experience: the plan; 2 for reason, instruction and debate: the plan and the
aspects), and total <= 3·L + 50 ms + the streaming time.

    python bench/bench_first_token.py --latency-ms 200 --first-token-ms 100 --tokens-per-second 50
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line, stub_in_own_process  # noqa: E402
from bench_critical_path import QUESTIONS, make_corpus, plans_of_size  # noqa: E402

from typedrag.engines.llm_engine import LLMEngine  # noqa: E402
from typedrag.index import build_index, open_retriever  # noqa: E402
from typedrag.llm.openai_chat import OpenAIChatModel  # noqa: E402
from typedrag.nfq import NFQType  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402

ALL_QUESTIONS = {NFQType.EVIDENCE_BASED: "How do power plants set electricity prices?", **QUESTIONS}
ROUND_TRIPS_BEFORE_ANSWER = {
    NFQType.EVIDENCE_BASED: 0,
    NFQType.COMPARISON: 1,
    NFQType.EXPERIENCE: 1,
    NFQType.REASON: 2,
    NFQType.INSTRUCTION: 2,
    NFQType.DEBATE: 2,
}


async def one(pipeline: Pipeline, nfq_type: NFQType) -> tuple[float, float, float]:
    """(first token, total, streaming) seconds for one question."""
    token_times: list[float] = []
    started = time.perf_counter()

    def on_event(name: str, data: dict) -> None:
        if name == "token":
            token_times.append(time.perf_counter())

    result = await pipeline.answer(ALL_QUESTIONS[nfq_type], "typed", nfq_type, on_event=on_event)
    total = time.perf_counter() - started
    assert not [f for f in result.fallbacks if not f.step.startswith("aspect:")], result.fallbacks
    assert token_times, "no token was streamed"
    return token_times[0] - started, total, token_times[-1] - token_times[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=float, default=200, help="L: a whole (non-streamed) reply")
    parser.add_argument("--first-token-ms", type=float, default=100, help="F: a streamed reply's first token")
    parser.add_argument("--tokens-per-second", type=float, default=50, help="R: a streamed reply's rate")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    state = multiprocessing.get_context("fork").Value("i", 2)  # aspects per plan, read by the stub's process
    responder = plans_of_size(state)

    L, F = args.latency_ms, args.first_token_ms
    print(
        f"# time to first token · L = {L:.0f} ms, F = {F:.0f} ms, R = {args.tokens_per_second:.0f} tokens/s · {machine_line()}"
    )
    print(
        f"goal: first token <= trips·L + F + 50 ms; total <= 3·L + 50 ms + streaming time (medians of {args.repeats})\n"
    )
    print(
        "| type | aspects N | trips before answer | first token ms | goal ms | met | streaming ms | total ms | total goal ms | met |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    with (
        tempfile.TemporaryDirectory() as tmp,
        stub_in_own_process(
            responder, delay=L / 1000, first_token_delay=F / 1000, token_rate=args.tokens_per_second
        ) as base_url,
    ):
        index = Path(tmp) / "index"
        build_index([make_corpus(Path(tmp))], index, show_progress=False)
        chat = OpenAIChatModel(model="latency-stub", base_url=base_url, max_concurrency=8)
        pipeline = Pipeline(LLMEngine(chat), open_retriever(index))
        asyncio.run(measure(pipeline, state, args))


async def measure(pipeline: Pipeline, state: dict, args) -> None:
    """One event loop for the whole run, as a server would have."""
    L, F = args.latency_ms, args.first_token_ms
    await one(pipeline, NFQType.REASON)  # warm up: connection pool, embedder
    for nfq_type in ALL_QUESTIONS:
        sizes = [None] if nfq_type is NFQType.EVIDENCE_BASED else range(2, 6)
        for n in sizes:
            state.value = n or 2
            runs = [await one(pipeline, nfq_type) for _ in range(args.repeats)]
            first, total, streaming = (statistics.median(r[i] for r in runs) * 1000 for i in range(3))
            trips = ROUND_TRIPS_BEFORE_ANSWER[nfq_type]
            goal = trips * L + F + 50
            total_goal = 3 * L + 50 + streaming
            print(
                f"| {nfq_type.value.lower()} | {n or '-'} | {trips} | {first:.0f} | {goal:.0f} | {'yes' if first <= goal else 'NO'} "
                f"| {streaming:.0f} | {total:.0f} | {total_goal:.0f} | {'yes' if total <= total_goal else 'NO'} |"
            )


if __name__ == "__main__":
    main()
