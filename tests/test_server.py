"""The HTTP service: every route, its errors, auth, limits, SSE order, and the OpenAI-compatible endpoint driven by
the official `openai` SDK, in process through httpx's ASGI transport (`in_process`); on a real uvicorn server on
127.0.0.1 (`serving`) only what needs a connection: a stream read as it is written, a client that walks away, a
body sent in pieces, the `serve` command."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx
import openai
import pytest

pytest.importorskip("fastapi", reason="fastapi and uvicorn are dependencies of typedrag: pip install -e .")
uvicorn = pytest.importorskip("uvicorn", reason="fastapi and uvicorn are dependencies of typedrag: pip install -e .")

from typedrag.classify import load_default_classifier  # noqa: E402
from typedrag.config import Settings  # noqa: E402
from typedrag.engines.llm_engine import LLMEngine  # noqa: E402
from typedrag.engines.offline import OfflineEngine  # noqa: E402
from typedrag.index import open_retriever  # noqa: E402
from typedrag.llm.openai_chat import OpenAIChatModel  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.result import AnswerResult  # noqa: E402
from typedrag.server.app import create_app  # noqa: E402
from typedrag.server.logs import JsonFormatter  # noqa: E402
from typedrag.server.openai_format import with_sources  # noqa: E402
from typedrag.server.service import ServerOptions  # noqa: E402
from typedrag.testing.openai_stub import OpenAIStubServer, Reply  # noqa: E402

COMPARISON = "What is the difference between a crocodile and an alligator?"
ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def serving(app):
    """Run `app` on a real uvicorn server on a free loopback port; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@asynccontextmanager
async def in_process(app):
    """`app` started (its lifespan run) and called in this process through httpx's ASGI transport: no socket, no
    server thread. Responses arrive whole: what needs a connection (a stream read as it is written, a client that
    walks away) uses `serving`."""
    started, stop = asyncio.Event(), asyncio.Event()

    async def lifespan() -> None:  # in a task of its own: its task groups end in the task that began them
        async with app.router.lifespan_context(app):
            started.set()
            await stop.wait()

    running = asyncio.create_task(lifespan())
    await asyncio.wait({running, asyncio.create_task(started.wait())}, return_when=asyncio.FIRST_COMPLETED)
    if running.done():
        running.result()  # the app did not start: its error
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://typedrag.test", timeout=60
        ) as client:
            yield client
    finally:
        stop.set()
        await running


def openai_client(client: httpx.AsyncClient, api_key: str = "unused") -> openai.AsyncOpenAI:
    """The official SDK, calling the app in process through `client`."""
    return openai.AsyncOpenAI(base_url=f"{client.base_url}/v1", api_key=api_key, max_retries=0, http_client=client)


@pytest.fixture(scope="session")
def classifier():
    return load_default_classifier()


@pytest.fixture(scope="session")
def offline_pipeline(small_index, classifier):
    return Pipeline(OfflineEngine(), open_retriever(small_index), classifier=classifier)


def stub_pipeline(stub: OpenAIStubServer, small_index: Path, classifier, **model_kwargs) -> Pipeline:
    model_kwargs = {"max_retries": 0, "timeout": 20, **model_kwargs}
    model = OpenAIChatModel(model="stub", base_url=stub.base_url, **model_kwargs)
    return Pipeline(LLMEngine(model), open_retriever(small_index), classifier=classifier)


@pytest.fixture
async def offline(offline_pipeline, small_index):
    async with in_process(create_app(Settings(index=small_index, cache_dir=None), offline_pipeline)) as client:
        yield client


@pytest.fixture(scope="module")
def stub():
    with OpenAIStubServer() as server:
        yield server


@pytest.fixture(scope="module")
def stubbed_pipeline(stub, small_index, classifier):
    return stub_pipeline(stub, small_index, classifier)


@pytest.fixture
async def stubbed(stubbed_pipeline, small_index):
    async with in_process(create_app(Settings(index=small_index, cache_dir=None), stubbed_pipeline)) as client:
        yield client


def sse_events(response: httpx.Response) -> list[tuple[str, dict]]:
    """The (event, data) pairs of a Server-Sent Events response (read whole, or as it streams)."""
    events, name = [], None
    lines = response.text.splitlines() if response.is_stream_consumed else response.iter_lines()
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[len("data: ") :])))
    return events


# --- native API -------------------------------------------------------------------------------


async def test_answer_returns_the_full_result(offline):
    response = await offline.post("/v1/answer", json={"question": COMPARISON})
    assert response.status_code == 200, response.text
    result = AnswerResult.model_validate(response.json())
    assert result.method == "typed" and result.strategy == "comparison"
    assert result.type is not None and result.type.type == "COMPARISON"
    assert result.plan and result.aspects and result.sources and result.citations
    assert {n for c in result.citations for n in c.source_numbers} <= {s.number for s in result.sources}


@pytest.mark.parametrize(("method", "strategy"), [("rag", "rag"), ("llm", "llm")])
async def test_answer_with_baseline_methods(offline, method, strategy):
    response = await offline.post("/v1/answer", json={"question": "Why did Rome fall?", "method": method})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["method"] == method and body["strategy"] == strategy and body["type"] is None


async def test_forced_type_is_used(offline):
    response = await offline.post("/v1/answer", json={"question": "Tell me about nuclear power", "type": "debate"})
    assert response.status_code == 200, response.text
    assert response.json()["type"]["source"] == "forced" and response.json()["strategy"] == "debate"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"question": "   "}, "the question is empty"),
        ({"question": "why " * 700}, "over the limit of 2000"),
        ({"question": "Why?", "type": "poem"}, "unknown question type 'poem'"),
        ({"question": "Why?", "method": "magic"}, "method"),
        ({}, "question: Field required"),
    ],
)
async def test_bad_input_is_422_with_a_message(offline, body, message):
    response = await offline.post("/v1/answer", json=body)
    assert response.status_code == 422
    assert message in response.json()["error"]["message"]
    assert response.json()["detail"]


async def test_malformed_json_is_422(offline):
    response = await offline.post("/v1/answer", content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 422 and "JSON" in response.json()["error"]["message"]


async def test_stream_events_come_in_the_documented_order(offline):
    body = {"question": "Why did the Western Roman Empire fall?", "type": "reason"}  # reason answers aspects one by one
    response = await offline.post("/v1/answer/stream", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response)
    names = [name for name, _ in events]
    aspects = names.count("aspect")
    assert aspects >= 2
    written = names[2 + aspects : -3]  # the answer as it was written: tokens, and a citation per cited sentence
    assert names[: 2 + aspects] == ["type", "plan", *["aspect"] * aspects] and names[-3:] == [
        "sources",
        "answer",
        "result",
    ]
    assert written.count("token") >= 3 and set(written) == {"token", "citation"} and written[0] == "token"
    result = AnswerResult.model_validate(events[-1][1])
    assert "".join(data["text"] for name, data in events if name == "token") == result.answer
    assert [data for name, data in events if name == "citation"] == [c.model_dump() for c in result.citations]
    assert events[0][1]["type"] == result.type.type
    assert events[1][1]["plan"] == result.plan
    assert events[-2][1]["text"] == result.answer
    assert events[-3][1]["count"] == len(result.sources)
    assert sorted(data["aspect"]["label"] for name, data in events if name == "aspect") == sorted(
        a.label for a in result.aspects
    )


def test_stream_delivers_progress_while_the_answer_is_being_made(small_index, classifier):
    """The type and the plan reach the client while the stub still holds the combined answer back: a buffered
    stream would deliver them only with the result (an order of events, not a duration)."""
    from typedrag.testing.openai_stub import default_content

    release, released = threading.Event(), []

    def responder(request):
        if "Partial answers" in request.last_user:  # the aggregator waits until the client has seen the plan
            released.append(release.wait(300))  # False: it waited in vain, the plan never came before it
        return Reply(content=default_content(request))

    with OpenAIStubServer(responder) as stub:
        app = create_app(
            Settings(index=small_index, cache_dir=None), stub_pipeline(stub, small_index, classifier, timeout=300)
        )
        with serving(app) as url:
            body = {"question": "Why did the Western Roman Empire fall?", "type": "reason"}
            held = []  # the events that arrived while the combined answer was still held back
            try:
                with httpx.stream("POST", f"{url}/v1/answer/stream", json=body, timeout=300) as response:
                    for line in response.iter_lines():
                        if line.startswith("event: ") and not release.is_set():
                            held.append(line[len("event: ") :])
                            if held[-1] == "plan":
                                release.set()
            finally:
                release.set()
    assert released == [True] and held[:2] == ["type", "plan"] and "result" not in held, (released, held)


async def test_stream_for_plain_rag_has_no_type_or_plan(offline):
    response = await offline.post("/v1/answer/stream", json={"question": "How do plants make sugar?", "method": "rag"})
    names = [name for name, _ in sse_events(response)]
    assert (
        names[-3:] == ["sources", "answer", "result"]
        and set(names[:-3]) <= {"token", "citation"}
        and names[0] == "token"
    )


async def test_stream_rejects_bad_input_before_streaming(offline):
    response = await offline.post("/v1/answer/stream", json={"question": ""})
    assert response.status_code == 422 and "empty" in response.json()["error"]["message"]


async def test_llm_failure_is_502_and_an_error_event(small_index, classifier):
    with OpenAIStubServer(lambda request: Reply(content="model exploded", status=500)) as broken:
        app = create_app(Settings(index=small_index, cache_dir=None), stub_pipeline(broken, small_index, classifier))
        async with in_process(app) as client:
            response = await client.post("/v1/answer", json={"question": "Why?", "method": "llm"})
            assert response.status_code == 502
            assert "LLM endpoint failed" in response.json()["error"]["message"]
            events = sse_events(await client.post("/v1/answer/stream", json={"question": "Why?", "method": "llm"}))
            assert events[-1][0] == "error" and events[-1][1]["status"] == 502


# --- health, page, schema, request ids ----------------------------------------------------------


async def test_health_and_readiness_offline(offline):
    assert (await offline.get("/healthz")).json() == {"status": "ok"}
    ready = await offline.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {
        "status": "ready",
        "checks": {"index": "ok", "llm": "offline", "models": "ok"},
    }


async def test_readiness_checks_the_llm_endpoint(stubbed, small_index, classifier):
    assert (await stubbed.get("/readyz")).json()["checks"] == {"index": "ok", "llm": "ok", "models": "ok"}
    with OpenAIStubServer() as gone:
        pipeline = stub_pipeline(gone, small_index, classifier)
    app = create_app(Settings(index=small_index, cache_dir=None), pipeline)  # its LLM endpoint is now closed
    async with in_process(app) as client:
        ready = await client.get("/readyz")
        assert (await client.get("/healthz")).status_code == 200
    assert ready.status_code == 503
    assert ready.json()["status"] == "not ready" and ready.json()["checks"]["llm"].startswith("unreachable")


async def test_web_page_and_its_assets_are_served(offline):
    page = await offline.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "/static/app.js" in page.text and "http" not in page.text  # nothing off-box
    for asset in ("app.js", "style.css"):
        assert (await offline.get(f"/static/{asset}")).status_code == 200


async def test_api_docs_load_every_script_and_style_from_this_server(offline):
    """Issue 58 #6: FastAPI's /docs loaded Swagger UI from a CDN, and was blank offline. (ReDoc, whose page
    fetches its logo from its CDN whatever it is served from, is not offered.)"""
    from selectolax.lexbor import LexborHTMLParser as HTMLParser

    assert (await offline.get("/redoc")).status_code == 404
    html = await offline.get("/docs")
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    tree = HTMLParser(html.text)
    assets = [node.attributes["src"] for node in tree.css("script[src]")] + [
        node.attributes["href"] for node in tree.css("link[href]")
    ]
    assert any(a.endswith(".js") for a in assets) and "//" not in "".join(assets)  # every asset a path on this server
    for asset in assets:
        response = await offline.get(asset)
        assert response.status_code == 200 and len(response.content) > 1000, asset
    assert "fonts.googleapis" not in html.text and "cdn" not in html.text.lower()


async def test_openapi_schema_lists_the_routes(offline):
    paths = (await offline.get("/openapi.json")).json()["paths"]
    for path in ("/v1/answer", "/v1/answer/stream", "/v1/chat/completions", "/v1/models", "/healthz", "/readyz"):
        assert path in paths


async def test_unknown_route_is_404_with_a_message(offline):
    response = await offline.get("/v1/nothing")
    assert response.status_code == 404 and response.json()["error"]["message"] == "Not Found"


async def test_request_id_in_out_and_in_the_json_log(offline):
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(JsonFormatter().format(record))
    logger = logging.getLogger("typedrag.server")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        given = await offline.post(
            "/v1/answer", json={"question": "Why did Rome fall?"}, headers={"X-Request-ID": "req-42"}
        )
        made = await offline.get("/healthz", headers={"X-Request-ID": "bad id with spaces"})
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert given.headers["x-request-id"] == "req-42"
    assert len(made.headers["x-request-id"]) == 32 and " " not in made.headers["x-request-id"]
    entries = [json.loads(line) for line in lines]
    mine = [e for e in entries if e["request_id"] == "req-42"]
    assert {e["message"] for e in mine} == {"answered", "request"}
    request_line = next(e for e in mine if e["message"] == "request")
    assert request_line["path"] == "/v1/answer" and request_line["status"] == 200 and request_line["duration_ms"] > 0


# --- auth, size limit, concurrency limit --------------------------------------------------------


async def test_api_key_guards_the_api_but_not_health(offline_pipeline, small_index):
    app = create_app(Settings(index=small_index, cache_dir=None), offline_pipeline, ServerOptions(api_key="s3cret"))
    async with in_process(app) as client:
        body = {"question": "Why did Rome fall?", "method": "rag"}
        missing = await client.post("/v1/answer", json=body)
        wrong = await client.post("/v1/answer", json=body, headers={"Authorization": "Bearer nope"})
        right = await client.post("/v1/answer", json=body, headers={"Authorization": "Bearer s3cret"})
        models = await client.get("/v1/models")
        health = await client.get("/healthz")
        page = await client.get("/")
        with pytest.raises(openai.AuthenticationError, match="API key"):
            await openai_client(client, api_key="nope").models.list()
        listed = await openai_client(client, api_key="s3cret").models.list()
    assert missing.status_code == 401 and wrong.status_code == 401 and models.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert "API key" in missing.json()["error"]["message"]
    assert right.status_code == 200 and health.status_code == 200 and page.status_code == 200
    assert [m.id for m in listed.data][:3] == ["typedrag-typed", "typedrag-rag", "typedrag-llm"]
    assert "typedrag-typed:debate" in [m.id for m in listed.data]  # one model per question type


def test_request_size_limit_is_413(offline_pipeline, small_index):
    app = create_app(
        Settings(index=small_index, cache_dir=None), offline_pipeline, ServerOptions(max_request_bytes=2048)
    )
    with serving(app) as url:
        declared = httpx.post(f"{url}/v1/answer", json={"question": "x" * 4000})
        chunked = httpx.post(
            f"{url}/v1/answer",
            content=iter([b'{"question": "', b"y" * 4000, b'"}']),
            headers={"Content-Type": "application/json"},
        )
        small = httpx.post(f"{url}/v1/answer", json={"question": "Why did Rome fall?", "method": "rag"}, timeout=60)
    for response in (declared, chunked):
        assert response.status_code == 413
        assert "over the limit of 2048 bytes" in response.json()["error"]["message"]
        assert response.headers["x-request-id"]
    assert small.status_code == 200


def test_concurrency_limit_is_503_with_retry_after(small_index, classifier):
    with OpenAIStubServer(delay=1.0) as slow:
        service_app = create_app(
            Settings(index=small_index, cache_dir=None),
            stub_pipeline(slow, small_index, classifier),
            ServerOptions(max_concurrency=1, retry_after_seconds=3),
        )
        with serving(service_app) as url:
            slots = service_app.state.service.slots
            first: dict = {}
            worker = threading.Thread(
                target=lambda: first.update(
                    r=httpx.post(f"{url}/v1/answer", json={"question": "Why?", "method": "llm"}, timeout=30)
                )
            )
            worker.start()
            wait_for(lambda: slots.used == 1)
            busy = httpx.post(f"{url}/v1/answer", json={"question": "Why?", "method": "llm"})
            busy_chat = httpx.post(
                f"{url}/v1/chat/completions",
                json={"model": "typedrag-llm", "messages": [{"role": "user", "content": "Why?"}]},
            )
            health = httpx.get(f"{url}/healthz")
            worker.join(30)
            assert slots.used == 0
            # a stream holds its slot until it ends, even when the client walks away mid-stream
            with httpx.stream(
                "POST", f"{url}/v1/answer/stream", json={"question": "Why?", "method": "llm"}, timeout=30
            ) as stream:
                assert stream.status_code == 200
                assert slots.used == 1
            wait_for(lambda: slots.used == 0)
    assert first["r"].status_code == 200
    for response in (busy, busy_chat):
        assert response.status_code == 503
        assert response.headers["retry-after"] == "3"
        assert "server busy" in response.json()["error"]["message"]
    assert health.status_code == 200


def wait_for(condition, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


# --- OpenAI-compatible endpoint, driven by the official SDK -------------------------------------


async def test_openai_sdk_non_streaming(stubbed, stub):
    client = openai_client(stubbed)
    assert [m.id for m in (await client.models.list()).data][:3] == ["typedrag-typed", "typedrag-rag", "typedrag-llm"]
    completion = await client.chat.completions.create(
        model="typedrag-typed",
        messages=[
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Why is the sky blue?"},
            {"role": "assistant", "content": "Because of scattering."},
            {"role": "user", "content": [{"type": "text", "text": COMPARISON}]},
        ],
        temperature=0.3,
    )
    content = completion.choices[0].message.content
    assert completion.choices[0].finish_reason == "stop"
    extension = completion.model_extra["typedrag"]
    result = AnswerResult.model_validate(extension)
    assert result.question == COMPARISON and result.strategy == "comparison"
    assert content.startswith(result.answer) and "\n\nSources:\n- [" in content
    for number in {n for c in result.citations for n in c.source_numbers}:
        source = next(s for s in result.sources if s.number == number)
        assert f"- [{number}] {source.title} ({source.passage_id})" in content
    assert (
        result.llm_calls
        and completion.usage.total_tokens == result.usage.prompt_tokens + result.usage.completion_tokens
    )
    assert "Stub answer to:" in result.answer and stub.requests  # the pipeline's own LLM was the stub


async def test_openai_sdk_streaming(stubbed):
    stream = await openai_client(stubbed).chat.completions.create(
        model="typedrag-typed",
        messages=[{"role": "user", "content": "Why did the Western Roman Empire fall?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    events = [c.model_extra["typedrag_event"] for c in chunks if (c.model_extra or {}).get("typedrag_event")]
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop")
    result = AnswerResult.model_validate(final.model_extra["typedrag"])
    names = [e["event"] for e in events if e["event"] != "citation"]
    decomposed = ["plan", *["aspect"] * len(result.aspects)] if result.plan else []
    assert names == ["type", *decomposed, "sources"]
    assert events[0]["data"]["type"] == result.type.type
    # the answer arrives as it is written, word by word from the stub, then the sources list
    assert len(deltas) > len(result.answer.split()) // 2 and "".join(deltas) == with_sources(result)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert len({c.id for c in chunks}) == 1


async def test_langchain_chat_openai_gets_the_usage_of_a_stream_however_it_asks(stubbed):
    """Issue 41 #12: LangChain's ChatOpenAI sends `stream_options.include_usage` only with stream_usage=True (for
    a base URL of its own choosing); the usage comes either way, and once."""
    from langchain_openai import ChatOpenAI

    question = [("user", "Why did the Western Roman Empire fall?")]
    usage = {}
    for asks in (None, False, True):
        model = ChatOpenAI(
            model="typedrag-rag",
            base_url=f"{stubbed.base_url}/v1",
            api_key="unused",
            max_retries=0,
            stream_usage=asks,
            http_async_client=stubbed,
        )
        chunks = [chunk async for chunk in model.astream(question)]
        whole = chunks[0]
        for chunk in chunks[1:]:
            whole += chunk
        usage[asks] = whole.usage_metadata
        assert [c.usage_metadata for c in chunks].count(None) == len(
            chunks
        ) - 1  # on one chunk only: never counted twice
    assert usage[None] and usage[None]["input_tokens"] > 0 and usage[None]["output_tokens"] > 0
    assert usage[None] == usage[False] == usage[True]


@pytest.mark.parametrize(("model", "method"), [("typedrag-rag", "rag"), ("typedrag-llm", "llm")])
async def test_openai_model_name_picks_the_method(stubbed, model, method):
    completion = await openai_client(stubbed).chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Why did Rome fall?"}]
    )
    assert completion.model == model and completion.model_extra["typedrag"]["method"] == method


async def test_openai_errors_reach_the_sdk_with_their_message(stubbed):
    client = openai_client(stubbed)
    with pytest.raises(openai.NotFoundError, match="unknown model 'gpt-4o'"):
        await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Why?"}])
    with pytest.raises(openai.BadRequestError, match="the question is empty"):
        await client.chat.completions.create(model="typedrag-typed", messages=[{"role": "user", "content": " "}])
    with pytest.raises(openai.BadRequestError, match="no user message"):
        await client.chat.completions.create(
            model="typedrag-typed", messages=[{"role": "system", "content": "Be brief."}]
        )
    with pytest.raises(openai.UnprocessableEntityError, match="messages"):
        await client.chat.completions.create(model="typedrag-typed", messages=[])


async def test_openai_stream_reports_a_failure_as_an_error(small_index, classifier):
    with OpenAIStubServer(lambda request: Reply(content="model exploded", status=500)) as broken:
        app = create_app(Settings(index=small_index, cache_dir=None), stub_pipeline(broken, small_index, classifier))
        async with in_process(app) as client:
            stream = await openai_client(client).chat.completions.create(
                model="typedrag-llm", messages=[{"role": "user", "content": "Why?"}], stream=True
            )
            with pytest.raises(openai.APIError, match="LLM endpoint failed"):
                [chunk async for chunk in stream]


# --- the command ----------------------------------------------------------------------------------


def serve_process(*args: str) -> subprocess.Popen:
    code = "import typer; from typedrag.server.command import serve_command; typer.run(serve_command)"
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TYPEDRAG_SERVER_API_KEY": "k"},
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_command_runs_the_service(small_index):
    port = free_port()
    process = serve_process("--port", str(port), "--index", str(small_index), "--llm", "offline")
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline, "server did not become ready"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/answer",
            json={"question": COMPARISON, "method": "rag"},
            headers={"Authorization": "Bearer k", "X-Request-ID": "from-test"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    logs = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert any(e["request_id"] == "from-test" and e["message"] == "request" and e["status"] == 200 for e in logs)


def test_serve_command_fails_clearly_without_an_index(tmp_path):
    process = serve_process("--port", str(free_port()), "--index", str(tmp_path / "missing"))
    _, stderr = process.communicate(timeout=90)
    assert process.returncode == 2
    assert "error: " in stderr and "missing" in stderr and "Traceback" not in stderr


def test_serve_command_imports_no_web_framework():
    code = "import sys, typedrag.server.command; print('fastapi' in sys.modules, 'uvicorn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "False False"


# --- knowledge = "labelled": what the model adds of its own, apart, on every way out ----------------------------


def knowing(request):
    """A model that answers from the sources and adds, apart, what it knows itself."""
    from typedrag.testing.openai_stub import default_content

    if request.schema_name == "LabelledAnswer":
        first = re.findall(r"\[(\d+)\]", request.last_user)[0]
        return Reply(
            content=json.dumps(
                {
                    "from_sources": f"Crocodiles have a V-shaped snout [{first}].",
                    "not_covered": "how fast they run",
                    "from_own_knowledge": [
                        "Crocodiles can gallop for short distances [3].",
                        "Alligators are slower on land.",
                    ],
                }
            )
        )
    return Reply(content=default_content(request))


@pytest.fixture(scope="module")
def knowing_pipeline(small_index, classifier):
    with OpenAIStubServer(knowing) as server:
        yield stub_pipeline(server, small_index, classifier)


@pytest.fixture
async def knowing_client(knowing_pipeline, small_index):
    async with in_process(create_app(Settings(index=small_index, cache_dir=None), knowing_pipeline)) as client:
        yield client


OWN_KNOWLEDGE = "Not from your documents: Crocodiles can gallop for short distances. Alligators are slower on land."


async def test_the_api_takes_knowledge_per_request_and_streams_the_unsourced_part_apart(knowing_client):
    body = {"question": COMPARISON, "type": "comparison", "knowledge": "labelled"}
    events = sse_events(await knowing_client.post("/v1/answer/stream", json=body))
    names = [name for name, _ in events]
    result = AnswerResult.model_validate(events[-1][1])
    assert result.knowledge == "labelled" and result.answer.startswith("Crocodiles have a V-shaped snout [")
    # the tokens are the cited answer alone; the unsourced part comes after them, as its own event
    assert "".join(data["text"] for name, data in events if name == "token") == result.answer
    assert names.index("unsourced") > max(i for i, n in enumerate(names) if n == "token") and names[-3:] == [
        "sources",
        "answer",
        "result",
    ]
    unsourced = dict(events)["unsourced"]
    assert (
        unsourced["sentences"]
        == result.unsourced.sentences
        == ["Crocodiles can gallop for short distances.", "Alligators are slower on land."]
    )
    assert unsourced["text"] == OWN_KNOWLEDGE
    plain = (await knowing_client.post("/v1/answer", json={"question": COMPARISON, "type": "comparison"})).json()
    assert plain["knowledge"] == "documents" and plain["unsourced"] is None  # the server's default
    bad = await knowing_client.post("/v1/answer", json={**body, "knowledge": "everything"})
    assert bad.status_code == 422 and "knowledge" in bad.json()["error"]["message"]


async def test_the_openai_compatible_endpoint_takes_knowledge_in_the_extra_body_and_labels_the_part(knowing_client):
    client = openai_client(knowing_client)
    messages = [{"role": "user", "content": COMPARISON}]
    completion = await client.chat.completions.create(
        model="typedrag-typed:comparison", messages=messages, extra_body={"knowledge": "labelled"}
    )
    content = completion.choices[0].message.content
    result = AnswerResult.model_validate(completion.model_extra["typedrag"])
    # the answer, then the part from the model's own knowledge, then the sources: each a paragraph of its own
    assert content == with_sources(result) and content.startswith(
        result.answer + "\n\n" + OWN_KNOWLEDGE + "\n\nSources:"
    )
    stream = await client.chat.completions.create(
        model="typedrag-typed:comparison", messages=messages, stream=True, extra_body={"knowledge": "labelled"}
    )
    chunks = [chunk async for chunk in stream]
    streamed = "".join(c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content)
    final = AnswerResult.model_validate(
        next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop").model_extra["typedrag"]
    )
    assert streamed == with_sources(final) and OWN_KNOWLEDGE in streamed
    events = [c.model_extra["typedrag_event"]["event"] for c in chunks if (c.model_extra or {}).get("typedrag_event")]
    assert "unsourced" in events
    documents = await client.chat.completions.create(model="typedrag-typed:comparison", messages=messages)
    assert "Not from your documents" not in documents.choices[0].message.content
    with pytest.raises(openai.BadRequestError, match="knowledge must be one of documents, labelled"):
        await client.chat.completions.create(model="typedrag-rag", messages=messages, extra_body={"knowledge": "all"})


async def test_the_page_offers_the_knowledge_setting_and_shows_the_unsourced_part_apart(offline):
    page = (await offline.get("/")).text
    script = (await offline.get("/static/app.js")).text
    assert 'id="knowledge"' in page and 'value="labelled"' in page and 'id="unsourced"' in page
    assert 'knowledge: $("knowledge").value' in script and "unsourced: (d) =>" in script
