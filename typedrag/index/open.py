"""Open or build the index the settings name: the embedded tantivy index or a Milvus collection."""

from __future__ import annotations

from typedrag.config import ConfigError, Settings
from typedrag.corpus.readers import FileFilter
from typedrag.index.base import Retriever
from typedrag.records import IndexSummary


def open_configured_retriever(settings: Settings) -> Retriever:
    """The one place that turns `backend` and its options into a `Retriever` (used by every command)."""
    if settings.backend == "milvus":
        from typedrag.index.milvus_index import open_milvus_retriever

        return open_milvus_retriever(
            _milvus_uri(settings), settings.milvus_collection, token=_milvus_token(settings), mode=settings.search_mode
        )
    from typedrag.index.tantivy_index import open_retriever

    return open_retriever(settings.index, settings.search_mode)


def build_configured_index(
    settings: Settings,
    sources: list[str],
    *,
    passage_words: int,
    strict: bool,
    dense: bool = False,
    rebuild: bool = False,
    remove_missing: bool = True,
    embedder: str | None = None,
    show_progress: bool = True,
    filters: FileFilter | None = None,
) -> IndexSummary:
    """Build, or sync, the index the settings name, from the same passages whichever the backend.

    `settings.retrieval` (None: as the index has it, hybrid for a new one) says whether passage vectors are
    kept, and `embedder` which model makes them; `dense` is the older Milvus flag for "with vectors"; `filters` which
    files of the folders given are read (None: as the index recorded them)."""
    retrieval = settings.search_mode or ("hybrid" if dense else None)
    if settings.backend == "milvus":
        from typedrag.index.milvus_index import sync_milvus_index

        return sync_milvus_index(
            sources,
            _milvus_uri(settings),
            settings.milvus_collection,
            token=_milvus_token(settings),
            passage_words=passage_words,
            strict=strict,
            retrieval=retrieval,
            embedder=embedder,
            rebuild=rebuild,
            remove_missing=remove_missing,
            show_progress=show_progress,
            filters=filters,
        )
    from typedrag.index.tantivy_index import sync_index

    return sync_index(
        sources, settings.index, passage_words=passage_words, strict=strict, rebuild=rebuild, remove_missing=remove_missing,
        retrieval=retrieval, embedder=embedder, show_progress=show_progress, filters=filters,
    )


def _milvus_uri(settings: Settings) -> str:
    if not settings.milvus_uri:
        raise ConfigError("the milvus backend needs --uri URI (or TYPEDRAG_MILVUS_URI), e.g. http://127.0.0.1:19530")
    return settings.milvus_uri


def _milvus_token(settings: Settings) -> str | None:
    return settings.milvus_token.get_secret_value() if settings.milvus_token else None
