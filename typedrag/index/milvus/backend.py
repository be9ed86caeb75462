"""Milvus as a `Backend` (`typedrag.index.open.BACKENDS["milvus"]`): the collection `--uri` and `--collection` name."""

from __future__ import annotations

from typedrag.config import ConfigError, Settings
from typedrag.index.base import SyncOptions
from typedrag.index.milvus.build import sync_milvus_index
from typedrag.index.milvus.retriever import MilvusRetriever, open_milvus_retriever
from typedrag.records import IndexSummary


class MilvusBackend:
    """The collection the `milvus_*` settings name, on the server `milvus_uri` names (`--ray`: `milvus.ray`)."""

    name = "milvus"

    def open(self, settings: Settings) -> MilvusRetriever:
        return open_milvus_retriever(
            milvus_uri(settings), settings.milvus_collection, token=milvus_token(settings), mode=settings.search_mode
        )

    def sync(self, settings: Settings, sources: list[str], options: SyncOptions) -> IndexSummary:
        check_no_sentence_vectors(settings)
        return sync_milvus_index(
            sources,
            milvus_uri(settings),
            settings.milvus_collection,
            token=milvus_token(settings),
            passage_words=options.passage_words,
            strict=options.strict,
            retrieval=options.retrieval,
            embedder=options.embedder,
            rebuild=options.rebuild,
            remove_missing=options.remove_missing,
            show_progress=options.show_progress,
            filters=options.filters,
        )


def check_no_sentence_vectors(settings: Settings) -> None:
    """A Milvus collection keeps no sentence vectors (its answers embed them): asking for them is an error, not ignored."""
    if settings.sentence_vectors:
        raise ConfigError(
            "--sentence-vectors (sentence_vectors, TYPEDRAG_SENTENCE_VECTORS=1): only a local index keeps sentence vectors; "
            "a Milvus collection's answers embed them"
        )


def milvus_uri(settings: Settings) -> str:
    if not settings.milvus_uri:
        raise ConfigError("the milvus backend needs --uri URI (or TYPEDRAG_MILVUS_URI), e.g. http://127.0.0.1:19530")
    return settings.milvus_uri


def milvus_token(settings: Settings) -> str | None:
    return settings.milvus_token.get_secret_value() if settings.milvus_token else None
