"""Reranking retrieved passages by MiniLM cosine similarity: a few dozen candidates need no vector index."""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol, runtime_checkable

import numpy as np

from typedrag.embed import Embedder, default_embedder
from typedrag.records import Passage, ScoredPassage

# Words of each passage the reranker reads: the opening of a ~100-word passage carries its topic,
# and embedding cost grows with length (MiniLM on CPU: ~25 full passages/s on 2 cores).
RERANK_WORDS = 60


@runtime_checkable
class Reranker(Protocol):
    """Reorders candidate passages by relevance to a query. Synchronous; strategies run it in a thread."""

    name: str

    def rerank(self, query: str, hits: list[ScoredPassage], k: int) -> list[ScoredPassage]:
        """The `k` hits most relevant to `query`, best first, with the reranker's scores."""
        ...


def passage_head(passage: Passage) -> str:
    """What the reranker reads of a passage: its title and opening words."""
    return head_of(passage.title, passage.text)


def head_of(title: str, text: str) -> str:
    """A passage's head (`passage_head`) from its stored title and text."""
    return f"{title}. {' '.join(text.split()[:RERANK_WORDS])}"


class EmbeddingReranker:
    """Cosine similarity of MiniLM vectors (the shipped ONNX model, no torch).

    >>> EmbeddingReranker().name
    'minilm-cosine'
    """

    name = "minilm-cosine"

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def similarities(self, queries: list[str], hits: list[ScoredPassage]) -> np.ndarray:
        """(len(queries), len(hits)) cosines between each query and each passage's head."""
        if not hits or not queries:
            return np.zeros((len(queries), len(hits)), dtype=np.float32)
        # The heads are the passages': an index keeps their vectors (typedrag.index.sentences).
        vectors = self.embedder.embed(queries + [passage_head(h.passage) for h in hits], keep_from=len(queries))
        return vectors[: len(queries)] @ vectors[len(queries) :].T

    def rerank(self, query: str, hits: list[ScoredPassage], k: int) -> list[ScoredPassage]:
        """The `k` hits most similar to `query`, scored by cosine (ties keep retrieval order)."""
        if not hits:
            return []
        scores = self.similarities([query], hits)[0]
        order = sorted(range(len(hits)), key=lambda i: -float(scores[i]))
        return [replace(hits[i], score=float(scores[i])) for i in order[:k]]
