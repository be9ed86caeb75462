"""Critical-path latency of Typed-RAG against an OpenAI-protocol server that sleeps L ms per call.

For each decomposing type and N = 2..5 aspects: wall time per question with our pipeline
(aspects concurrent) and with the same steps one call at a time (concurrency cap 1, as the
authors' code runs). Target: <= 3·L + 50 ms for any multi-aspect question.

    python bench/bench_critical_path.py --latency-ms 200 --repeats 3

`--overview-extra-ms X` makes plain RAG's own step (the overview of a decomposing type, a five-sentence
answer) take X ms more than the other calls, as a longer reply does on a real server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line, stub_in_own_process  # noqa: E402

from typedrag.engines.llm_engine import LLMEngine  # noqa: E402
from typedrag.index import build_index, open_retriever  # noqa: E402
from typedrag.llm.openai_chat import OpenAIChatModel  # noqa: E402
from typedrag.nfq import NFQType  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.testing.openai_stub import Reply, default_content  # noqa: E402

WORDS = ["solar", "wind", "coal", "nuclear", "hydro"]
QUESTIONS = {
    NFQType.COMPARISON: "Which is better for a city, solar or wind power?",
    NFQType.EXPERIENCE: "Any advice on choosing a home energy supplier?",
    NFQType.REASON: "Why do electricity prices rise in winter?",
    NFQType.INSTRUCTION: "How do I install solar panels on a roof?",
    NFQType.DEBATE: "Should countries phase out coal power?",
}


def plan_for(schema: str, n: int) -> str:
    items = WORDS[:n]
    plans = {
        "ComparisonPlan": {"purpose": "superiority", "items": [f"{w} power" for w in items]},
        "ExperiencePlan": {"topic": "energy supplier", "keywords": [f"{w} tariff" for w in items]},
        "SubQueryPlan": {"sub_queries": [f"{w} electricity price factor" for w in items]},
        "DebatePlan": {
            "topic": "coal phase-out",
            "perspectives": [{"name": f"{w} advocates", "sub_query": f"{w} instead of coal"} for w in items],
        },
    }
    return json.dumps(plans[schema])


def plans_of_size(state, overview_extra: float = 0.0):
    """The stub's responder: plans with `state.value` aspects, the default cited answers otherwise;
    plain RAG's five-sentence answer `overview_extra` seconds later than the rest."""

    def responder(request):
        if request.schema_name:
            return Reply(content=plan_for(request.schema_name, state.value))
        longer = overview_extra if "Answer in at most five sentences" in request.last_user else 0.0
        return Reply(content=default_content(request), delay=longer)

    return responder


def make_corpus(directory: Path) -> Path:
    path = directory / "energy.jsonl"
    with path.open("w") as out:
        for i, word in enumerate(WORDS * 4):
            text = (
                f"{word.capitalize()} power plants supply electricity; {word} costs, tariffs and prices vary by season. "
                * 6
            )
            out.write(json.dumps({"id": f"d{i}", "title": f"{word} {i}", "text": text}) + "\n")
    return path


async def one(pipeline: Pipeline, nfq_type: NFQType) -> tuple[float, int]:
    started = time.perf_counter()
    result = await pipeline.answer(QUESTIONS[nfq_type], "typed", nfq_type)
    assert not [f for f in result.fallbacks if not f.step.startswith("aspect:")], result.fallbacks
    return time.perf_counter() - started, result.usage.calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--overview-extra-ms", type=float, default=0, help="plain RAG's answer takes this much longer")
    args = parser.parse_args()
    latency = args.latency_ms / 1000
    state = multiprocessing.get_context("fork").Value("i", 2)  # aspects per plan, read by the stub's process
    responder = plans_of_size(state, args.overview_extra_ms / 1000)
    longer = f" · plain RAG's answer L + {args.overview_extra_ms:.0f} ms" if args.overview_extra_ms else ""
    print(f"# critical path · L = {args.latency_ms:.0f} ms per call{longer} · {machine_line()}")
    print(f"target: <= 3·L + 50 = {3 * args.latency_ms + 50:.0f} ms per multi-aspect question\n")
    print("| type | aspects N | LLM calls | ours (concurrent) ms | sequential ms | speed-up | target met |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, stub_in_own_process(responder, delay=latency) as base_url:
        index = Path(tmp) / "index"
        build_index([make_corpus(Path(tmp))], index, show_progress=False)
        retriever = open_retriever(index)
        pipelines = {
            cap: Pipeline(
                LLMEngine(OpenAIChatModel(model="latency-stub", base_url=base_url, max_concurrency=cap)), retriever
            )
            for cap in (8, 1)
        }
        asyncio.run(measure(pipelines, state, args))


async def measure(pipelines: dict[int, Pipeline], state: dict, args) -> None:
    """One event loop for the whole run, as a server or a batch would have."""
    for pipeline in pipelines.values():  # warm up: connection pool, embedder, classifier caches
        await one(pipeline, NFQType.REASON)
    for nfq_type in QUESTIONS:
        for n in range(2, 6):
            state.value = n
            walls = {}
            for cap, pipeline in pipelines.items():
                runs = [await one(pipeline, nfq_type) for _ in range(args.repeats)]
                walls[cap] = statistics.median(w for w, _ in runs) * 1000
                calls = runs[0][1]
            ok = walls[8] <= 3 * args.latency_ms + 50
            print(
                f"| {nfq_type.value.lower()} | {n} | {calls} | {walls[8]:.0f} | {walls[1]:.0f} | "
                f"{walls[1] / walls[8]:.1f}x | {'yes' if ok else 'NO'} |"
            )


if __name__ == "__main__":
    main()
