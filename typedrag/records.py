"""Typed records passed between the steps of the system (corpus -> index -> retrieval)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

SECTION_SEPARATOR = " › "


class BlockKind(StrEnum):
    """What a block of a document is, as its reader knows it."""

    PROSE = "prose"
    HEADING = "heading"
    ITEM = "item"  # a list item
    CODE = "code"
    TABLE = "table"
    ADMONITION = "admonition"  # a note, warning or tip box, its title included
    CAPTION = "caption"
    NOTICE = "notice"  # a licence or copyright notice, navigation left over


@dataclass(frozen=True, slots=True)
class LineKind:
    """The kind of one line of a passage, and an ordered list item's place in its list."""

    kind: BlockKind = BlockKind.PROSE
    order: int | None = None


@dataclass(frozen=True, slots=True)
class Block:
    """A run of a document's text under one heading path (and, in a PDF, on one page).

    Passages never cross from one section path to another, so a reader that knows a document's
    headings cuts its text into blocks at them.
    """

    text: str
    section: tuple[str, ...] = ()  # heading path below the document title, outermost first
    page: int | None = None  # 1-based page number (PDF)


@dataclass(frozen=True, slots=True)
class Document:
    """One source document as read from a corpus file, before chunking.

    Plain records carry `text`; readers that know the document's structure (HTML, PDF, DOCX, Markdown,
    reStructuredText) give `blocks` instead, possibly as a generator so a huge file is never held
    whole: it is consumed once, by the chunker.
    """

    doc_id: str
    title: str
    text: str = ""
    source: str = ""  # "file:line" where it came from, for error messages
    blocks: Iterable[Block] | None = None

    def iter_blocks(self) -> Iterator[Block]:
        """The document's blocks in order; `text` alone is one block with no section."""
        if self.blocks is None:
            if self.text:
                yield Block(self.text)
            return
        yield from self.blocks


@dataclass(frozen=True, slots=True)
class Passage:
    """A ~100-word chunk of a document. `passage_id` is `<doc_id>#<position>`, stable across re-indexing.

    `section` is the heading path inside the document ("Routine Vacuuming › Recovering Disk Space");
    `page` and `page_end` the first and last PDF page it was taken from (`page_end` None when one page).
    """

    passage_id: str
    doc_id: str
    title: str
    text: str
    section: str = ""
    page: int | None = None
    page_end: int | None = None


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
    """What `typedrag index` did, printed at the end: a fresh build, or a sync of an existing index.

    `documents` and `passages` are what the index holds afterwards; the file counts say what changed.
    """

    index_dir: str
    documents: int = 0
    passages: int = 0
    skipped: int = 0
    synced: bool = False  # an existing index was brought up to date (else built from scratch)
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    seconds: float = 0.0
    problems: list[CorpusProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was indexed but changed on the way (an over-long run cut)
