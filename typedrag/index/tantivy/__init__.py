"""The embedded index (the default backend): BM25 over ~100-word passages in a tantivy index on disk, with
passage vectors beside it for dense and hybrid search. No server.

- `schema`: what a passage is stored as, and how a query is analysed and asked;
- `folder`: the index folder on disk (which folders a build may replace, its lock, the swap of a new version);
- `build`: build or sync the index, copy on write;
- `retriever`: search it (`TantivyRetriever`), reopening a version a sync swapped in.
"""

from __future__ import annotations

from typedrag.index.tantivy.build import build_index, remove_index, sync_index
from typedrag.index.tantivy.retriever import TantivyRetriever, open_retriever
from typedrag.index.tantivy.schema import ENGINE

__all__ = ["ENGINE", "TantivyRetriever", "build_index", "open_retriever", "remove_index", "sync_index"]
