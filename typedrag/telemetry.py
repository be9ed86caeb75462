"""OpenTelemetry traces of every answer, and the hooks the service's Prometheus metrics listen on.

One trace per answer: a `typedrag.answer` span with a child per step (`typedrag.classify`, `typedrag.rewrite`,
`typedrag.plan`, `typedrag.retrieve`, `typedrag.rerank`, `typedrag.write`, `typedrag.aggregate` or
`typedrag.mediate`, `typedrag.cite`), and a span for every model call that follows the OpenTelemetry GenAI
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

This module imports nothing else of typedrag, so every layer may call it.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import importlib.metadata
import inspect
import json
import logging
import os
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar
from urllib.parse import urlsplit

try:
    from opentelemetry import trace as _trace
    from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, SpanKind, Status, StatusCode
except ImportError:  # opentelemetry-api is absent: every span helper is a no-op
    _trace = None

T = TypeVar("T")
W = TypeVar("W")  # a step's Written (typedrag.engines.base), not imported: the engines import nothing from here

TRACER_NAME = "typedrag"
CONTENT_ENV = "TYPEDRAG_TRACE_CONTENT"
PREFIX = "typedrag."
OTEL_FEATURE = "OpenTelemetry tracing"
RETRIEVAL = "retrieval"  # the GenAI conventions' gen_ai.operation.name of a retrieval
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
            value = [item if isinstance(item, (str, bool, int, float)) else str(item) for item in value if item is not None]
        cleaned[key] = value
    return cleaned


# ---------------------------------------------------------------- the answer and its steps


def answering(question: str, method: str) -> Any:
    """The root span of one answer (a child of the current span: a server request, a host program's own)."""
    if not tracing():
        return _OFF
    attributes: dict[str, Any] = {"method": method}
    if content_recorded():
        attributes["question"] = question
    return step("answer", **attributes)


def answered(span_: Any, result: Any) -> None:
    """What the answer span says once the answer is done: type, strategy, fallbacks, passages, usage."""
    if not recording(span_):
        return
    kind = result.type
    describe(
        span_,
        strategy=result.strategy,
        **({"question.type": kind.type, "question.type_confidence": kind.confidence, "question.type_source": kind.source} if kind else {}),
        plan_used=result.plan_used,
        abstained=result.abstained,
        aspects=len(result.aspects),
        fallbacks=len(result.fallbacks),
        fallback_steps=[f.step if content_recorded() else step_kind(f.step) for f in result.fallbacks],
        passage_ids=[s.passage_id for s in result.sources],
        cited_passage_ids=list(dict.fromkeys(pid for c in result.citations for pid in c.passage_ids)),
        engine=result.engines.generator,
        retriever=result.engines.retriever,
        llm_calls=result.usage.calls,
        **{"usage.input_tokens": result.usage.prompt_tokens, "usage.output_tokens": result.usage.completion_tokens},
        answer=result.answer if content_recorded() else None,
    )


def classified(span_: Any, decision: Any) -> None:
    """The classify span's verdict: type, confidence and who decided (classifier, LLM or forced)."""
    describe(span_, **{"question.type": str(decision.label), "question.type_confidence": round(decision.confidence, 4),
                       "question.type_source": decision.source})


def rewriting(turns: int) -> Any:
    """The span of rewriting a follow-up question into a stand-alone one from the conversation's earlier
    `turns`. The hook for conversations: the rewrite step runs inside it, then calls `rewritten`."""
    return step("rewrite", history_turns=turns)


def rewritten(span_: Any, question: str, *, by: str | None = None, changed: bool | None = None) -> None:
    """The rewrite step's outcome: who read the follow-up alone (a model, or "offline"), whether its words changed."""
    describe(span_, rewrite_by=by, rewritten=changed, rewritten_question=question if content_recorded() else None)


def retrieving(queries: Sequence[str], k: int) -> Any:
    """The span of one retrieval step: one or several queries (searched side by side), k passages each. It is
    a GenAI retrieval span (`gen_ai.operation.name` "retrieval", `gen_ai.retrieval.top_k`; the query text
    only on opt-in), named as typedrag's other steps are."""
    if not tracing():
        return _OFF
    texts = list(queries) if content_recorded() else None
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": RETRIEVAL,
        "gen_ai.retrieval.top_k": k,
        PREFIX + "queries": len(queries),
        PREFIX + "k": k,
        PREFIX + "query_texts": texts,
    }
    if texts is not None and len(texts) == 1:
        attributes["gen_ai.retrieval.query.text"] = texts[0]
    return span(PREFIX + "retrieve", attributes)


def found(span_: Any, hit_lists: Sequence[Sequence[Any]]) -> None:
    """The passages a retrieval step found: their ids (each once, in order) and how many per query; with text
    recorded also `gen_ai.retrieval.documents` (id and score of each, the conventions' opt-in attribute)."""
    if recording(span_):
        describe(span_, hits=[len(hits) for hits in hit_lists], passage_ids=_ids(hit_lists))
        if content_recorded():
            documents = [{"id": hit.passage_id, "score": float(hit.score)} for hits in hit_lists for hit in hits]
            span_.set_attribute("gen_ai.retrieval.documents", json.dumps(documents))


def reranking(reranker: str, queries: int, candidates: int, k: int) -> Any:
    return step("rerank", reranker=reranker, queries=queries, candidates=candidates, k=k)


def kept(span_: Any, hit_lists: Sequence[Sequence[Any]]) -> None:
    """The passages a rerank step kept, best first."""
    if recording(span_):
        describe(span_, passage_ids=_ids(hit_lists))


def _ids(hit_lists: Sequence[Sequence[Any]]) -> list[str]:
    return list(dict.fromkeys(hit.passage_id for hits in hit_lists for hit in hits))


def writing(task: Any, engine: str, aspect: str | None = None, *, name: str = "write") -> Any:
    """The span of one generation step, `typedrag.<name>`: `write` (an aspect's answer, the overview, a type's
    final answer), or `aggregate` / `mediate` for combining aspects (typedrag.driver names it by the step)."""
    if not tracing():
        return _OFF
    return step(
        name,
        role=task.role,
        engine=engine,
        aspect=aspect if content_recorded() else None,
        parts=len(getattr(task, "parts", ())) or None,  # a Combined step's aspects
        passage_ids=[source.passage_id for source in task.sources],
    )


async def written(task: Any, engine: str, writes: Awaitable[W], aspect: str | None = None, *, name: str = "write") -> W:
    """`await writes` (a step's Written) inside its writing span, `typedrag.<name>`."""
    with writing(task, engine, aspect, name=name) as span_:
        result = await writes
        text = result.text  # type: ignore[attr-defined]
        describe(span_, output_chars=len(text), output=text if content_recorded() else None)
        return result


def citing() -> Any:
    return step("cite")


def cited(span_: Any, citations: Sequence[Any], notes: int) -> None:
    """The cite step's outcome: cited sentences, the passages they cite, markers repaired or removed."""
    if recording(span_):
        ids = list(dict.fromkeys(pid for citation in citations for pid in citation.passage_ids))
        describe(span_, citations=len(citations), cited_passage_ids=ids, repairs=notes)


def fallback(step_name: str, reason: str) -> None:
    """A recorded degradation, as an event on the current span (the step it happened in)."""
    if tracing():
        current = _trace.get_current_span()
        if current.is_recording():
            if content_recorded():
                current.add_event("typedrag.fallback", {"typedrag.fallback.step": step_name, "typedrag.fallback.reason": reason})
            else:
                current.add_event("typedrag.fallback", {"typedrag.fallback.step": step_kind(step_name)})


def step_kind(step_name: str) -> str:
    """A fallback's step without what follows its colon: "aspect:<label>" names an aspect by text that
    comes from the question, and a reason may quote a model's reply, so both are content."""
    return step_name.split(":", 1)[0]


def abstained(reason: str, question_type: str | None = None) -> None:
    """Count an answer typedrag declined to give (the service's `typedrag_abstentions_total`), and mark it
    on the current span. Whatever decides to abstain calls this once per abstention."""
    if tracing():
        current = _trace.get_current_span()
        if current.is_recording():
            current.add_event("typedrag.abstain", _clean({"typedrag.abstain.reason": reason, "typedrag.question.type": question_type}))
    _tell("abstention", reason=reason, question_type=question_type)


# ---------------------------------------------------------------- model calls (GenAI semantic conventions)


class ModelCall:
    """What `llm_call` hands its caller: `responded(id, model)` as each response arrives (the completion's id
    and the model that wrote it, as the endpoint names them), `reply(text)` once the model's text is in."""

    __slots__ = ("span", "text", "response_id", "response_model")

    def __init__(self, span_: Any) -> None:
        self.span, self.text = span_, None
        self.response_id: str | None = None
        self.response_model: str | None = None

    def responded(self, response_id: Any, model: Any) -> None:
        """The last response's id and model (a repair round's reply is the one the call ends with)."""
        self.response_id = response_id if isinstance(response_id, str) and response_id else self.response_id
        self.response_model = model if isinstance(model, str) and model else self.response_model

    def reply(self, text: str) -> None:
        self.text = text


@contextmanager
def llm_call(
    call: Any,
    *,
    model: str,
    provider: str,
    messages: Sequence[dict[str, str]],
    max_tokens: int,
    temperature: float,
    structured: bool,
    streaming: bool = False,
    server_url: str | None = None,
) -> Iterator[ModelCall]:
    """One model call: a `chat <model>` client span with the GenAI semantic conventions, filled from `call`
    (typedrag's LLMCall record: tokens, finish reason, requests, time queued) when it ends, and the service's
    metrics told about it (calls, tokens, errors, queue wait by role and model)."""
    error: BaseException | None = None
    try:
        if not tracing():
            yield ModelCall(None)
            return
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": max_tokens,
            "gen_ai.request.temperature": temperature,
            "gen_ai.request.stream": streaming,
            "gen_ai.output.type": "json" if structured else "text",
            "typedrag.role": call.role,
            **_server(server_url),
        }
        if content_recorded():
            attributes["gen_ai.input.messages"] = json.dumps(
                [{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in messages], ensure_ascii=False
            )
        with span(f"chat {model}", attributes, kind=SpanKind.CLIENT) as span_:
            model_call = ModelCall(span_)
            try:
                yield model_call
            except BaseException as raised:
                error = raised
                if recording(span_):
                    span_.set_attribute("error.type", type(raised).__name__)
                raise
            finally:
                _describe_call(span_, call, model_call)
    except BaseException as raised:
        error = error or raised
        raise
    finally:
        _tell("llm_call", role=call.role, model=model, call=call, error=_error_type(error, call))


def _describe_call(span_: Any, call: Any, model_call: ModelCall) -> None:
    if not recording(span_):
        return
    text = model_call.text
    attributes = {
        "gen_ai.usage.input_tokens": call.prompt_tokens,
        "gen_ai.usage.output_tokens": call.completion_tokens,
        "gen_ai.response.finish_reasons": [call.finish_reason] if call.finish_reason else None,
        "gen_ai.response.id": _short(model_call.response_id),
        "gen_ai.response.model": _short(model_call.response_model),
        "typedrag.llm.cached": call.cached,
        "typedrag.llm.requests": call.requests,
        "typedrag.llm.queued_ms": call.queued_ms,
        "typedrag.llm.structured": str(call.structured) if call.structured is not None else None,
    }
    if call.error and not span_.attributes.get("error.type"):
        attributes["error.type"] = "invalid_reply"  # a structured reply that stayed invalid after the repair round
    if text is not None and content_recorded():
        attributes["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": call.finish_reason or "stop"}],
            ensure_ascii=False,
        )
    span_.set_attributes(_clean(attributes))


def _short(value: str | None, limit: int = 256) -> str | None:
    """An identifier an endpoint sent, bounded: it is the endpoint's to choose."""
    return value[:limit] if value else None


def _error_type(error: BaseException | None, call: Any) -> str | None:
    """What the metrics count as the call's error; a call cancelled (the client left) did not fail."""
    if error is not None:
        return None if isinstance(error, (GeneratorExit, asyncio.CancelledError)) else type(error).__name__
    return "invalid_reply" if call.error else None


def _server(url: str | None) -> dict[str, Any]:
    if not url:
        return {}
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return {}
    return {"server.address": parts.hostname, "server.port": port} if parts.hostname else {}


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
    return _current("HTTP" if known == OTHER_METHOD else known, SpanKind.SERVER, _clean(attributes), propagate.extract(carrier))


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


# ---------------------------------------------------------------- listeners (the service's metrics)


_listeners: dict[str, list[Callable[[], Callable[..., None] | None]]] = {}


def listen(event: str, listener: Callable[..., None]) -> Callable[[], None]:
    """Call `listener(**fields)` on each `event` ("llm_call", "abstention"); returns what stops it. A bound
    method is held weakly: an app that never ran its shutdown does not keep its pipeline alive through it."""
    held = weakref.WeakMethod(listener) if inspect.ismethod(listener) else (lambda: listener)
    _listeners.setdefault(event, []).append(held)

    def stop() -> None:
        if held in _listeners.get(event, []):
            _listeners[event].remove(held)

    return stop


def _tell(event: str, **fields: Any) -> None:
    held = _listeners.get(event)
    if not held:
        return
    for reference in list(held):
        listener = reference()
        if listener is None:  # its owner is gone
            held.remove(reference)
            continue
        try:
            listener(**fields)
        except Exception:  # a broken metric must never break an answer
            pass


# ---------------------------------------------------------------- configuration from OTEL_* variables


def configure_from_environment(environ: dict[str, str] | None = None) -> str | None:
    """Set up tracing as the standard OTEL_* variables ask, for the command line; returns a one-line
    warning when they ask for something this install cannot do (then typedrag answers untraced).

    Traces are asked for by OTEL_TRACES_EXPORTER (otlp, console; "none" or unset: off) or, with no
    exporter named, by an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or _TRACES_ENDPOINT). The SDK reads
    the rest itself: OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_BSP_*,
    OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION... OTEL_SDK_DISABLED=true turns it all off, and a
    TracerProvider the program set already is left alone.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    named = [e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    exporters = [e for e in (named or (["otlp"] if endpoint else [])) if e != "none"]
    if not exporters:
        return None
    asked = "OTEL_TRACES_EXPORTER" if named else "OTEL_EXPORTER_OTLP_ENDPOINT"
    missing = f"{asked} asks for traces, but {OTEL_FEATURE} needs the 'otel' extra: pip install 'typedrag[otel]'; answering without traces"
    if _trace is None:
        return missing
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        return missing
    if tracing():
        return None
    _hide_header_values(env)  # before any exporter reads (and may complain about) them
    processors, problems = [], []
    for name in dict.fromkeys(exporters):
        exporter, problem = _exporter(name, env)
        if exporter is not None:
            processors.append(BatchSpanProcessor(exporter))
        if problem:
            problems.append(problem)
    if processors:
        resource = Resource.create({"service.version": _version()})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "typedrag"}))
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # _ExitFlush sends what is left
        for processor in processors:
            provider.add_span_processor(processor)
        _trace.set_tracer_provider(provider)
        _ExitFlush(provider, EXIT_FLUSH_SECONDS)
    return "; ".join(problems) or None


# At exit a command waits this long at most for its last spans to be sent: the SDK alone would wait out the
# exporter's timeout and retries (10 s and more) when the collector is down, after every short command.
EXIT_FLUSH_SECONDS = 3.0
# `serve` flushes at shutdown (its lifespan ends), waiting this long at most: a SIGTERM ends the process
# without the exit handlers, so spans of the last export interval would otherwise be lost.
SHUTDOWN_FLUSH_SECONDS = 5.0


class _ExitFlush:
    """Shuts the provider down at exit (its span processors send what is left), waiting `seconds` at most.
    The shutdown runs in a thread started now: threads cannot be started from exit handlers (Python 3.12+),
    and only a thread can be left behind when the collector does not answer."""

    def __init__(self, provider: Any, seconds: float) -> None:
        self.provider, self.seconds = provider, seconds
        self.asked, self.done = threading.Event(), threading.Event()
        threading.Thread(target=self._shut_down, name="typedrag-trace-exit", daemon=True).start()
        atexit.register(self.at_exit)

    def _shut_down(self) -> None:
        self.asked.wait()
        try:
            self.provider.shutdown()
        finally:
            self.done.set()

    def at_exit(self) -> None:
        self.asked.set()
        if not self.done.wait(self.seconds):
            sys.stderr.write(f"warning: traces not sent: the trace collector did not take them within {self.seconds:g} s\n")


def flush(seconds: float = SHUTDOWN_FLUSH_SECONDS) -> bool:
    """Send the spans the global provider still holds, waiting `seconds` at most; False if they were not all
    sent by then (a collector down or slow). Nothing to do without an SDK provider."""
    if not tracing():
        return True
    provider = _trace.get_tracer_provider()
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is None:
        return True
    outcome: list[bool] = []
    worker = threading.Thread(target=lambda: outcome.append(bool(force_flush())), name="typedrag-trace-flush", daemon=True)
    worker.start()
    worker.join(seconds)
    return bool(outcome and outcome[0])


# ---------------------------------------------------------------- secrets in OTEL_* headers

# Loggers of the SDK and its exporters that quote configuration or export failures (the header parser quotes a
# malformed header whole: `Authorization: Bearer <token>`).
_OTEL_LOGGERS = (
    "opentelemetry.util.re",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk.trace.export",
)
_HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_MASK = "****"


def header_values(raw: str) -> list[str]:
    """The secret parts of an OTEL_EXPORTER_OTLP_HEADERS value (`name=value,...`), read as leniently as anyone
    might write it: each value after `=` or `:`, percent-decoded too, its last word (a bearer token), and an
    item with no separator whole."""
    from urllib.parse import unquote

    found: list[str] = []
    for item in raw.split(","):
        item = item.strip()
        cut = min((i for i in (item.find("="), item.find(":")) if i >= 0), default=-1)
        value = item[cut + 1 :].strip() if cut >= 0 else item
        for candidate in (value, unquote(value), *value.split()[-1:], *unquote(value).split()[-1:]):
            if len(candidate) >= 4 and candidate not in found:
                found.append(candidate)
    return sorted(found, key=len, reverse=True)  # the longest first, so a part never leaves its whole half-shown


class HeaderValueFilter(logging.Filter):
    """Masks the OTEL header values in a log record: they hold API keys for hosted trace backends."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = message
        for secret in self.secrets:
            masked = masked.replace(secret, _MASK)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def endpoint_secrets(url: str) -> list[str]:
    """The password in an endpoint URL (`http://user:password@collector:4318`), or its one-part userinfo."""
    try:
        parts = urlsplit(url.strip())
        secret = parts.password or (parts.username if "@" in parts.netloc else None)
    except ValueError:
        return []
    return [secret] if secret and len(secret) >= 4 else []


def _hide_header_values(env: Any) -> None:
    """Mask the header values, and any password in an endpoint URL (from `env` and the process environment the
    SDK reads), in what the SDK logs."""
    secrets = [v for name in _HEADER_VARIABLES for source in (env, os.environ) for v in header_values(source.get(name, ""))]
    secrets += [v for name in _ENDPOINT_VARIABLES for source in (env, os.environ) for v in endpoint_secrets(source.get(name, ""))]
    if not secrets:
        return
    for name in _OTEL_LOGGERS:
        logger = logging.getLogger(name)
        present = next((f for f in logger.filters if isinstance(f, HeaderValueFilter)), None)
        if present is None:
            logger.addFilter(HeaderValueFilter(sorted(set(secrets), key=len, reverse=True)))
        else:
            present.secrets = sorted(set(present.secrets) | set(secrets), key=len, reverse=True)


def _exporter(name: str, env: dict[str, str]) -> tuple[Any, str | None]:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr), None  # stdout is the answer's
    if name != "otlp":
        return None, f"OTEL_TRACES_EXPORTER={name} is not supported by typedrag (otlp, console or none); not exporting there"
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        except ImportError:
            return None, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc installed; no traces sent"
        return GrpcExporter(), None
    if protocol != "http/protobuf":
        return None, f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported by typedrag (http/protobuf or grpc); no traces sent"
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        return None, f"the OTLP exporter is missing: pip install 'typedrag[otel]'; no traces sent"
    return OTLPSpanExporter(), None
