"""Retrieval indexes behind the one `Retriever` interface; tantivy BM25 is the embedded default, Milvus the server option."""

from typedrag.index.base import IndexUnusableError, Retriever
from typedrag.index.open import open_configured_retriever
from typedrag.index.tantivy_index import TantivyRetriever, build_index, open_retriever

__all__ = [
    "IndexUnusableError",
    "Retriever",
    "TantivyRetriever",
    "build_index",
    "open_configured_retriever",
    "open_retriever",
]
