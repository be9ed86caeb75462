"""Issue 13, items 5, 7 and the service's part of 9: slow clients, invalid input, disconnects, upstream
errors, Host headers and unsupported chat options. Real uvicorn on 127.0.0.1 only; every loop is bounded."""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
import time
from contextlib import contextmanager

import httpx
import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from typedrag.config import Settings  # noqa: E402
from typedrag.engines.offline import OfflineEngine  # noqa: E402
from typedrag.index import open_retriever  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.server.app import create_app  # noqa: E402
from typedrag.server.logs import RateLimitFilter, configure_logging  # noqa: E402
from typedrag.server.service import ServerOptions  # noqa: E402
from typedrag.server.command import uvicorn_config  # noqa: E402
from typedrag.testing.openai_stub import OpenAIStubServer, Reply  # noqa: E402

from .conftest import stub_pipeline  # noqa: E402

HANG = 300  # seconds: only a guard against a test waiting forever on something that never happens, never a measure


@contextmanager
def served(app, **config):
    """`app` under the configuration `typedrag serve` uses, on a free loopback port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", port, timeout_graceful_shutdown=2, **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", port
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@pytest.fixture(scope="module")
def offline(small_index):
    return Pipeline(OfflineEngine(), open_retriever(small_index))


def app_for(pipeline, small_index, **options):
    return create_app(Settings(index=small_index, cache_dir=None), pipeline, ServerOptions(**options))


def one_window(handler: logging.Handler) -> RateLimitFilter:
    """The handler's rate limiter with a window longer than any test: whatever the machine's speed, a test's
    records all fall in one window, so what it logs is counted against the burst, not against the clock."""
    limiter = next(f for f in handler.filters if isinstance(f, RateLimitFilter))
    limiter.window = 10**9
    return limiter


@pytest.fixture
def log_stream():
    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_logging("info", stream)
    one_window(root.handlers[0])
    yield stream
    root.handlers[:], _ = saved
    root.setLevel(saved[1])


def test_noisy_records_are_cut_to_a_burst_per_window_and_the_rest_counted():
    """The rate limiter itself, without a clock: a burst passes, the rest is dropped and counted, and the count
    is said on the first record of the next window; other loggers are never limited."""
    limiter = RateLimitFilter(burst=3, window=10**9)

    def record(name: str = "uvicorn.error", msg: str = "Invalid HTTP request received.") -> logging.LogRecord:
        return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, None, None)

    assert [limiter.filter(record()) for _ in range(10)] == [True] * 3 + [False] * 7
    assert all(limiter.filter(record("typedrag.server")) for _ in range(10))  # not a noisy logger
    assert limiter.filter(record(msg="another message"))  # counted per message
    limiter.window = 0.0  # the window is over
    rolled = record()
    assert limiter.filter(rolled) and "(7 similar messages suppressed" in rolled.getMessage()


# --- item 5: slow clients ------------------------------------------------------------------------


def test_slow_headers_are_cut_off_and_health_still_answers(offline, small_index, log_stream):
    app = app_for(offline, small_index)
    with served(app, header_timeout=1.0, max_connections=40) as (url, port):
        slow = []
        for _ in range(60):  # more than the cap
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # never finishes its headers
            slow.append(s)
        health = httpx.get(f"{url}/healthz", timeout=30)  # at the cap, the oldest half-sent request makes room
        assert health.status_code == 200
        closed = 0
        for s in slow:  # each is cut, evicted or timed out, whenever the loaded machine gets to it
            s.settimeout(HANG)  # a guard against a socket never closed, far past the 1 s header timeout
            try:
                closed += s.recv(1) == b""
            except ConnectionResetError:
                closed += 1  # aborted: a reset counts as cut off
            except TimeoutError:
                pass  # still open: not cut off
            finally:
                s.close()
        assert closed == len(slow), closed  # all of them were cut (evicted or timed out)
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200


def test_slow_body_gets_408(offline, small_index):
    app = app_for(offline, small_index, body_timeout=1.0)
    with served(app) as (url, port):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(
                b'POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"q'
            )
            reply = s.recv(4096)
        assert reply.startswith(b"HTTP/1.1 408")


def test_a_thousand_bad_requests_write_little_to_the_log(offline, small_index, log_stream):
    app = app_for(offline, small_index)
    with served(app) as (url, port):
        for _ in range(300):  # bounded: 300 garbage requests, each answered 400 by uvicorn with a warning
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
                s.recv(1024)
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    lines = log_stream.getvalue().splitlines()
    invalid = [line for line in lines if "Invalid HTTP request" in line]
    # 300 warnings in one window (log_stream's): the burst and no more, however long the requests took
    assert len(invalid) == RateLimitFilter().burst, len(invalid)
    assert len(lines) < 100, len(lines)


# --- item 7: invalid input is 4xx ------------------------------------------------------------------


@pytest.fixture(scope="module")
def offline_url(offline, small_index):
    with served(app_for(offline, small_index)) as (url, _):
        yield url


@pytest.mark.parametrize("raw", [b'{"question": NaN}', b'{"question": Infinity}', b'{"question": "Why?", "type": NaN}'])
def test_nan_is_422_not_500(offline_url, raw):
    response = httpx.post(f"{offline_url}/v1/answer", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert "question" in response.json()["error"]["message"] or "type" in response.json()["error"]["message"]


@pytest.mark.parametrize("text", [123, None, ["a"]])
def test_chat_part_with_a_non_string_text_is_400(offline_url, text):
    body = {"model": "typedrag-rag", "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}
    response = httpx.post(f"{offline_url}/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    assert "string" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "extra, words",
    [
        ({"n": 2}, "n must be 1"),
        ({"n": True}, "n must be 1"),
        ({"n": 1.0}, "n must be 1"),
        ({"n": "1"}, "n must be 1"),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "does not call tools"),
        ({"tool_choice": "auto"}, "does not call tools"),
        ({"response_format": {"type": "json_object"}}, "response_format 'json_object'"),  # issue 35: it was ignored
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}},
            "response_format 'json_schema'",
        ),
    ],
)
def test_chat_options_typedrag_cannot_honour_are_400(offline_url, extra, words):
    body = {"model": "typedrag-rag", "messages": [{"role": "user", "content": "Why did Rome fall?"}], **extra}
    response = httpx.post(f"{offline_url}/v1/chat/completions", json=body)
    assert response.status_code == 400 and words in response.json()["error"]["message"]
    ok = httpx.post(f"{offline_url}/v1/chat/completions", json={**body, **{k: None for k in extra}, "n": 1}, timeout=60)
    assert ok.status_code == 200, ok.text


def test_a_text_response_format_is_what_typedrag_does_anyway(offline_url):
    body = {
        "model": "typedrag-rag",
        "messages": [{"role": "user", "content": "Why did Rome fall?"}],
        "response_format": {"type": "text"},
    }
    response = httpx.post(f"{offline_url}/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text


def test_each_listed_model_can_be_retrieved_and_another_is_404(offline_url):
    """Issue 35, minor: GET /v1/models/{id} was 404 for every model, so `client.models.retrieve` failed."""
    import openai

    client = openai.OpenAI(base_url=f"{offline_url}/v1", api_key="unused", max_retries=0)
    listed = client.models.list().data
    assert "typedrag-typed:debate" in [m.id for m in listed]
    for model in listed:
        assert client.models.retrieve(model.id).model_dump() == model.model_dump()
    missing = httpx.get(f"{offline_url}/v1/models/gpt-4o")
    assert missing.status_code == 404 and "unknown model 'gpt-4o'" in missing.json()["error"]["message"]


# --- item 9: the service's minor items -------------------------------------------------------------


def test_502_body_is_generic_and_the_details_are_logged(small_index, log_stream):
    with OpenAIStubServer(lambda r: Reply(status=500, content="db at 10.1.2.3:5432 exploded")) as stub:
        app = app_for(stub_pipeline(stub.base_url, open_retriever(small_index)), small_index)
        with served(app) as (url, _):
            response = httpx.post(f"{url}/v1/answer", json={"question": "Why?", "method": "llm"}, timeout=60)
    assert response.status_code == 502
    body = response.text
    assert "exploded" not in body and "10.1.2.3" not in body and "127.0.0.1" not in body
    assert response.headers["x-request-id"] in body
    assert "exploded" in log_stream.getvalue()


def wait_until(condition, what: str) -> None:
    """Wait for `condition`, however loaded the machine; fail only if it never comes (HANG)."""
    deadline = time.monotonic() + HANG
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def test_a_client_that_leaves_cancels_its_answer(small_index):
    """The LLM call is held open by the stub until the test lets it go: the answer's slot is freed while it is
    still held, so the answer was cancelled, not waited out (an event, not a race against a 4 s reply)."""
    release = threading.Event()

    def held(request):
        release.wait(HANG)
        return Reply(content="late [1].")

    with OpenAIStubServer(held) as stub:
        app = app_for(stub_pipeline(stub.base_url, open_retriever(small_index), timeout=HANG), small_index)
        try:
            with served(app) as (url, port):
                slots = app.state.service.slots
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    body = json.dumps({"question": "Why did Rome fall?", "method": "llm"}).encode()
                    s.sendall(
                        b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
                    )
                    wait_until(lambda: stub.waiting == 1, "the LLM call under way")
                    assert slots.used == 1 and len(stub.requests) == 1
                wait_until(lambda: slots.used == 0, "the slot freed after the client left")
                assert stub.waiting == 1 and not release.is_set()  # the LLM call still held: cancelled, not waited out
        finally:
            release.set()
    assert len(stub.requests) == 1  # no further LLM calls


@pytest.mark.parametrize(
    "allowed, host, status",
    [
        (["localhost", "127.0.0.1", "[::1]"], "evil.example", 400),
        (["localhost", "127.0.0.1", "[::1]"], "localhost:8000", 200),
        (["localhost", "127.0.0.1", "[::1]"], "[::1]:8000", 200),
        (None, "evil.example", 200),
        (["api.example"], "api.example", 200),
    ],
)
def test_allowed_hosts(offline, small_index, allowed, host, status):
    with served(app_for(offline, small_index, allowed_hosts=allowed)) as (url, _):
        assert httpx.get(f"{url}/healthz", headers={"Host": host}).status_code == status


def test_serve_defaults_to_loopback_host_headers_without_a_key(monkeypatch):
    """The command's default: no API key on loopback -> only loopback Host headers."""
    import typedrag.server.command as command

    captured = {}

    def fake_server(config):
        captured["app"] = config.app
        return type("S", (), {"run": lambda self: None})()

    monkeypatch.setattr("uvicorn.Server", fake_server)
    monkeypatch.setattr("typedrag.factory.build_pipeline", lambda settings, resources, **options: object())
    monkeypatch.delenv("TYPEDRAG_SERVER_API_KEY", raising=False)
    command.serve_command(
        host="127.0.0.1",
        port=1,
        index=None,
        llm="offline",
        base_url=None,
        api_key_env="TYPEDRAG_SERVER_API_KEY",
        max_concurrency=1,
        max_request_bytes=4096,
        log_level="warning",
        allowed_hosts=None,
        max_connections=None,
        header_timeout=20.0,
        body_timeout=20.0,
    )
    hosts = [m for m in captured["app"].user_middleware if m.cls.__name__ == "TrustedHostMiddleware"]
    assert hosts and hosts[0].kwargs["allowed_hosts"] == ["localhost", "127.0.0.1", "[::1]"]
