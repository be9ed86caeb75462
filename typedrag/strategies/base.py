"""The one interface every NFQ-type strategy implements, and the context it runs in."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from typedrag.engines.base import Engine, Trace
from typedrag.index.base import Retriever
from typedrag.records import ScoredPassage
from typedrag.rerank import EmbeddingReranker
from typedrag.result import Aspect, Source


class AspectsFailed(Exception):
    """Every aspect of a decomposed question failed; the pipeline falls back to plain RAG."""


class SourceBook:
    """Numbers passages the first time any step sees them, so [n] means the same passage everywhere."""

    def __init__(self) -> None:
        self._by_id: dict[str, Source] = {}

    def add(self, hits: list[ScoredPassage]) -> list[Source]:
        sources = []
        for hit in hits:
            source = self._by_id.get(hit.passage_id)
            if source is None:
                source = Source.of(len(self._by_id) + 1, hit)
                self._by_id[hit.passage_id] = source
            sources.append(source)
        return sources

    @property
    def sources(self) -> list[Source]:
        return list(self._by_id.values())


@dataclass
class StrategyContext:
    engine: Engine
    retriever: Retriever
    reranker: EmbeddingReranker
    trace: Trace
    top_k: int = 5  # passages given to a single generation
    aspect_k: int = 3  # passages per aspect of a decomposed question
    candidates_k: int = 12  # retrieval depth before reranking
    book: SourceBook = field(default_factory=SourceBook)
    on_event: Callable[[str, dict[str, Any]], None] | None = None  # progress for streaming clients

    def emit(self, event: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event(event, data)

    async def retrieve(self, query: str, k: int) -> list[ScoredPassage]:
        return await asyncio.to_thread(self.retriever.search, query, k)

    async def retrieve_many(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        return await asyncio.to_thread(self.retriever.search_many, queries, k)

    async def rerank(self, query: str, hits: list[ScoredPassage], k: int) -> list[ScoredPassage]:
        return await asyncio.to_thread(self.reranker.rerank, query, hits, k)


@dataclass
class StrategyOutput:
    answer: str
    plan: BaseModel | None = None
    aspects: list[Aspect] = field(default_factory=list)


class Strategy(Protocol):
    name: str

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput: ...
