"""Running typedrag's async pipeline from the synchronous code of a framework, and a framework's synchronous
calls side by side.

Synchronous code with no loop running in its thread (a script, a worker thread) runs a coroutine there; code
with one (a notebook, an async caller) hands it to an anyio blocking portal: an event loop in a thread of its
own. A call through a portal runs in a copy of the calling thread's contextvars, and the frameworks keep their
current run there (LangChain's callbacks, LlamaIndex's active span, OpenTelemetry's current span), so
typedrag's inner runs stay nested under the host's run whichever thread they run in.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from anyio.from_thread import start_blocking_portal

from typedrag.index.base import Retriever
from typedrag.records import ScoredPassage

T = TypeVar("T")
_DONE = object()  # what the producer of iterate_sync puts last, however it ended


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to the end from synchronous code: in this thread when no event loop runs here
    (a script, a worker thread), else in a portal's loop in a thread of its own (a notebook, an async caller)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with start_blocking_portal() as portal:
        return portal.call(lambda: coroutine)


def iterate_sync(make: Callable[[], AsyncIterator[T]], context: contextvars.Context | None = None) -> Iterator[T]:
    """An async iterator as a plain one: it runs in a portal's loop in a thread of its own, items come through
    a queue as they are made. Leaving the loop early cancels the producer (and so the answer being written).
    The producer runs in a copy of `context`, by default the caller's when it first asks for an item."""
    items: queue.Queue[Any] = queue.Queue()

    async def pump() -> None:
        try:
            async for item in make():
                items.put(item)
        finally:
            items.put(_DONE)

    caller = context.copy() if context is not None else contextvars.copy_context()
    with start_blocking_portal() as portal:
        produced = caller.run(portal.start_task_soon, pump)  # the portal's task takes the context it is started from
        try:
            while (item := items.get()) is not _DONE:
                yield item
            produced.result()  # the producer's error, if it failed
        finally:
            produced.cancel()


def sync_or_async(call: Callable[[], T], acall: Callable[[], Coroutine[Any, Any, T]] | None) -> T:
    """The framework's synchronous call; when it has only an async one (`NotImplementedError`), that one run
    to the end here (typedrag calls retrievers from worker threads, where no loop runs)."""
    try:
        return call()
    except NotImplementedError:
        if acall is None:
            raise
        return run_sync(acall())


class ThreadedSearch(Retriever):
    """`search_many` for an adapter: the queries run side by side, as typedrag's own retrievers do."""

    name: str

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:  # each adapter has its own
        raise NotImplementedError

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        if len(queries) <= 1:
            return [self.search(q, k) for q in queries]
        # One copy of the caller's context per query: a context can be entered by one thread at a time.
        contexts = [contextvars.copy_context() for _ in queries]
        with ThreadPoolExecutor(max_workers=min(4, len(queries)), thread_name_prefix="typedrag-search") as pool:
            return list(pool.map(lambda context, q: context.run(self.search, q, k), contexts, queries))
