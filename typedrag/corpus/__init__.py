"""Corpus ingestion: read sources into documents, chunk documents into passages."""

from typedrag.corpus.chunker import chunk_document
from typedrag.corpus.readers import (
    DEMO_SOURCE,
    SUFFIXES,
    SUPPORTED,
    CorpusError,
    SourceFile,
    iter_documents,
    iter_source_files,
    read_file,
    unique_documents,
)

__all__ = [
    "DEMO_SOURCE",
    "SUFFIXES",
    "SUPPORTED",
    "CorpusError",
    "SourceFile",
    "chunk_document",
    "iter_documents",
    "iter_source_files",
    "read_file",
    "unique_documents",
]
