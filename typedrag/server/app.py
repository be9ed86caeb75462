"""The HTTP service: the app, its middleware, error handlers and lifespan; the routes by job (typedrag.server.routes).

Stateless by design: the pipeline is built once per process and a request keeps nothing on disk,
so replicas behind a load balancer need only the same read-only index and LLM endpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from typedrag import telemetry
from typedrag.config import Settings
from typedrag.library import CollectionError
from typedrag.pipeline import Pipeline
from typedrag.server.auth import check_bearer, require_caller, store_error
from typedrag.server.auth import router as auth_router
from typedrag.server.error_bodies import hide, http_error, invalid, without_keys
from typedrag.server.logs import log
from typedrag.server.mcp_http import mount_mcp
from typedrag.server.metrics import RequestObserver, ServiceMetrics, fastapi_traces_requests
from typedrag.server.middleware import RequestContext
from typedrag.server.routes import collections as library_routes
from typedrag.server.routes import conversations, health, native, openai
from typedrag.server.service import ServerOptions, Service
from typedrag.store import StoreError, StoreUnavailable

STATIC = Path(__file__).parent / "static"


def create_app(
    settings: Settings, pipeline: Pipeline | None = None, options: ServerOptions | None = None, store: Any = None
) -> FastAPI:
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
        RequestContext,
        max_body=options.max_request_bytes,
        body_timeout=options.body_timeout,
        streamed=library_routes.UPLOAD_PATH,
    )
    # outermost: counts every request, and opens its server span where FastAPI does not
    app.add_middleware(RequestObserver, metrics=metrics, trace_requests=not fastapi_traces_requests())
    app.add_exception_handler(StarletteHTTPException, http_error)  # also the router's own 404/405
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(CollectionError, library_routes.collection_error)
    app.add_exception_handler(StoreError, store_error)
    app.add_exception_handler(StoreUnavailable, store_error)
    if options.api_key is not None:
        hide(options.api_key)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.include_router(health.router)
    app.include_router(native.router)
    app.include_router(auth_router)
    app.include_router(library_routes.router)
    app.include_router(conversations.router)
    app.include_router(openai.router, dependencies=[Depends(require_caller)])
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
                scope = {
                    **scope,
                    "path": masked_path,
                    "raw_path": masked_path.encode("utf-8", "replace"),
                    "query_string": masked_query,
                }
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
        log.info(
            "purged", extra={"fields": {"conversations": removed, "sessions": ended, "retention_days": retention_days}}
        )


async def purge_forever(store, retention_days: int | None, every: float = PURGE_EVERY) -> None:
    """Deleted conversations, those past the retention, and ended sessions removed every `every` seconds; a
    failure (the database away for a while) is logged and tried again at the next round."""
    while True:
        await asyncio.sleep(every)
        try:
            await asyncio.to_thread(purge, store, retention_days)
        except (StoreError, StoreUnavailable) as error:
            log.warning("purge failed; tried again in an hour", extra={"fields": {"error": str(error)}})
