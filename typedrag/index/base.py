"""The one retrieval interface every strategy uses.

Strategies only see `Retriever`; an embedded engine (tantivy, the default) or a
server-backed one (Qdrant, OpenSearch, ...) can sit behind it without touching them.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from typedrag.errors import IndexUnusableError, UserError
from typedrag.records import ScoredPassage

__all__ = ["IndexBuildError", "IndexUnusableError", "Retriever"]


class IndexBuildError(UserError, FileExistsError):
    """An index cannot be built where asked: the folder is not a typedrag index, is the current folder
    or a parent of it, is a mount point, or another build holds its lock."""


@runtime_checkable
class Retriever(Protocol):
    """Finds passages for a query. Synchronous and thread-safe: strategies call it from worker threads.

    Implement `name`, `search` and `search_many` to put any index behind typedrag (see ListRetriever).
    """

    name: str  # engine name shown in traces, e.g. "tantivy-bm25"

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        """Ranked passages for one query, best first."""
        ...

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        """Ranked passages for several queries (may run in parallel)."""
        ...
