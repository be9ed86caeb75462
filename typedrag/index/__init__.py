"""Retrieval indexes behind the one `Retriever` interface; tantivy BM25 is the embedded default."""

from typedrag.index.base import IndexUnusableError, Retriever
from typedrag.index.tantivy_index import TantivyRetriever, build_index, open_retriever

__all__ = ["IndexUnusableError", "Retriever", "TantivyRetriever", "build_index", "open_retriever"]
