"""OpenTelemetry traces of every answer, and the hooks the service's Prometheus metrics listen on.

One trace per answer: a `typedrag.answer` span with a child per step (`typedrag.classify`, `typedrag.rewrite`,
`typedrag.plan`, `typedrag.names`, `typedrag.retrieve`, `typedrag.rerank`, `typedrag.write` (with a
`typedrag.check` inside when the offline reader checks it), `typedrag.aggregate` or `typedrag.mediate`,
`typedrag.cite`), each named by its step (typedrag.steps), and a span for every model call that follows the OpenTelemetry GenAI
semantic conventions (`chat <model>`, `gen_ai.*`). Spans go to whatever TracerProvider is global: the host
program's own (typedrag's spans then sit inside its traces), or the one `configure_from_environment` sets up
from the standard OTEL_* variables on the command line.

Off costs nothing measurable: without opentelemetry, or with no TracerProvider set, every helper here hands
back one shared do-nothing context whose span is None, and the describing helpers return at once.

Question, passage and answer text go into spans only when the user opts in (`trace_content = true` in the
config, or TYPEDRAG_TRACE_CONTENT=1): ids, counts, types and timings are recorded either way. An exception's
message is text too (an endpoint's error body, a model's words): without the opt-in a failed span names the
exception's class only.

On the command line the provider sends what is left when the process ends, waiting EXIT_FLUSH_SECONDS at
most; `serve` calls `flush` when it shuts down, as a SIGTERM ends it without exit handlers.

The package imports nothing else of typedrag, so every layer may call it. One module per job: base.py (on or
off, the span helpers), answer.py (the answer's and its steps' spans), calls.py (model calls), http.py (the
service's request span), events.py (listeners), export.py (set-up from OTEL_* variables, flushing, secrets in
headers); everything is named here, `telemetry.<name>`, as callers use it.
"""

from __future__ import annotations

from typedrag.telemetry.answer import (
    RETRIEVAL,
    abstained,
    answered,
    answering,
    fallback,
    performed,
    performing,
    step_kind,
)
from typedrag.telemetry.base import (
    _OFF,  # noqa: F401  (tests read it through the package)
    CONTENT_ENV,
    OTEL_FEATURE,
    PREFIX,
    TRACER_NAME,
    _trace,  # noqa: F401  (tests read it through the package)
    content_recorded,
    describe,
    failed,
    opened,
    record_content,
    recording,
    said,
    span,
    step,
    traced,
    tracing,
)
from typedrag.telemetry.calls import ModelCall, llm_call
from typedrag.telemetry.events import listen
from typedrag.telemetry.export import (
    EXIT_FLUSH_SECONDS,
    SHUTDOWN_FLUSH_SECONDS,
    HeaderValueFilter,
    configure_from_environment,
    endpoint_secrets,
    flush,
    header_values,
)
from typedrag.telemetry.http import HTTP_METHODS, OTHER_METHOD, http_method, served, serving_request

__all__ = [
    "CONTENT_ENV",
    "EXIT_FLUSH_SECONDS",
    "HTTP_METHODS",
    "OTEL_FEATURE",
    "OTHER_METHOD",
    "PREFIX",
    "RETRIEVAL",
    "SHUTDOWN_FLUSH_SECONDS",
    "TRACER_NAME",
    "HeaderValueFilter",
    "ModelCall",
    "abstained",
    "answered",
    "answering",
    "configure_from_environment",
    "content_recorded",
    "describe",
    "endpoint_secrets",
    "failed",
    "fallback",
    "flush",
    "header_values",
    "http_method",
    "listen",
    "llm_call",
    "opened",
    "performed",
    "performing",
    "record_content",
    "recording",
    "said",
    "served",
    "serving_request",
    "span",
    "step",
    "step_kind",
    "traced",
    "tracing",
]
