"""Error bodies every client can read: FastAPI's `detail` and OpenAI's `error` in one, and JSON without the
numbers strict JSON lacks. No key is ever in one: a user's key (`tdk_...`) is cut to its public prefix and the
server's own key (`hide`) is replaced, wherever a message echoes what a client sent."""

from __future__ import annotations

import json
import threading
from typing import Any

from fastapi import HTTPException

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
