"""Spans on or off, and the helpers every other part of typedrag.telemetry builds its spans with. Without
opentelemetry, or with no TracerProvider set, each hands back one shared do-nothing context (`_OFF`)."""

from __future__ import annotations

import functools
import importlib.metadata
import os
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

try:
    from opentelemetry import trace as _trace
    from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, SpanKind, Status, StatusCode
except ImportError:  # opentelemetry-api is absent: every span helper is a no-op
    _trace = None

T = TypeVar("T")

TRACER_NAME = "typedrag"
CONTENT_ENV = "TYPEDRAG_TRACE_CONTENT"
PREFIX = "typedrag."
OTEL_FEATURE = "OpenTelemetry tracing"
_OFF = nullcontext(None)  # what every span helper returns while tracing is off: `as span` gives None
_TRUE = ("1", "true", "yes", "on")

# ---------------------------------------------------------------- on or off


_content: bool | None = None  # None: as TYPEDRAG_TRACE_CONTENT says
_cached_tracer: tuple[Any, Any] = (None, None)  # (provider, its tracer for typedrag)


def tracing() -> bool:
    """Whether spans are recorded: a real TracerProvider is set (the API's default proxy records nothing)."""
    if _trace is None:
        return False
    return not isinstance(_trace.get_tracer_provider(), (ProxyTracerProvider, NoOpTracerProvider))


def record_content(enabled: bool | None) -> None:
    """Put question, passage and answer text into spans (True), keep it out (False), or follow
    TYPEDRAG_TRACE_CONTENT (None, the default)."""
    global _content
    _content = enabled


def content_recorded() -> bool:
    """Whether text goes into spans: off unless the user opted in."""
    if _content is not None:
        return _content
    return os.environ.get(CONTENT_ENV, "").strip().lower() in _TRUE


def _tracer() -> Any:
    global _cached_tracer
    provider = _trace.get_tracer_provider()
    if _cached_tracer[0] is not provider:
        _cached_tracer = (provider, provider.get_tracer(TRACER_NAME, _version()))
    return _cached_tracer[1]


@functools.cache
def _version() -> str:
    try:
        return importlib.metadata.version("typedrag")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def span(name: str, attributes: dict[str, Any] | None = None, *, kind: Any = None) -> Any:
    """A context manager for a span made current while it runs; `as span` gives the span, or None when off."""
    if not tracing():
        return _OFF
    return _current(name, kind if kind is not None else SpanKind.INTERNAL, _clean(attributes or {}))


@contextmanager
def _current(name: str, kind: Any, attributes: dict[str, Any], context: Any = None) -> Iterator[Any]:
    """The SDK's current span, with an error recorded by `failed` rather than by the SDK, which would copy the
    exception's message (a model's words, an endpoint's error body) into an event and the status."""
    with _tracer().start_as_current_span(
        name, context=context, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span_:
        try:
            yield span_
        except Exception as error:  # a cancelled answer (the client left) is not a failure
            failed(span_, error)
            raise


def failed(span_: Any, error: BaseException) -> None:
    """Mark a span failed: its status, `error.type` and an `exception` event naming the class. The message and
    stack trace (whose last line repeats the message) only with text recorded: an LLMError quotes the endpoint's
    reply, a PlanFailed what the model wrote."""
    if not recording(span_):
        return
    kind = type(error).__name__
    if not (getattr(span_, "attributes", None) or {}).get("error.type"):
        span_.set_attribute("error.type", kind)
    if content_recorded():
        span_.record_exception(error)
        span_.set_status(Status(StatusCode.ERROR, f"{kind}: {error}"))
    else:
        span_.add_event("exception", {"exception.type": f"{type(error).__module__}.{type(error).__qualname__}"})
        span_.set_status(Status(StatusCode.ERROR))


def step(name: str, **attributes: Any) -> Any:
    """The span of one of typedrag's steps, `typedrag.<name>`; keyword attributes are named `typedrag.<key>`."""
    if not tracing():
        return _OFF
    return span(PREFIX + name, {PREFIX + key: value for key, value in attributes.items()})


async def traced(name: str, awaitable: Awaitable[T], **attributes: Any) -> T:
    """`await awaitable` inside the step span `typedrag.<name>` (the plan, at the strategies' call sites)."""
    with step(name, **attributes):
        return await awaitable


def opened(span_of: Any) -> Any:
    """The span `span_of` names (a `typedrag.steps.Span`: its name and `Attributes`), made current; the
    attributes its `content` names only with text recorded. None names no span."""
    if span_of is None or not tracing():
        return _OFF
    return span(span_of.name, _kept(span_of.attributes))


def said(span_: Any, attributes: Any) -> None:
    """Set `attributes` (a `typedrag.steps.Attributes`) on a span, those that are text only with text recorded."""
    if recording(span_):
        span_.set_attributes(_clean(_kept(attributes)))


def _kept(attributes: Any) -> dict[str, Any]:
    content = attributes.content if not content_recorded() else ()
    return {key: value for key, value in attributes.values.items() if key not in content}


def recording(span_: Any) -> bool:
    return span_ is not None and span_.is_recording()


def describe(span_: Any, **attributes: Any) -> None:
    """Set `typedrag.<key>` attributes on a step span (None values are left out)."""
    if recording(span_):
        span_.set_attributes(_clean({PREFIX + key: value for key, value in attributes.items()}))


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry accepts: no None, sequences as lists of one primitive type."""
    cleaned = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = [
                item if isinstance(item, (str, bool, int, float)) else str(item) for item in value if item is not None
            ]
        cleaned[key] = value
    return cleaned
