"""Error bodies every client can read: FastAPI's `detail` and OpenAI's `error` in one, and JSON without the
numbers strict JSON lacks. No key is ever in one: a user's key (`tdk_...`) is cut to its public prefix and the
server's own key (`hide`) is replaced, wherever a message echoes what a client sent. The app's handlers of HTTP
and validation errors write them."""

from __future__ import annotations

import json
import threading
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from typedrag.store.keys import mask_keys

_HIDDEN: set[str] = set()  # the servers' own keys in this process (create_app adds its own)
_HIDDEN_LOCK = threading.Lock()

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


def hide(secret: str) -> None:
    """Never show `secret` (a server's own key, at least 8 characters) in an error body."""
    if len(secret) >= 8:
        with _HIDDEN_LOCK:
            _HIDDEN.add(secret)


def without_keys(text: str) -> str:
    """`text` with every user's key cut to its prefix and every hidden secret replaced."""
    text = mask_keys(text)
    for secret in tuple(_HIDDEN):
        if secret in text:
            text = text.replace(secret, "[key]")
    return text


def error_body(status: int, message: str, detail: Any = None) -> dict[str, Any]:
    """`detail` as FastAPI clients expect, `error` as OpenAI SDKs expect, so every client shows the message."""
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    message = without_keys(str(message))
    if detail is not None:
        shown = without_keys(json.dumps(detail, ensure_ascii=False, default=str))
        detail = json.loads(shown) if "tdk_" in shown or "[key]" in shown else detail
    return {"detail": message if detail is None else detail, "error": {"message": message, "type": kind, "code": None}}


def api_error(status: int, message: str, headers: dict[str, str] | None = None) -> HTTPException:
    return HTTPException(status_code=status, detail=message, headers=headers)


async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    """Every HTTP error in the body shape both FastAPI and OpenAI clients read."""
    return JSONResponse(error_body(error.status_code, str(error.detail)), error.status_code, headers=error.headers)


async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
    """A 422 naming each invalid field, as FastAPI's own does, but bounded: the first MAX_PROBLEMS problems,
    each input shown in brief (whatever a client sends is echoed in a few hundred characters at most)."""
    problems = [bounded_problem(problem) for problem in error.errors()[:MAX_PROBLEMS]]
    message = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in problems)
    return JSONResponse(error_body(422, message, problems), 422)


MAX_PROBLEMS = 20


def bounded_problem(problem: dict[str, Any]) -> dict[str, Any]:
    """One validation problem, JSON-safe, with its input (and any context) in brief."""
    shown = {key: value for key, value in problem.items() if key not in ("input", "ctx", "url")}
    shown["loc"] = [str(part)[:100] for part in problem.get("loc", ())]
    shown["msg"] = str(problem.get("msg", ""))[:300]
    if "input" in problem:
        shown["input"] = brief(problem["input"])
    return json_safe(shown)


def brief(value: Any, depth: int = 2) -> Any:
    """`value` cut short: strings to 200 characters, lists and objects to 10 items and 2 levels."""
    if isinstance(value, str):
        return value if len(value) <= 200 else value[:200] + "…"
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k)[:100]: brief(v, depth - 1) for k, v in list(value.items())[:10]} if depth > 0 else "{…}"
    if isinstance(value, (list, tuple)):
        return [brief(v, depth - 1) for v in list(value)[:10]] if depth > 0 else "[…]"
    return brief(str(value), depth)
