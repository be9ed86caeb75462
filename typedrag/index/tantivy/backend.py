"""The embedded index as a `Backend` (`typedrag.index.open.BACKENDS["tantivy"]`): the folder `--index` names."""

from __future__ import annotations

from typedrag.config import Settings
from typedrag.index.base import SyncOptions
from typedrag.index.tantivy.build import sync_index
from typedrag.index.tantivy.retriever import TantivyRetriever, open_retriever
from typedrag.records import IndexSummary


class TantivyBackend:
    """The index folder the `index` setting names, opened and synced in this process."""

    name = "tantivy"

    def open(self, settings: Settings) -> TantivyRetriever:
        return open_retriever(settings.index, settings.search_mode)

    def sync(self, settings: Settings, sources: list[str], options: SyncOptions) -> IndexSummary:
        """`settings.sentence_vectors` says whether the index keeps its passages' sentence vectors for answers
        (`typedrag.index.dense.sentence_choice`)."""
        return sync_index(
            sources,
            settings.index,
            passage_words=options.passage_words,
            strict=options.strict,
            rebuild=options.rebuild,
            remove_missing=options.remove_missing,
            retrieval=options.retrieval,
            embedder=options.embedder,
            show_progress=options.show_progress,
            filters=options.filters,
            sentence_vectors=settings.sentence_vectors,
        )
