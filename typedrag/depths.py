"""The retrieval depths every strategy's flow is given (typedrag.steps re-exports them): a module of their
own, low enough for the configuration to take its defaults from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Depths:
    """How many passages each step takes: the one home of typedrag's retrieval depths (the configuration and
    `PipelineSettings` take their defaults from here; a pipeline builds one per answer)."""

    top_k: int = (
        5  # passages given to a single generation: plain RAG, and the overview every decomposing type begins with
    )
    aspect_k: int = 3  # passages of its own given to each planned aspect
    candidates_k: int = 12  # retrieval depth before reranking

    @property
    def aspect_search(self) -> int:
        """How deep a planned aspect searches: enough to keep candidates once plain RAG's passages are set aside."""
        return self.top_k + self.aspect_k + 2

    @property
    def item_search(self) -> int:
        """How deep a compared item (and the comparison's question) searches: half the candidates, at least top_k."""
        return max(self.top_k, self.candidates_k // 2)
