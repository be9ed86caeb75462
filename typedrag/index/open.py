"""Open or build the index the settings name, through the backend the `backend` setting names.

`BACKENDS` is the table of them: the setting's value, and where its `Backend` lives (imported when first used,
so a command that never touches Milvus never imports pymilvus). A new backend is one more row
(docs/architecture.md, "Where a new backend goes").
"""

from __future__ import annotations

from importlib import import_module

from typedrag.config import Settings
from typedrag.corpus.readers import FileFilter
from typedrag.index.base import Backend, Retriever, SyncOptions
from typedrag.records import IndexSummary

BACKENDS: dict[str, str] = {
    "tantivy": "typedrag.index.tantivy.backend:TantivyBackend",
    "milvus": "typedrag.index.milvus.backend:MilvusBackend",
}


def backend_for(settings: Settings) -> Backend:
    """The backend the settings name (`backend`, validated by the settings against the same names)."""
    module, _, name = BACKENDS[settings.backend].partition(":")
    return getattr(import_module(module), name)()


def open_configured_retriever(settings: Settings) -> Retriever:
    """The one place that turns `backend` and its options into a `Retriever` (used by every command)."""
    return backend_for(settings).open(settings)


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
    files of the folders given are read (None: as the index recorded them); `settings.sentence_vectors` whether a local
    index keeps its passages' sentence vectors for answers (`typedrag.index.dense.sentence_choice`)."""
    options = SyncOptions(
        passage_words=passage_words,
        strict=strict,
        retrieval=settings.search_mode or ("hybrid" if dense else None),
        embedder=embedder,
        rebuild=rebuild,
        remove_missing=remove_missing,
        show_progress=show_progress,
        filters=filters,
    )
    return backend_for(settings).sync(settings, sources, options)
