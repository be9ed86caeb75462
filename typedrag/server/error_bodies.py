"""Error bodies every client can read: FastAPI's `detail` and OpenAI's `error` in one, and JSON without the
numbers strict JSON lacks."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException

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
