"""Prometheus metrics of `typedrag serve` (GET /metrics), and the span of each HTTP request.

Each app keeps its own registry: requests by route, method and status with their latency; answers by
method, question type and strategy with their latency; recorded fallbacks by step; abstentions; LLM
calls, tokens, errors, time in flight and time queued for a slot, by role and model; answer slots in use;
index reloads; and the process's own CPU, memory and garbage collection. Labels hold route templates and
type names, never a path, a question or a model's words, and each label takes its values from a known set
(`Label`): anything else, an HTTP method a client made up for one, counts as "other", so no client can
grow the number of series (docs/deployment.md lists every label's values).

`RequestObserver` is the outermost middleware: it times and counts every request (a 413 refused before
routing too). When tracing is on, each request has a server span that continues the caller's trace from its
`traceparent` header, and the answer's `typedrag.answer` span is inside it: FastAPI opens that span itself
where it can (its native OpenTelemetry support, with spans for the endpoint and serialization); with an
older FastAPI, `RequestObserver` opens it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from typing import Any

from prometheus_client import CollectorRegistry, Counter, GCCollector, Histogram, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from starlette.routing import Match

from typedrag import telemetry
from typedrag.nfq import NFQType
from typedrag.result import AnswerResult

log = logging.getLogger("typedrag.server")
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
ANSWER_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
LLM_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
UNMATCHED = "unmatched"  # the route label of a path no route serves (404s): never the path itself
NO_TYPE = "none"  # the type label of a baseline answer (rag, llm), which is not routed by type
OTHER = "other"  # any label value outside its known set
STATUSES = frozenset(str(code) for code in range(100, 600))
METHODS = ("typed", "rag", "llm")
# The strategies of the default routes and the baselines; `watch` adds those of the service's own routes.
STRATEGIES = ("evidence-based", "comparison", "experience", "reason", "instruction", "debate", "rag", "llm")
# What a model call does, before the colon of its role ("plan:reason", "aspect:debate", "classify").
ROLE_KINDS = (
    "plan",
    "answer",
    "overview",
    "aspect",
    "aggregate",
    "mediate",
    "classify",
    "rewrite",
    "judge",
    "expand",
    "weigh",
)
# The steps a fallback is recorded at (the part before a colon, which may name an aspect by the question's
# words): the pipeline's own steps, the roles above, and a strategy whose plan failed.
FALLBACK_STEPS = ("route", "classify", "rewrite", "instructions", "knowledge", "citations", *ROLE_KINDS)
CAP = 32  # values a label with no fixed set (a model name, an error type) keeps before the rest count as other


class Label:
    """The values one label may take: `known` ones, then (for labels the code names but cannot list in
    advance, such as model names) the first `cap` others seen; anything beyond counts as "other"."""

    def __init__(self, known: Iterable[str] = (), cap: int = 0) -> None:
        self.known, self.cap = set(known), cap
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: object) -> str:
        text = str(value)
        if text in self.known or text in self._seen:
            return text
        with self._lock:
            if len(self._seen) < self.cap and len(text) <= 100:
                self._seen.add(text)
                return text
        return OTHER

    def add(self, values: Iterable[str]) -> None:
        self.known.update(values)


class ServiceMetrics:
    """The metrics of one app; `watch(service)` at startup, `close()` at shutdown."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.requests = Counter("typedrag_http_requests", "HTTP requests by route, method and status.",
                                ["route", "method", "status"], registry=r)  # fmt: skip
        self.request_seconds = Histogram("typedrag_http_request_duration_seconds", "HTTP request latency (to the end of a stream).",
                                         ["route", "method"], buckets=REQUEST_BUCKETS, registry=r)  # fmt: skip
        self.answers = Counter("typedrag_answers", "Answers by method, question type and the strategy that answered.",
                               ["method", "type", "strategy"], registry=r)  # fmt: skip
        self.answer_seconds = Histogram("typedrag_answer_duration_seconds", "Time to a whole answer, by method and question type.",
                                        ["method", "type"], buckets=ANSWER_BUCKETS, registry=r)  # fmt: skip
        self.fallbacks = Counter("typedrag_fallbacks", "Recorded degradations (fallbacks, dropped aspects, repaired citations) by step.",
                                 ["step"], registry=r)  # fmt: skip
        self.abstentions = Counter(
            "typedrag_abstentions", "Answers typedrag declined to give, by question type.", ["type"], registry=r
        )
        self.llm_calls = Counter("typedrag_llm_calls", "LLM calls by role and model.", ["role", "model"], registry=r)
        self.llm_tokens = Counter("typedrag_llm_tokens", "LLM tokens by role, model and token type (input, output).",
                                  ["role", "model", "token_type"], registry=r)  # fmt: skip
        self.llm_errors = Counter("typedrag_llm_errors", "Failed LLM calls by role, model and error type.",
                                  ["role", "model", "error_type"], registry=r)  # fmt: skip
        self.llm_seconds = Histogram("typedrag_llm_request_duration_seconds", "Time LLM calls spent in flight at the endpoint.",
                                     ["role", "model"], buckets=LLM_BUCKETS, registry=r)  # fmt: skip
        self.llm_queue_seconds = Histogram("typedrag_llm_queue_wait_seconds", "Time LLM calls waited for one of the endpoint's slots.",
                                           ["model"], buckets=LLM_BUCKETS, registry=r)  # fmt: skip
        self._state = _ServiceState()
        r.register(self._state)
        self._stops: list[Callable[[], None]] = []
        self.label = {
            "http_method": Label(telemetry.HTTP_METHODS),
            "status": Label(STATUSES),
            "method": Label(METHODS),
            "type": Label([NO_TYPE, *(t.value for t in NFQType)]),
            "strategy": Label(STRATEGIES),
            "step": Label([*FALLBACK_STEPS, *STRATEGIES]),
            "role": Label(cap=4 * CAP),
            "model": Label(cap=CAP),
            "error_type": Label(["invalid_reply"], cap=CAP),
        }

    def watch(self, service: Any) -> None:
        """Read `service`'s slots and index at each scrape, count the model calls and abstentions of this
        process, and know the type and strategy names of its routes (a route added from outside too)."""
        self._state.service = weakref.ref(service)
        pipeline = getattr(service, "pipeline", None)
        routes = getattr(pipeline, "routes", None) or {}
        strategies = [getattr(s, "name", None) for s in [*routes.values(), getattr(pipeline, "fallback", None)]]
        strategies = [name for name in strategies if isinstance(name, str)]
        self.label["type"].add(str(kind) for kind in routes)
        self.label["strategy"].add(strategies)
        self.label["step"].add(strategies)
        self._stops = [telemetry.listen("llm_call", self.llm_call), telemetry.listen("abstention", self.abstained)]

    def close(self) -> None:
        for stop in self._stops:
            stop()
        self._stops = []

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The scrape body and its content type: the Prometheus text format, or OpenMetrics if the scraper asks for it."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type

    # ------------------------------------------------------------ what is counted

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        """`route` is a template of the app's own routes or `unmatched` (see route_of): bounded by the app."""
        method, status_ = self.label["http_method"](method), self.label["status"](status)
        self.requests.labels(route, method, status_).inc()
        self.request_seconds.labels(route, method).observe(seconds)

    def answered(self, result: AnswerResult, seconds: float) -> None:
        method = self.label["method"](result.method)
        kind = self.label["type"](result.type.type if result.type is not None else NO_TYPE)
        self.answers.labels(method, kind, self.label["strategy"](result.strategy)).inc()
        self.answer_seconds.labels(method, kind).observe(seconds)
        for fallback in result.fallbacks:
            self.fallbacks.labels(self.label["step"](telemetry.step_kind(fallback.step))).inc()

    def abstained(self, *, reason: str, question_type: str | None) -> None:
        self.abstentions.labels(self.label["type"](question_type or NO_TYPE)).inc()

    def llm_call(self, *, role: str, model: str, call: Any, error: str | None) -> None:
        role = self.label["role"](role) if role.split(":", 1)[0] in ROLE_KINDS else OTHER
        model = self.label["model"](model)
        self.llm_calls.labels(role, model).inc()
        self.llm_tokens.labels(role, model, "input").inc(call.prompt_tokens)
        self.llm_tokens.labels(role, model, "output").inc(call.completion_tokens)
        if error is not None:
            self.llm_errors.labels(role, model, self.label["error_type"](error)).inc()
        if call.requests:  # a cache hit sent nothing and waited for nothing
            self.llm_seconds.labels(role, model).observe(call.latency_ms / 1000)
            self.llm_queue_seconds.labels(model).observe(call.queued_ms / 1000)


class _ServiceState:
    """What is read from the service at each scrape rather than counted: answer slots and index reloads."""

    def __init__(self) -> None:
        self.service: Callable[[], Any] = lambda: None  # a weak reference to the server's Service

    def collect(self) -> Iterator[Metric]:
        service = self.service()
        if service is None:
            return
        yield GaugeMetricFamily("typedrag_answer_slots_in_use", "Answers in flight now.", value=service.slots.used)
        yield GaugeMetricFamily(
            "typedrag_answer_slots", "Answers allowed in flight at once (more get 503).", value=service.slots.size
        )
        library = getattr(service, "library", None)
        retrievers = library.retrievers() if library is not None else [service.pipeline.retriever]
        counts = [
            r
            for r in (retriever.describe().reloads for retriever in retrievers if retriever is not None)
            if r is not None
        ]
        if counts:  # indexes that reopen themselves when a sync swaps in a new version (every collection's)
            yield CounterMetricFamily(
                "typedrag_index_reloads", "Times an index was reopened after a sync replaced it.", value=sum(counts)
            )
        yield from _caches()
        yield from _feedback(getattr(service, "store", None))

    def describe(self) -> list[Metric]:
        return []  # read at scrape time: nothing to check for clashes at registration


def _feedback(store: Any) -> Iterator[Metric]:
    """The verdicts users gave, by question type, strategy and verdict: read from the store at each scrape, so every
    replica sharing a database reports the same totals (a sum over replicas counts them again: take the max)."""
    if store is None:
        return
    try:
        counts = store.feedback_counts()
    except Exception as error:  # the database away: the rest of the scrape still answers
        log.warning("feedback counts not read for /metrics", extra={"fields": {"error": type(error).__name__}})
        return
    family = GaugeMetricFamily(
        "typedrag_feedback",
        "Verdicts on kept answers (thumbs up or down), by question type, strategy and verdict; read from the store.",
        labels=["type", "strategy", "verdict"],
    )
    for kind, strategy, verdict, count in counts:
        family.add_metric([kind, strategy, verdict], count)
    yield family


def _caches() -> Iterator[Metric]:
    """The sizes of the process's caches, each bounded: MiniLM's vectors of recent texts, and the vectors of sentences
    answers added to the indexes open (typedrag.index.sentences; what the index kept at build time is mapped, not held)."""
    from typedrag import embed

    if embed._default.cache_info().currsize:  # MiniLM loaded: the service embedded something
        embedder = embed.default_embedder()
        yield GaugeMetricFamily(
            "typedrag_embedding_cache_texts",
            "Texts whose MiniLM vectors the process caches now.",
            value=embedder.cached,
        )
        yield GaugeMetricFamily(
            "typedrag_embedding_cache_limit",
            "At most this many texts are cached (the oldest go first).",
            value=embedder.cache_size,
        )
        yield CounterMetricFamily(
            "typedrag_embedded_texts",
            "Texts MiniLM computed (neither cached nor kept by the index).",
            value=embedder.computed,
        )
    stores = list(embed._KNOWN)
    yield GaugeMetricFamily(
        "typedrag_sentence_vectors_added",
        "Sentence vectors answers added to the open indexes, held in memory.",
        value=sum(store.added for store in stores),
    )
    yield CounterMetricFamily(
        "typedrag_sentence_vectors_hits",
        "Sentence vectors answers took from the index instead of MiniLM.",
        value=sum(store.hits for store in stores),
    )


def fastapi_traces_requests() -> bool:
    """Whether FastAPI opens each request's server span itself (its native OpenTelemetry support)."""
    from fastapi import FastAPI

    return "telemetry" in inspect.signature(FastAPI).parameters


class RequestObserver:
    """Pure ASGI middleware (streams pass through): each request counted and timed by route and status, and,
    with `trace_requests` and tracing on, its server span, continuing the caller's W3C trace context."""

    def __init__(self, app: Any, metrics: ServiceMetrics, trace_requests: bool = True) -> None:
        self.app, self.metrics, self.trace_requests = app, metrics, trace_requests

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, started, status = scope["method"], time.perf_counter(), 0
        before_routing = dict(scope)  # a mount (/static) rewrites the scope's path and root_path as it routes

        async def send_and_note(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        client = scope.get("client")
        if self.trace_requests:
            request_span = telemetry.serving_request(
                method, scope["path"], scope.get("headers", []), client[0] if client else None
            )
        else:
            request_span = nullcontext()
        with request_span as span:
            try:
                await self.app(scope, receive, send_and_note)
            except asyncio.CancelledError:
                status = status or 499  # the server was stopped mid-request, or the client went away
                raise
            finally:
                route = route_of(scope, before_routing)
                telemetry.served(span, method, route if route != UNMATCHED else None, status or 500)
                self.metrics.request(route, method, status or 500, time.perf_counter() - started)


def route_of(scope: dict, before_routing: dict | None = None) -> str:
    """The path template of the route that served the request ("/v1/answer", "/static"), also for a request
    refused before routing (a 413); `unmatched` when no route serves the path. The routes are matched
    against the scope as it came in (`before_routing`), since a mount rewrites the path it passes on."""
    route = scope.get("route")
    if route is None:
        app = scope.get("app")
        for candidate in getattr(getattr(app, "router", None), "routes", []):
            match, _ = candidate.matches(before_routing or scope)
            if match is not Match.NONE:
                route = candidate
                break
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else UNMATCHED
