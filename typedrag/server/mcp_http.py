"""/mcp on `typedrag serve`: the MCP server (typedrag.mcp_server) over Streamable HTTP, behind the same keys as /v1
(the server's own, or a user's: MCP clients send no cookies). Without the `mcp` extra the route answers 501 with the one line that names it; the rest of the service
runs as ever.

The collections it serves are the server's library (typedrag.library: `serve --data DIR`'s collections and the
`--index` one as "default"), each read with the rights of the caller whose key the request carried: a collection
the caller may not read is not listed, and asking or searching in it is the same tool error as an unknown one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from typedrag.errors import UserError
from typedrag.extras import MissingExtra
from typedrag.library import Caller
from typedrag.library.tools import LibraryCollections
from typedrag.mcp_server import Collections, HttpEndpoint, http_endpoint
from typedrag.server.error_bodies import error_body

PATH = "/mcp"


# Who sent the MCP request being served: set by the route before the SDK's handler runs, read by the tools (the
# SDK's tasks are started from the request's own task, so they see its context).
current_caller: ContextVar[Caller] = ContextVar(
    "typedrag_mcp_caller", default=Caller(authenticated=False, name="nobody")
)


def served_collections(app: FastAPI) -> Collections:
    """The collections /mcp serves: the server's library, read with the rights of the request's caller."""
    return LibraryCollections(lambda: app.state.service.library, current_caller.get, lambda: answer_slot(app))


class ServerBusy(UserError):
    """Every answer slot of the server is taken: the MCP client sees a one-line tool error, as /v1 sees 503."""


@contextmanager
def answer_slot(app: FastAPI) -> Iterator[None]:
    """One of the service's concurrency slots for the answer's time, or ServerBusy (a tool error) if none is free."""
    slots = app.state.service.slots
    try:
        slots.take()
    except HTTPException as error:
        raise ServerBusy(str(error.detail)) from error
    try:
        yield
    finally:
        slots.give()


class McpRoute:
    """The ASGI app at /mcp: the key checked as /v1 checks it, then the SDK's Streamable HTTP handler."""

    def __init__(
        self, collections: Collections, check_key: Callable[[Request], Awaitable[Caller]], max_body: int
    ) -> None:
        self.check_key = check_key
        self.endpoint: HttpEndpoint | None = None
        self.missing: str | None = None
        try:
            self.endpoint = http_endpoint(collections, max_body)
        except MissingExtra as error:
            self.missing = str(error)

    async def __call__(self, scope, receive, send) -> None:
        try:
            caller = await self.check_key(Request(scope, receive))
        except HTTPException as error:
            await JSONResponse(
                error_body(error.status_code, str(error.detail)), error.status_code, headers=error.headers
            )(scope, receive, send)
            return
        if self.endpoint is None:
            await JSONResponse(error_body(501, self.missing or "the MCP server is not available"), 501)(
                scope, receive, send
            )
            return
        token = current_caller.set(caller)
        try:
            await self.endpoint.app(scope, receive, send)
        finally:
            current_caller.reset(token)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For the app's lifespan: the SDK's task group, in which the requests' MCP servers run."""
        if self.endpoint is None:
            yield
            return
        async with self.endpoint.running():
            yield


def mount_mcp(app: FastAPI, check_key: Callable[[Request], Awaitable[Caller]], max_body: int) -> McpRoute:
    """Add /mcp (GET, POST, DELETE) to `app`; enter the returned route's `running()` in the app's lifespan."""
    route = McpRoute(served_collections(app), check_key, max_body)
    app.add_route(PATH, route, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    return route
