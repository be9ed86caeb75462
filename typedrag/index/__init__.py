"""Retrieval indexes behind the one `Retriever` interface: the embedded tantivy index (BM25 and passage vectors, fused)
is the default (`typedrag.index.tantivy`), Milvus the server option (`typedrag.index.milvus`); `typedrag.index.open`
holds the table of backends (docs/architecture.md, "The index").

The tantivy-backed names are imported on first use, so the interface (and everything that only
needs it, like the pipeline) imports without the engine.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from typedrag.index.base import IndexUnusableError, Retriever

_LAZY = {
    "TantivyRetriever": "typedrag.index.tantivy",
    "build_index": "typedrag.index.tantivy",
    "open_retriever": "typedrag.index.tantivy",
    "ListRetriever": "typedrag.index.memory",
    "FunctionRetriever": "typedrag.index.memory",
    "open_configured_retriever": "typedrag.index.open",
    "build_configured_index": "typedrag.index.open",
}
__all__ = ["IndexUnusableError", "Retriever", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'typedrag.index' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)
