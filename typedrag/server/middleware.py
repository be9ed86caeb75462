"""What happens to a request before a route sees it (`RequestContext`, pure ASGI middleware): a request id in
and out, the body read within its time and size limits and checked for nesting depth, one log line each."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers, MutableHeaders

from typedrag.server.error_bodies import error_body
from typedrag.server.logs import client_log, errors_log, log, request_id_var

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
MAX_JSON_DEPTH = 32  # nesting of a request's JSON; typedrag's own bodies need 5 (a message's content parts)


class RequestContext:
    """Pure ASGI middleware (streams pass through): X-Request-ID in and out, body size cap, one log line each."""

    def __init__(self, app: Any, max_body: int, body_timeout: float = 20.0, streamed: re.Pattern | None = None) -> None:
        self.app, self.max_body, self.body_timeout = app, max_body, body_timeout
        self.streamed = streamed  # POSTs to these paths (uploads) reach their route unread: it streams them to disk, within its own limits

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
            if self.streamed is not None and scope["method"] == "POST" and self.streamed.fullmatch(scope["path"]):
                replay = receive
            else:
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
            return JSONResponse(
                error_body(422, message, [{"loc": ["body"], "msg": message, "type": "json_too_deep"}]), 422
            )
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
