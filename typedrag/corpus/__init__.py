"""Corpus ingestion: read sources into documents, chunk documents into passages."""

from typedrag.corpus.chunker import chunk_document
from typedrag.corpus.readers import DEMO_SOURCE, CorpusError, iter_documents

__all__ = ["DEMO_SOURCE", "CorpusError", "chunk_document", "iter_documents"]
