"""Answering one question over HTTP, whatever the protocol. A route checks its request (4xx before anything is
spent on it) and makes an `Asking`; the asking takes one of the service's answer slots for the answer's time
(503 when none is free), turns the pipeline's errors into HTTP errors, and gives the answer whole (`once`) or as a
stream (`stream`) that a protocol's `Renderer` writes: the native Server-Sent Events (typedrag.server.routes.native)
or OpenAI's chunks (typedrag.server.openai_format). One stream loop serves both, so a keep-alive, an error or a
client that leaves is handled once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse

from typedrag.errors import ModelUnavailable
from typedrag.history import Turn
from typedrag.index.base import IndexUnusableError
from typedrag.llm.base import LLMError
from typedrag.pipeline import Pipeline
from typedrag.questions import QuestionError
from typedrag.result import AnswerResult
from typedrag.server.error_bodies import api_error, error_body
from typedrag.server.logs import errors_log, log, request_id_var
from typedrag.server.service import Service, Slots

KEEPALIVE_SECONDS = 15.0  # an SSE comment this often keeps proxies from closing a slow stream
PING = ": ping\n\n"
CLIENT_CLOSED = 499  # nginx's "client closed request": logged, never seen by the (gone) client

# After the result: what else to send (e.g. the saved messages' ids), as (event, data) pairs.
Finish = Callable[[AnswerResult], Awaitable[list[tuple[str, Any]]]]


class Renderer(Protocol):
    """How one protocol writes an answer's stream: text in, text out, no I/O (each is tested alone)."""

    def opening(self) -> list[str]:
        """What the stream starts with, before the answer is asked for."""

    def event(self, name: str, data: Any) -> list[str]:
        """One progress event of the pipeline (token, type, plan, ...), or one a `Finish` adds."""

    def result(self, result: AnswerResult) -> list[str]:
        """The finished answer."""

    def error(self, status: int, message: Any) -> str:
        """The failure that ends the stream (the answer's 4xx/5xx, or a 500 naming the request id)."""

    def closing(self) -> list[str]:
        """What the stream ends with, answered or not."""


@dataclass(frozen=True)
class Asking:
    """One question, checked, on its way to an answer: in `pipeline`, with its conversation and knowledge."""

    service: Service
    question: str
    method: str
    forced: str | None
    history: list[Turn]
    pipeline: Pipeline
    knowledge: str | None = None

    async def once(self, request: Request) -> AnswerResult | None:
        """The whole answer (None: the client left first, and the work was cancelled), within an answer slot."""
        self.service.slots.take()
        try:
            return await self._unless_gone(request)
        finally:
            self.service.slots.give()

    def stream(self, renderer: Renderer, finish: Finish | None = None) -> SlotStream:
        """The answer's stream as `renderer` writes it: its events as they happen, then the result and what `finish`
        adds, or the error; a ping comment when quiet. Takes an answer slot now, given back however the stream ends."""
        self.service.slots.take()

        async def lines() -> AsyncIterator[str]:
            for line in renderer.opening():
                yield line
            try:
                async for name, data in self._events():
                    if name == "ping":
                        yield PING
                    elif name == "result":
                        for line in renderer.result(data):
                            yield line
                        for event, extra in await finish(data) if finish is not None else []:
                            for line in renderer.event(event, extra):
                                yield line
                    else:
                        for line in renderer.event(name, data):
                            yield line
            except HTTPException as error:
                yield renderer.error(error.status_code, error.detail)
            except Exception:
                errors_log.exception("stream failed")
                yield renderer.error(500, f"internal error; request id {request_id_var.get()}")
            for line in renderer.closing():
                yield line

        return SlotStream(lines(), self.service.slots)

    async def answer(self, on_event: Callable | None = None) -> AnswerResult:
        """The pipeline's answer, timed, counted and logged; its errors as the HTTP errors a client can act on."""
        started = time.perf_counter()
        try:
            result = await self.pipeline.answer(
                self.question,
                self.method,
                self.forced,
                on_event=on_event,
                history=self.history,
                knowledge=self.knowledge,
            )
        except QuestionError as error:
            raise api_error(422, str(error)) from error
        except LLMError as error:  # the details (upstream text, host:port) go to the log, not to the client
            log.warning("LLM endpoint failed", extra={"fields": {"error": str(error)}})
            raise api_error(
                502, f"the LLM endpoint failed; see the server log for request id {request_id_var.get()}"
            ) from error
        except IndexUnusableError as error:
            raise api_error(503, f"the index is unusable: {error}") from error
        except ModelUnavailable as error:
            raise api_error(503, f"a model the engine needs cannot be loaded: {error}") from error
        seconds = time.perf_counter() - started
        self.service.metrics.answered(result, seconds)
        fields = {
            "collection": result.collection,
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

    async def _unless_gone(self, request: Request) -> AnswerResult | None:
        """The answer, or None (the work cancelled: no more LLM calls) if the client disconnects first."""
        task = asyncio.create_task(self.answer())
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

    async def _events(self) -> AsyncIterator[tuple[str, Any]]:
        """Progress events as the pipeline emits them, a ("ping", None) when quiet, then ("result", AnswerResult)."""
        queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()
        task = asyncio.create_task(self.answer(lambda name, data: queue.put_nowait((name, data))))
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


def client_closed() -> JSONResponse:
    """What a route returns when its client left before the answer: logged, never seen by the (gone) client."""
    return JSONResponse(error_body(CLIENT_CLOSED, "client closed the request"), CLIENT_CLOSED)


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


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (the request body was read already, so receive waits for that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
