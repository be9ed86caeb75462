"""The HTTP service: the native answer API (JSON and Server-Sent Events), health, and the web page.

Stateless by design: the pipeline is built once per process and a request keeps nothing on disk,
so replicas behind a load balancer need only the same read-only index and LLM endpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from typedrag import telemetry
from typedrag.config import Settings
from typedrag.pipeline import Pipeline
from typedrag.result import AnswerResult
from typedrag.library import Caller, CollectionError
from typedrag.server.answering import AnswerRequest, answer_once
from typedrag.server.answering import answer_stream as stream_of
from typedrag.server.auth import check_bearer, require_caller, store_error
from typedrag.server.auth import router as auth_router
from typedrag.server.conversations_api import router as conversations_router
from typedrag.server.library_api import UPLOAD_PATH, collection_error
from typedrag.server.library_api import router as library_router
from typedrag.server.mcp_http import mount_mcp
from typedrag.server.metrics import RequestObserver, ServiceMetrics, fastapi_traces_requests
from typedrag.server.openai_compat import router as openai_router
from typedrag.server.error_bodies import hide, without_keys
from typedrag.server.service import (
    CLIENT_CLOSED,
    RequestContext,
    ServerOptions,
    Service,
    error_body,
    json_safe,
    log,
    service_of,
)
from typedrag.store import StoreError, StoreUnavailable

STATIC = Path(__file__).parent / "static"


router = APIRouter()


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


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(STATIC / "index.html")


@router.get("/healthz", tags=["health"])
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/metrics", tags=["health"], response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus metrics (text format, or OpenMetrics when asked): requests, answers, LLM calls, slots, reloads."""
    body, content_type = service_of(request).metrics.exposition(request.headers.get("accept"))
    return Response(body, media_type=content_type)


@router.get("/readyz", tags=["health"])
async def readyz(request: Request) -> JSONResponse:
    """Ready to answer: the index is readable and the LLM endpoint (if any) answers GET /models."""
    checks = await service_of(request).readiness()
    ready = checks["index"] == "ok" and checks["llm"] in ("ok", "offline") and checks["models"] == "ok"
    return JSONResponse({"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503)


@router.post("/v1/answer", response_model=AnswerResult, tags=["answer"])
async def answer(body: AnswerRequest, request: Request, caller: Caller = Depends(require_caller)) -> AnswerResult | JSONResponse:
    """Answer one question (in `collection`); the result carries the type, plan, aspects, sources (each linking to
    its original), citations and LLM calls."""
    return await _answer(body, request, caller, body.collection)


@router.post("/v1/collections/{collection}/answer", response_model=AnswerResult, tags=["collections"])
async def answer_in(collection: str, body: AnswerRequest, request: Request, caller: Caller = Depends(require_caller)) -> AnswerResult | JSONResponse:
    """Answer one question in `collection` (the body's own `collection`, if any, is ignored)."""
    return await _answer(body, request, caller, collection)


async def _answer(body: AnswerRequest, request: Request, caller: Caller, collection: str | None) -> AnswerResult | JSONResponse:
    service = service_of(request)
    question, forced = service.check(body.question, body.type)
    history = service.check_history(body.history)
    pipeline = service.pipeline_for(collection, caller) if body.method != "llm" or collection else service.pipeline
    result = await answer_once(service, request, question, body.method, forced, history, pipeline, knowledge=body.knowledge)
    if result is None:
        return JSONResponse(error_body(CLIENT_CLOSED, "client closed the request"), CLIENT_CLOSED)
    return result


_STREAM_RESPONSES = {
    200: {
        "content": {"text/event-stream": {}},
        "description": "rewrite, type, plan, aspect*, token* (citation*), abstained, unsourced, sources, answer, result (or error)",
    }
}


@router.post("/v1/collections/{collection}/answer/stream", tags=["collections"], response_class=StreamingResponse, responses=_STREAM_RESPONSES)
async def answer_stream_in(collection: str, body: AnswerRequest, request: Request, caller: Caller = Depends(require_caller)) -> StreamingResponse:
    """As /v1/answer/stream, in `collection`."""
    return _stream(body, request, caller, collection)


@router.post("/v1/answer/stream", tags=["answer"], response_class=StreamingResponse, responses=_STREAM_RESPONSES)
async def answer_stream(body: AnswerRequest, request: Request, caller: Caller = Depends(require_caller)) -> StreamingResponse:
    """Server-Sent Events, in order: `rewrite` (with history: the follow-up read alone), `type` (typed only),
    `plan` (decomposing types), `aspect` (each, as done),
    then the answer as it is written: `token` {text} pieces that concatenate to the answer, and `citation`
    {text, source_numbers, passage_ids} once each cited sentence is complete (`restart` {reason} means a
    failing typed plan handed over to plain RAG: drop the text so far; `abstained` {looked_for, reason, ...}
    when the documents do not answer); `unsourced` {sentences, covers, by, text} with knowledge = "labelled"
    when the model added what it knows, apart from the answer; then `sources`, `answer` {text}, `result` (the
    full AnswerResult).
    On failure the last event is `error` {status, message}."""
    return _stream(body, request, caller, body.collection)


def _stream(body: AnswerRequest, request: Request, caller: Caller, collection: str | None) -> StreamingResponse:
    service = service_of(request)
    question, forced = service.check(body.question, body.type)
    history = service.check_history(body.history)
    pipeline = service.pipeline_for(collection, caller) if body.method != "llm" or collection else service.pipeline
    return stream_of(service, question, body.method, forced, history, pipeline, knowledge=body.knowledge)


def create_app(settings: Settings, pipeline: Pipeline | None = None, options: ServerOptions | None = None, store: Any = None) -> FastAPI:
    """The app; without a `pipeline` one is built from `settings` at startup and its resources closed at shutdown.
    Without a `store` (typedrag.store, which `serve` opens before it starts), the one `settings` names (`data`,
    `database`) is opened at startup and closed at shutdown."""
    given_store = store
    options = options or ServerOptions()
    metrics = ServiceMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        resources = opened = purging = None
        try:
            store = given_store
            if store is None:
                store = opened = await asyncio.to_thread(open_server_store, settings)
            if pipeline is not None:
                app.state.service = await asyncio.to_thread(Service, pipeline, settings, options, metrics, None, store)
            else:
                from typedrag.factory import Resources, build_pipeline

                resources = Resources()
                built = await asyncio.to_thread(build_pipeline, settings, resources, need_index=settings.data is None)
                app.state.service = await asyncio.to_thread(Service, built, settings, options, metrics, None, store)
            await asyncio.to_thread(app.state.service.load_models)
            metrics.watch(app.state.service)
            if store is not None:
                purging = asyncio.create_task(purge_forever(store, settings.retention_days))
            async with mcp.running():
                yield
        finally:
            if purging is not None:
                purging.cancel()
            metrics.close()
            service = getattr(app.state, "service", None)
            if service is not None:
                await asyncio.to_thread(service.library.close)
            if opened is not None:
                await asyncio.to_thread(opened.close)
            if resources is not None:
                resources.close()
            # Every request has ended: send their spans now. After a SIGTERM the server re-raises the signal
            # and the process ends without running its exit handlers.
            if not await asyncio.to_thread(telemetry.flush):
                log.warning("traces not sent at shutdown: the trace collector did not take them in time")

    app = FastAPIOffline(  # FastAPI whose /docs loads Swagger UI from this server, not a CDN
        redoc_url=None,  # ReDoc fetches its logo from its CDN even when served locally
        title="typedrag",
        version="1",
        summary="Typed-RAG answers for non-factoid questions, with citations and a trace.",
        lifespan=lifespan,
        swagger_ui_parameters={"validatorUrl": None},  # Swagger UI would send the schema to an online validator
    )
    app.__class__ = KeylessApp  # FastAPIOffline makes a FastAPI; this subclass adds only its __call__
    if options.allowed_hosts is not None:  # DNS-rebinding protection: other Host headers get 400
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=options.allowed_hosts)
    app.add_middleware(
        RequestContext, max_body=options.max_request_bytes, body_timeout=options.body_timeout, streamed=UPLOAD_PATH
    )
    # outermost: counts every request, and opens its server span where FastAPI does not
    app.add_middleware(RequestObserver, metrics=metrics, trace_requests=not fastapi_traces_requests())
    app.add_exception_handler(StarletteHTTPException, http_error)  # also the router's own 404/405
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(CollectionError, collection_error)
    app.add_exception_handler(StoreError, store_error)
    app.add_exception_handler(StoreUnavailable, store_error)
    if options.api_key is not None:
        hide(options.api_key)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.include_router(router)
    app.include_router(auth_router)
    app.include_router(library_router)
    app.include_router(conversations_router)
    app.include_router(openai_router, dependencies=[Depends(require_caller)])
    mcp = mount_mcp(app, check_bearer, options.max_request_bytes)
    return app


class KeylessApp(FastAPI):
    """The app, seeing no key in a URL: a key pasted into a path or a query string is cut to its prefix before
    anything sees the request (FastAPI's own request span records the path and query, the log the path)."""

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] in ("http", "websocket"):
            path, query = scope.get("path", ""), scope.get("query_string", b"")
            masked_path = without_keys(path)
            masked_query = without_keys(query.decode("latin-1")).encode("latin-1", "replace")
            if masked_path != path or masked_query != query:
                scope = {**scope, "path": masked_path, "raw_path": masked_path.encode("utf-8", "replace"), "query_string": masked_query}
        await super().__call__(scope, receive, send)


PURGE_EVERY = 3600.0  # seconds between purges of deleted and expired conversations and ended sessions


def open_server_store(settings: Settings):
    """The store of a server with a data folder or a database (None without either: no accounts, nothing saved),
    migrated; its deleted and expired conversations purged at once (`purge_forever` does it hourly after)."""
    if settings.data is None and settings.database is None:
        return None
    from typedrag.store import open_store

    database = settings.database.get_secret_value() if settings.database else None
    store = open_store(database, settings.data, pool_size=10)
    purge(store, settings.retention_days)
    return store


def purge(store, retention_days: int | None) -> None:
    removed = store.purge(retention_days)
    ended = store.end_expired_sessions()
    if removed or ended:
        log.info("purged", extra={"fields": {"conversations": removed, "sessions": ended, "retention_days": retention_days}})


async def purge_forever(store, retention_days: int | None, every: float = PURGE_EVERY) -> None:
    """Deleted conversations, those past the retention, and ended sessions removed every `every` seconds; a
    failure (the database away for a while) is logged and tried again at the next round."""
    while True:
        await asyncio.sleep(every)
        try:
            await asyncio.to_thread(purge, store, retention_days)
        except (StoreError, StoreUnavailable) as error:
            log.warning("purge failed; tried again in an hour", extra={"fields": {"error": str(error)}})
