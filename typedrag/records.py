"""Typed records passed between the steps of the system (corpus -> index -> retrieval)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Document:
    """One source document as read from a corpus file, before chunking."""

    doc_id: str
    title: str
    text: str
    source: str = ""  # "file:line" where it came from, for error messages


@dataclass(frozen=True, slots=True)
class Passage:
    """A ~100-word chunk of a document. `passage_id` is `<doc_id>#<position>`, stable across re-indexing."""

    passage_id: str
    doc_id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class ScoredPassage:
    """A passage with the score a retriever or reranker gave it (higher is better)."""

    passage: Passage
    score: float

    @property
    def passage_id(self) -> str:
        return self.passage.passage_id


@dataclass(slots=True)
class CorpusProblem:
    """A malformed input record, reported as `file:line: reason`."""

    location: str
    reason: str

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}"


@dataclass(slots=True)
class IndexSummary:
    """What `typedrag index` did, printed at the end of a build."""

    index_dir: str
    documents: int = 0
    passages: int = 0
    skipped: int = 0
    seconds: float = 0.0
    problems: list[CorpusProblem] = field(default_factory=list)
