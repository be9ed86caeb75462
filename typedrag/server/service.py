"""What the HTTP routes share: the service (the pipeline, the library of collections, the answer slots, the
store) and its readiness. Answering one question over it is typedrag.server.answering; the routes are in
typedrag.server.routes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import Request

from typedrag.config import Settings
from typedrag.errors import ModelUnavailable
from typedrag.history import Turn, clean_history
from typedrag.library import Caller, CollectionError, Library
from typedrag.pipeline import Pipeline
from typedrag.questions import QuestionError, clean_question
from typedrag.server.error_bodies import api_error
from typedrag.server.logs import log
from typedrag.server.metrics import ServiceMetrics


@dataclass
class ServerOptions:
    """Limits and access rules of one server process: API key, concurrency, body size, timeouts, allowed hosts."""

    api_key: str | None = None  # Bearer key required on /v1/*; None leaves the API open
    max_concurrency: int = 32  # answers in flight; beyond it 503 + Retry-After rather than an unbounded queue
    max_request_bytes: int = 256 * 1024
    retry_after_seconds: int = 2
    ready_timeout: float = 2.0  # seconds /readyz waits for the LLM endpoint
    body_timeout: float = 20.0  # seconds a client may take to send its whole body (Apache mod_reqtimeout's body=20)
    allowed_hosts: list[str] | None = None  # Host headers accepted (starlette TrustedHostMiddleware); None: any
    # Accounts (typedrag.server.auth): how long a page's sign-in lasts; the proxies whose X-Forwarded-Proto (and user
    # header) is believed, as addresses or networks; the header an SSO proxy names the signed-in user in (None: off),
    # and whether a name it gives that has no account yet becomes a reader (no grants) rather than a 401.
    session_hours: float = 168.0
    trusted_proxies: tuple[str, ...] = ()
    user_header: str | None = None
    user_header_adds_users: bool = False


class Slots:
    """Answers in flight; one event loop per process, so a plain counter is enough."""

    def __init__(self, size: int, retry_after: int) -> None:
        self.size, self.used, self.retry_after = size, 0, retry_after

    def take(self) -> None:
        if self.used >= self.size:
            raise api_error(
                503,
                f"server busy: {self.size} answers in flight; retry in {self.retry_after} s",
                {"Retry-After": str(self.retry_after)},
            )
        self.used += 1

    def give(self) -> None:
        self.used -= 1


class Service:
    """What the routes share: the pipeline, the concurrency slots, readiness checks."""

    def __init__(
        self,
        pipeline: Pipeline,
        settings: Settings,
        options: ServerOptions,
        metrics: ServiceMetrics | None = None,
        library: Library | None = None,
        store: Any = None,
    ) -> None:
        self.pipeline, self.settings, self.options = pipeline, settings, options
        # The accounts, grants, sessions, saved conversations and feedback (typedrag.store), when the server has a
        # data folder or a database; None: no accounts, nothing saved (the server's key, or none, as before).
        self.store = store
        self.has_accounts = False  # set once the store is seen to hold an account (typedrag.server.auth.is_open)
        # The collections answered in: the pipeline's own index as "default" (`--index`), and those of `--data DIR`.
        self.library = library or Library(
            pipeline, settings.data, default_index=settings.index, limits=settings.library, retrieval=settings.retrieval
        )
        self.slots = Slots(options.max_concurrency, options.retry_after_seconds)
        self.metrics = metrics or ServiceMetrics()
        self.model_problem: str | None = None  # why a model the engine needs cannot be loaded (see load_models)

    def load_models(self) -> None:
        """Load the engine's models now (startup), so a missing or damaged one makes the replica not ready,
        with the reason, instead of failing every answer."""
        try:
            load_models(self.pipeline)
        except ModelUnavailable as error:
            self.model_problem = str(error)
            log.error("a model cannot be loaded: not ready", extra={"fields": {"error": self.model_problem}})

    def pipeline_for(self, collection: str | None, caller: Caller) -> Pipeline:
        """The pipeline that answers in `collection` (None: the default one), or the 4xx saying why none can."""
        try:
            return self.library.pipeline(collection, caller)
        except CollectionError as error:
            raise api_error(error.status, error.message) from error

    def check(self, question: str, type_: str | None, status: int = 422) -> tuple[str, str | None]:
        """Reject bad input with a 4xx before a slot or a stream is spent on it."""
        try:
            question = clean_question(question, self.pipeline.settings.max_question_chars)
            return question, self.pipeline.route_label(type_) if type_ else None
        except QuestionError as error:
            raise api_error(status, str(error)) from error

    def check_history(self, history: list[Turn], status: int = 422) -> list[Turn]:
        """The conversation's turns cleaned and bounded, or a 4xx naming the turn that is not a message."""
        try:
            return clean_history(history)
        except QuestionError as error:
            raise api_error(status, str(error)) from error

    async def readiness(self) -> dict[str, str]:
        models = "ok" if self.model_problem is None else f"error: {self.model_problem}"
        return {"index": await self._index_check(), "llm": await self._llm_check(), "models": models}

    async def _index_check(self) -> str:
        """Every collection's index answers a search ("ok" with none yet under --data: collections come later)."""
        collections = [self.library.get(name) for name in self.library.names()]
        retrievers = [(c.name, c.retriever) for c in collections if c.retriever is not None]
        if not retrievers and self.settings.data is None:
            return "missing"
        for name, retriever in retrievers:
            try:
                await asyncio.to_thread(retriever.search, "readiness", 1)
            except Exception as error:  # any failure means this replica must not take traffic
                where = "" if name == "default" and self.settings.data is None else f"collection {name}: "
                return f"error: {where}{type(error).__name__}: {error}"
        return "ok"

    async def _llm_check(self) -> str:
        base_url = getattr(getattr(self.pipeline.engine, "model", None), "base_url", None)
        if base_url is None:
            return "offline"
        key = self.settings.llm.api_key
        headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
        try:
            async with httpx.AsyncClient(timeout=self.options.ready_timeout) as client:
                response = await client.get(base_url.rstrip("/") + "/models", headers=headers)
        except httpx.HTTPError as error:
            return f"unreachable: {type(error).__name__}"
        return "ok" if response.status_code == 200 else f"HTTP {response.status_code}"


def load_models(pipeline: Pipeline) -> None:
    """Load the models the pipeline's engine answers with (the offline engine's reader), each checked as it
    loads; `ModelUnavailable` says which is missing or damaged. Engines without such models load nothing."""
    getattr(getattr(pipeline, "engine", None), "reader", None)


def service_of(request: Request) -> Service:
    return request.app.state.service
