"""Reranking retrieved passages by MiniLM cosine similarity: a few dozen candidates need no vector index."""

from __future__ import annotations

from dataclasses import replace

from typedrag.embed import Embedder, default_embedder
from typedrag.records import ScoredPassage


# Words of each passage the reranker reads: the opening of a ~100-word passage carries its topic,
# and embedding cost grows with length (MiniLM on CPU: ~25 full passages/s on 2 cores).
RERANK_WORDS = 60


class EmbeddingReranker:
    name = "minilm-cosine"

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    def rerank(self, query: str, hits: list[ScoredPassage], k: int) -> list[ScoredPassage]:
        """The `k` hits most similar to `query`, scored by cosine (ties keep retrieval order)."""
        if not hits:
            return []
        embedder = self._embedder or default_embedder()
        texts = [f"{h.passage.title}. {' '.join(h.passage.text.split()[:RERANK_WORDS])}" for h in hits]
        vectors = embedder.embed([query] + texts)
        scores = vectors[1:] @ vectors[0]
        order = sorted(range(len(hits)), key=lambda i: -float(scores[i]))
        return [replace(hits[i], score=float(scores[i])) for i in order[:k]]
