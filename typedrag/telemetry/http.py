"""The HTTP service's request span: a server span per request, continuing the caller's trace."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typedrag.telemetry.base import _OFF, _clean, _current, recording, tracing

try:
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # opentelemetry-api is absent: tracing() is False and nothing here runs
    pass

# ---------------------------------------------------------------- the HTTP service's request span


# The methods of RFC 9110 and PATCH (RFC 5789): what the HTTP conventions call known. Any other method a
# client sends is "_OTHER" (its span named "HTTP"), so no client can mint span names or metric labels.
HTTP_METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"})
OTHER_METHOD = "_OTHER"


def http_method(method: str) -> str:
    """`method` if it is a known HTTP method, else "_OTHER"."""
    return method if method in HTTP_METHODS else OTHER_METHOD


def serving_request(method: str, path: str, headers: Sequence[tuple[bytes, bytes]], client: str | None = None) -> Any:
    """The server span of one HTTP request, continuing the caller's trace (W3C `traceparent`, or whatever
    OTEL_PROPAGATORS names); the answer's span is its child. The caller names it by route once routed."""
    if not tracing():
        return _OFF
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    for name, value in headers:
        key = name.decode("latin-1").lower()
        carrier[key] = f"{carrier[key]},{value.decode('latin-1')}" if key in carrier else value.decode("latin-1")
    known = http_method(method)
    attributes = {"http.request.method": known, "url.path": path, "client.address": client}
    if known != method:
        attributes["http.request.method_original"] = method[:32]
    return _current(
        "HTTP" if known == OTHER_METHOD else known, SpanKind.SERVER, _clean(attributes), propagate.extract(carrier)
    )


def served(span_: Any, method: str, route: str | None, status: int) -> None:
    """Name the request span by its route ("POST /v1/answer") and record the status."""
    if not recording(span_):
        return
    if route:
        known = http_method(method)
        span_.update_name(f"{'HTTP' if known == OTHER_METHOD else known} {route}")
        span_.set_attribute("http.route", route)
    span_.set_attribute("http.response.status_code", status)
    if status >= 500:
        span_.set_attribute("error.type", str(status))
        span_.set_status(Status(StatusCode.ERROR))
