"""Load on loopback: 200 requests at concurrency 32 across the three answer routes, the pipeline's LLM being
a stub with 0.2 s latency. Zero errors expected; p50/p99 printed, not asserted (shared 2-core machines)."""

from __future__ import annotations

import asyncio
import json
import statistics
import time

import httpx
import pytest

pytest.importorskip("fastapi", reason="fastapi is a dependency of typedrag: pip install -e .")

from test_server import classifier, serving, stub_pipeline  # noqa: E402,F401  (tests/ is on sys.path, as for conftest)

from typedrag.config import Settings  # noqa: E402
from typedrag.server.app import create_app  # noqa: E402
from typedrag.testing.openai_stub import OpenAIStubServer  # noqa: E402

REQUESTS, CONCURRENCY, OVERALL_TIMEOUT = 200, 32, 300
QUESTIONS = [
    ("Why did the Western Roman Empire fall?", "typed"),
    ("What is the difference between a crocodile and an alligator?", "typed"),
    ("How do I bake bread at home?", "rag"),
    ("Should we build more nuclear power plants?", "typed"),
    ("How do plants make sugar?", "llm"),
]


async def one(client: httpx.AsyncClient, i: int) -> float:
    """One request through /v1/answer, /v1/answer/stream or /v1/chat/completions; returns its latency."""
    question, method = QUESTIONS[i % len(QUESTIONS)]
    started = time.perf_counter()
    route = i % 3
    if route == 0:
        response = await client.post("/v1/answer", json={"question": question, "method": method})
        assert response.status_code == 200, response.text
        assert response.json()["answer"]
    elif route == 1:
        async with client.stream(
            "POST", "/v1/answer/stream", json={"question": question, "method": method}
        ) as response:
            assert response.status_code == 200
            last = [line async for line in response.aiter_lines() if line.startswith("event: ")][-1]
        assert last == "event: result", last
    else:
        body = {"model": f"typedrag-{method}", "messages": [{"role": "user", "content": question}]}
        response = await client.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        assert json.loads(response.text)["typedrag"]["answer"]
    return time.perf_counter() - started


async def load(url: str) -> list[float]:
    gate = asyncio.Semaphore(CONCURRENCY)
    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def bounded(i: int) -> float:
            async with gate:
                return await one(client, i)

        return await asyncio.wait_for(asyncio.gather(*(bounded(i) for i in range(REQUESTS))), OVERALL_TIMEOUT)


def test_200_requests_at_concurrency_32_without_errors(small_index, classifier):
    with OpenAIStubServer(delay=0.2) as stub:
        # Retries as in production (default 3): the stub's listen backlog of 5 may reset a burst of new connections.
        pipeline = stub_pipeline(stub, small_index, classifier, max_concurrency=16, max_retries=2, timeout=60)
        app = create_app(Settings(index=small_index, cache_dir=None), pipeline)  # default limit: 32 in flight
        with serving(app) as url:
            started = time.perf_counter()
            latencies = sorted(asyncio.run(load(url)))
            wall = time.perf_counter() - started
        llm_requests = len(stub.requests)
    assert len(latencies) == REQUESTS
    p50 = statistics.median(latencies)
    p99 = latencies[int(0.99 * (len(latencies) - 1))]
    print(
        f"\nload: {REQUESTS} requests at concurrency {CONCURRENCY} in {wall:.1f} s ({REQUESTS / wall:.1f} req/s), "
        f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms, "
        f"{llm_requests} stub LLM requests at 0.2 s each"
    )
