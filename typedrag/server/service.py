"""What the HTTP routes share: the service (pipeline, slots, readiness), errors, request ids, logging.

app.py (native API, page, health) and openai_compat.py (chat completions) both build on this module
and neither imports the other.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import re
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.datastructures import Headers, MutableHeaders

from typedrag.config import Settings
from typedrag.errors import ModelUnavailable
from typedrag.history import Turn, clean_history
from typedrag.index.base import IndexUnusableError
from typedrag.llm.base import LLMError
from typedrag.pipeline import Pipeline
from typedrag.questions import QuestionError, clean_question
from typedrag.redact import RedactingFilter
from typedrag.result import AnswerResult
from typedrag.server.metrics import ServiceMetrics

KEEPALIVE_SECONDS = 15.0  # an SSE comment this often keeps proxies from closing a slow stream
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
log = logging.getLogger("typedrag.server")
client_log = logging.getLogger("typedrag.server.client")  # misbehaving clients: rate-limited (RateLimitFilter)
errors_log = logging.getLogger("typedrag.server.errors")  # unhandled errors: rate-limited, tracebacks cut short
MAX_JSON_DEPTH = 32  # nesting of a request's JSON; typedrag's own bodies need 5 (a message's content parts)
TRACEBACK_FRAMES = 12  # the innermost frames of a logged traceback (a RecursionError has a thousand)
TRACEBACK_CHARS = 8000


@dataclass
class ServerOptions:
    """Limits and access rules of one server process: API key, concurrency, body size, timeouts, allowed hosts."""

    api_key: str | None = None  # Bearer key required on /v1/*; None leaves the API open
    max_concurrency: int = 32  # answers in flight; beyond it 503 + Retry-After rather than an unbounded queue
    max_request_bytes: int = 256 * 1024
    retry_after_seconds: int = 2
    ready_timeout: float = 2.0  # seconds /readyz waits for the LLM endpoint
    body_timeout: float = 20.0  # seconds a client may take to send its whole body (Apache mod_reqtimeout's body=20)
    allowed_hosts: list[str] | None = None  # Host headers accepted (starlette TrustedHostMiddleware); None: any


class JsonFormatter(logging.Formatter):
    """One JSON object per line, carrying the current request id, for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": request_id_var.get(),
            **getattr(record, "fields", {}),
        }
        if record.exc_info:
            entry["error"] = short_traceback(record.exc_info)
        return json.dumps(entry, default=str)


def short_traceback(exc_info: Any) -> str:
    """The innermost frames of a traceback, at most TRACEBACK_CHARS: where it failed, never a log line that
    grows with the request (a RecursionError from deep input lists a thousand frames)."""
    kind, error, trace = exc_info
    lines = traceback.format_exception(kind, error, trace, limit=-TRACEBACK_FRAMES, chain=False)
    text = "".join(lines)
    return text if len(text) <= TRACEBACK_CHARS else "...\n" + text[-TRACEBACK_CHARS:]


class RateLimitFilter(logging.Filter):
    """At most `burst` records per `window` seconds for each (logger, message template) of the noisy
    loggers (uvicorn's per-connection warnings, asyncio's accept errors): a thousand bad sockets write a
    few lines and a count, not 300 MB. The count of what was dropped is logged when the window rolls over.
    (journald's RateLimitIntervalSec/RateLimitBurst, per message instead of per service.)"""

    NOISY = ("uvicorn", "asyncio", "h11", "typedrag.server.client", "typedrag.server.errors")

    def __init__(self, burst: int = 20, window: float = 10.0) -> None:
        super().__init__()
        self.burst, self.window = burst, window
        self._seen: dict[tuple[str, str], list] = {}  # key -> [window start, count, dropped]

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.NOISY):
            return True
        key = (record.name, str(record.msg))
        now = time.monotonic()
        state = self._seen.get(key)
        if state is None or now - state[0] >= self.window:
            dropped = state[2] if state else 0
            if len(self._seen) > 1000:  # bounded memory whatever the messages
                self._seen.clear()
            self._seen[key] = [now, 1, 0]
            if dropped:
                record.msg = f"{record.getMessage()} ({dropped} similar messages suppressed in the last {self.window:.0f} s)"
                record.args = None
            return True
        state[1] += 1
        if state[1] <= self.burst:
            return True
        state[2] += 1
        return False


def configure_logging(level: str = "info", stream: Any = None) -> None:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RateLimitFilter())
    handler.addFilter(RedactingFilter())  # whatever logger a URL with a password comes through
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


_ERROR_TYPES = {
    401: "authentication_error",
    404: "not_found_error",
    413: "request_too_large",
    502: "upstream_error",
    503: "overloaded",
}


def json_safe(value: Any) -> Any:
    """NaN and infinities (which Python's json reads from a request) as strings: strict JSON has no such numbers."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def error_body(status: int, message: str, detail: Any = None) -> dict[str, Any]:
    """`detail` as FastAPI clients expect, `error` as OpenAI SDKs expect, so every client shows the message."""
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"detail": message if detail is None else detail, "error": {"message": message, "type": kind, "code": None}}


def api_error(status: int, message: str, headers: dict[str, str] | None = None) -> HTTPException:
    return HTTPException(status_code=status, detail=message, headers=headers)


class RequestContext:
    """Pure ASGI middleware (streams pass through): X-Request-ID in and out, body size cap, one log line each."""

    def __init__(self, app: Any, max_body: int, body_timeout: float = 20.0) -> None:
        self.app, self.max_body, self.body_timeout = app, max_body, body_timeout

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        incoming = headers.get("x-request-id", "")
        request_id = incoming if _REQUEST_ID.fullmatch(incoming) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        started, status = time.perf_counter(), 0

        async def send_with_id(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message).append("X-Request-ID", request_id)
            await send(message)

        replay = None
        try:
            replay = await self._read_body(headers, receive)
            if isinstance(replay, JSONResponse):
                await replay(scope, receive, send_with_id)
            elif replay is not None:
                await self.app(scope, replay, send_with_id)
        except Exception:
            errors_log.exception("unhandled error")
            if not status:  # nothing sent yet: answer with the id the log line carries
                crashed = JSONResponse(error_body(500, f"internal error; request id {request_id}"), 500)
                await crashed(scope, receive, send_with_id)
        finally:
            fields = {
                "method": scope["method"],
                "path": scope["path"],
                "status": status or 500,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
            }
            if replay is None and not status:  # gone before its request was in (evicted, or a slow sender that gave up)
                client_log.info("client left before sending its whole request", extra={"fields": fields})
            else:
                log.info("request", extra={"fields": fields})
            request_id_var.reset(token)

    async def _read_body(self, headers: Headers, receive: Callable) -> Callable | JSONResponse | None:
        """Buffer the (small) body so an oversized one is refused before any handler runs."""
        too_big = JSONResponse(
            error_body(413, f"request body is over the limit of {self.max_body} bytes; send a shorter question"),
            status_code=413,
        )
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            return too_big
        body = b""
        try:
            async with asyncio.timeout(self.body_timeout):  # a client trickling its body cannot hold a task forever
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return None  # the client left before sending its request
                    body += message.get("body", b"")
                    if len(body) > self.max_body:
                        return too_big
                    if not message.get("more_body"):
                        break
        except TimeoutError:
            client_log.warning("request body not received in time")
            return JSONResponse(
                error_body(408, f"request body not received within {self.body_timeout:g} s"),
                status_code=408,
                headers={"Connection": "close"},
            )
        if json_depth(body) > MAX_JSON_DEPTH:
            message = f"the request's JSON is nested more than {MAX_JSON_DEPTH} levels deep"
            return JSONResponse(error_body(422, message, [{"loc": ["body"], "msg": message, "type": "json_too_deep"}]), 422)
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if sent:
                return await receive()  # later calls wait for the disconnect, as streaming responses expect
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay


_JSON_ESCAPE = re.compile(rb"(?s)\\.")  # a backslash and what it escapes, taken left to right
_JSON_STRING = re.compile(rb'"[^"]*"')  # once escapes are gone, a string ends at the next quote
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def json_depth(body: bytes) -> int:
    """How deep `body`'s arrays and objects nest, if it is JSON (brackets inside strings do not count); a
    bound checked before any parser or validator recurses into the body, in time linear in its size."""
    unquoted = _JSON_STRING.sub(b"", _JSON_ESCAPE.sub(b"", body))  # neither pattern can backtrack far: linear
    brackets = np.frombuffer(unquoted.translate(None, _NOT_BRACKETS), dtype=np.uint8)
    if not brackets.size:
        return 0
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


class Slots:
    """Answers in flight; one event loop per process, so a plain counter is enough."""

    def __init__(self, size: int, retry_after: int) -> None:
        self.size, self.used, self.retry_after = size, 0, retry_after

    def take(self) -> None:
        if self.used >= self.size:
            raise api_error(
                503,
                f"server busy: {self.size} answers in flight; retry in {self.retry_after} s",
                {"Retry-After": str(self.retry_after)},
            )
        self.used += 1

    def give(self) -> None:
        self.used -= 1


class SlotStream(StreamingResponse):
    """A streaming response that frees its concurrency slot however the stream ends (done, error, disconnect)."""

    def __init__(self, content: AsyncIterator[str], slots: Slots, **kwargs: Any) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            **kwargs,
        )
        self.slots = slots

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slots.give()


class Service:
    """What the routes share: the pipeline, the concurrency slots, readiness checks."""

    def __init__(self, pipeline: Pipeline, settings: Settings, options: ServerOptions, metrics: ServiceMetrics | None = None) -> None:
        self.pipeline, self.settings, self.options = pipeline, settings, options
        self.slots = Slots(options.max_concurrency, options.retry_after_seconds)
        self.metrics = metrics or ServiceMetrics()
        self.model_problem: str | None = None  # why a model the engine needs cannot be loaded (see load_models)

    def load_models(self) -> None:
        """Load the engine's models now (startup), so a missing or damaged one makes the replica not ready,
        with the reason, instead of failing every answer."""
        try:
            load_models(self.pipeline)
        except ModelUnavailable as error:
            self.model_problem = str(error)
            log.error("a model cannot be loaded: not ready", extra={"fields": {"error": self.model_problem}})

    def check(self, question: str, type_: str | None, status: int = 422) -> tuple[str, str | None]:
        """Reject bad input with a 4xx before a slot or a stream is spent on it."""
        try:
            question = clean_question(question, self.pipeline.settings.max_question_chars)
            return question, self.pipeline.route_label(type_) if type_ else None
        except QuestionError as error:
            raise api_error(status, str(error)) from error

    def check_history(self, history: list[Turn], status: int = 422) -> list[Turn]:
        """The conversation's turns cleaned and bounded, or a 4xx naming the turn that is not a message."""
        try:
            return clean_history(history)
        except QuestionError as error:
            raise api_error(status, str(error)) from error

    async def answer(
        self, question: str, method: str, forced: str | None, on_event: Callable | None = None, history: list[Turn] | None = None
    ) -> AnswerResult:
        started = time.perf_counter()
        try:
            result = await self.pipeline.answer(question, method, forced, on_event=on_event, history=history)
        except QuestionError as error:
            raise api_error(422, str(error)) from error
        except LLMError as error:  # the details (upstream text, host:port) go to the log, not to the client
            log.warning("LLM endpoint failed", extra={"fields": {"error": str(error)}})
            raise api_error(502, f"the LLM endpoint failed; see the server log for request id {request_id_var.get()}") from error
        except IndexUnusableError as error:
            raise api_error(503, f"the index is unusable: {error}") from error
        except ModelUnavailable as error:
            raise api_error(503, f"a model the engine needs cannot be loaded: {error}") from error
        seconds = time.perf_counter() - started
        self.metrics.answered(result, seconds)
        fields = {
            "method": result.method,
            "strategy": result.strategy,
            "type": result.type.type if result.type else None,
            "sources": len(result.sources),
            "llm_calls": result.usage.calls,
            "fallbacks": len(result.fallbacks),
            "history_turns": result.rewrite.history_turns if result.rewrite else 0,
            "abstained": result.abstained,
            "duration_ms": round(seconds * 1000, 1),
        }
        log.info("answered", extra={"fields": fields})
        return result

    async def answer_unless_gone(
        self, request: Request, question: str, method: str, forced: str | None, history: list[Turn] | None = None
    ) -> AnswerResult | None:
        """The answer, or None (the work cancelled: no more LLM calls) if the client disconnects first."""
        task = asyncio.create_task(self.answer(question, method, forced, history=history))
        gone = asyncio.create_task(_disconnected(request))
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pending in (task, gone) if not task.done() else (gone,):
                pending.cancel()
        if not task.done() or task.cancelled():
            log.info("client disconnected: answer cancelled")
            return None
        return task.result()

    async def events(
        self, question: str, method: str, forced: str | None, history: list[Turn] | None = None
    ) -> AsyncIterator[tuple[str, Any]]:
        """Progress events as the pipeline emits them, a ("ping", None) when quiet, then ("result", AnswerResult)."""
        queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()
        task = asyncio.create_task(
            self.answer(question, method, forced, lambda name, data: queue.put_nowait((name, data)), history)
        )
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    yield "ping", None
                    continue
                if item is None:
                    break
                yield item
            yield "result", task.result()
        finally:
            task.cancel()  # the client left: stop spending LLM calls on it

    async def readiness(self) -> dict[str, str]:
        models = "ok" if self.model_problem is None else f"error: {self.model_problem}"
        return {"index": await self._index_check(), "llm": await self._llm_check(), "models": models}

    async def _index_check(self) -> str:
        retriever = self.pipeline.retriever
        if retriever is None:
            return "missing"
        try:
            await asyncio.to_thread(retriever.search, "readiness", 1)
        except Exception as error:  # any failure means this replica must not take traffic
            return f"error: {type(error).__name__}: {error}"
        return "ok"

    async def _llm_check(self) -> str:
        base_url = getattr(getattr(self.pipeline.engine, "model", None), "base_url", None)
        if base_url is None:
            return "offline"
        key = self.settings.llm.api_key
        headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
        try:
            async with httpx.AsyncClient(timeout=self.options.ready_timeout) as client:
                response = await client.get(base_url.rstrip("/") + "/models", headers=headers)
        except httpx.HTTPError as error:
            return f"unreachable: {type(error).__name__}"
        return "ok" if response.status_code == 200 else f"HTTP {response.status_code}"


def load_models(pipeline: Pipeline) -> None:
    """Load the models the pipeline's engine answers with (the offline engine's reader), each checked as it
    loads; `ModelUnavailable` says which is missing or damaged. Engines without such models load nothing."""
    getattr(getattr(pipeline, "engine", None), "reader", None)


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (the request body was read already, so receive waits for that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


CLIENT_CLOSED = 499  # nginx's "client closed request": logged, never seen by the (gone) client


def service_of(request: Request) -> Service:
    return request.app.state.service

