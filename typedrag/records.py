"""Typed records passed between the steps of the system (corpus -> index -> retrieval)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

SECTION_SEPARATOR = " › "


class BlockKind(StrEnum):
    """What a block of a document is, as the reader that read it knows: prose unless it knows better."""

    PROSE = "prose"
    HEADING = "heading"  # a heading given as text (a PDF's bookmarked title line); most are sections instead
    ITEM = "item"  # a list item
    CODE = "code"  # a code block, a literal block, a screen, an API signature
    TABLE = "table"  # table rows, "cell | cell" (an empty cell is empty between its bars)
    TABLE_HEAD = "table-head"  # a table's header row, "Key | Action": the names of the columns of the rows after it
    TERM = "term"  # a definition list's term ("work_mem (integer)"): what the text after it defines
    ADMONITION = "admonition"  # a note, warning or tip box, its title ("Note") included
    CAPTION = "caption"  # a figure's or a table's caption
    NOTICE = "notice"  # a licence, copyright or legal notice; navigation left in the page (a table of contents)


@dataclass(frozen=True, slots=True)
class Block:
    """A run of a document's text under one heading path (and, in a PDF, on one page), of one kind.

    Passages never cross from one section path to another, so a reader that knows a document's
    headings cuts its text into blocks at them. A reader that knows structure gives each list item,
    code block, table and admonition as a block of its own, so each line of a passage has one kind.
    """

    text: str
    section: tuple[str, ...] = ()  # heading path below the document title, outermost first
    page: int | None = None  # 1-based page number (PDF)
    kind: BlockKind = BlockKind.PROSE
    # 1-based: an item's position in an ordered list; a table's number in its document, on its head and its rows
    # (two tables in a row are told apart by it); None otherwise
    order: int | None = None


@dataclass(frozen=True, slots=True)
class LineKind:
    """The kind of one line of a passage: the kind of the block it came from, and its order (an ordered item's
    position, a table's number)."""

    kind: BlockKind = BlockKind.PROSE
    order: int | None = None


PROSE_LINE = LineKind()
# One letter per kind in a passage's stored `lines` ("p,p,i1,i2,c,r3,t3"): an ordered item carries its position,
# a table's head and rows the table's number.
_LINE_CODES = {
    BlockKind.PROSE: "p",
    BlockKind.HEADING: "h",
    BlockKind.ITEM: "i",
    BlockKind.CODE: "c",
    BlockKind.TABLE: "t",
    BlockKind.TABLE_HEAD: "r",
    BlockKind.TERM: "d",
    BlockKind.ADMONITION: "a",
    BlockKind.CAPTION: "f",
    BlockKind.NOTICE: "n",
}
NUMBERED = frozenset({BlockKind.ITEM, BlockKind.TABLE, BlockKind.TABLE_HEAD})  # kinds whose lines carry an order
_LINE_KINDS = {code: kind for kind, code in _LINE_CODES.items()}
_LINE_CODE = re.compile(f"([{''.join(_LINE_KINDS)}])([1-9][0-9]{{0,8}})?")  # a kind's letter, then an order


def encode_lines(lines: Iterable[LineKind]) -> str:
    """`lines` as stored beside a passage: "p,i1,i2,c" (an unordered item is "i")."""
    return ",".join(_LINE_CODES[line.kind] + (str(line.order) if line.order is not None else "") for line in lines)


def decode_lines(stored: str | None) -> tuple[LineKind, ...]:
    """What `encode_lines` stored; () (unknown: read as prose) for an empty, missing or malformed value."""
    if not stored:
        return ()
    lines = []
    for code in stored.split(","):
        match = _LINE_CODE.fullmatch(code)
        if match is None:
            return ()
        kind, order = _LINE_KINDS[match.group(1)], match.group(2)
        if order is not None and kind not in NUMBERED:
            return ()
        lines.append(PROSE_LINE if code == "p" else LineKind(kind, int(order) if order else None))
    return tuple(lines)


def lines_of(text: str, stored: str | None) -> tuple[LineKind, ...]:
    """A stored passage's line kinds, checked against its text: () unless there is one per line."""
    lines = decode_lines(stored)
    return lines if len(lines) == text.count("\n") + 1 else ()


CELL_SEPARATOR = " | "  # between the cells of a table's row, as the document readers write it
_CELL_BAR = re.compile(r"\s*\|\s*")


def table_row(cells: Iterable[str]) -> str:
    """A table row as the document readers write it: its cells in order, an empty one empty between its bars."""
    return CELL_SEPARATOR.join(cells).strip()


def table_cells(row: str) -> list[str]:
    """The cells `table_row` wrote (a cell holding a bar of its own splits in two, so it no longer fits its head)."""
    return [cell.strip() for cell in _CELL_BAR.split(row.strip())]


def named_row(head: Sequence[str], row: str) -> str | None:
    """A TABLE row named by its table's head ("Key: Ctrl+L; Action: Redraw the whole window."), empty cells left
    out and a full stop at its end; None when its cells do not fit the head's columns one for one."""
    cells = table_cells(row)
    if len(cells) != len(head) or not any(cells):
        return None
    named = [f"{name}: {value}" if name else value for name, value in zip(head, cells) if value]
    text = "; ".join([part.rstrip(" .;") for part in named[:-1]] + [named[-1].rstrip(" ;")])
    return text if text.endswith((".", "!", "?")) else text + "."


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
    `lines` gives the kind of each line of `text` (`text.split("\n")`): empty when unknown (plain-text
    records, an index built before kinds were kept), to be read as prose.
    """

    passage_id: str
    doc_id: str
    title: str
    text: str
    section: str = ""
    page: int | None = None
    page_end: int | None = None
    lines: tuple[LineKind, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoredPassage:
    """A passage with the score a retriever or reranker gave it (higher is better)."""

    passage: Passage
    score: float

    @property
    def passage_id(self) -> str:
        return self.passage.passage_id


class CappedList(list):
    """A list that keeps its first `kept` items and only counts those appended after them (`dropped`): what a
    build reports of 4 million junk lines, without holding a gigabyte of reasons."""

    def __init__(self, items: Iterable = (), kept: int = 1000):
        super().__init__()
        self.kept, self.dropped = kept, 0
        self.extend(items)

    def __reduce__(self):  # a worker process sends its file's problems back: the count goes with them
        return CappedList, (list(self), self.kept), {"dropped": self.dropped}

    def append(self, item) -> None:
        if len(self) < self.kept:
            super().append(item)
        else:
            self.dropped += 1

    def extend(self, items: Iterable) -> None:
        for item in items:
            self.append(item)
        self.dropped += getattr(items, "dropped", 0)

    def __iadd__(self, items: Iterable) -> "CappedList":
        self.extend(items)
        return self

    @property
    def total(self) -> int:
        """How many were appended: those kept and those dropped."""
        return len(self) + self.dropped


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
    left_out: int = 0  # files of the folders given that the filters left out
    filters: str = ""  # the filters applied (given, or recorded in the index), as options: "--include '*.html'"
    follows_links: bool = False  # links leading out of the folders were read (--follow-links, given or recorded)
    synced: bool = False  # an existing index was brought up to date (else built from scratch)
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    seconds: float = 0.0
    retrieval: str = "bm25"  # what the index records as its search: bm25, dense or hybrid
    embedder: str | None = None  # the model of its passage vectors (None: no vectors)
    embedded: int = 0  # passages embedded by this run (not copied from the previous version or a journal)
    embed_seconds: float = 0.0
    vector_bytes: int = 0  # the vector files' size on disk
    graph_seconds: float = 0.0  # building the HNSW graph over the vectors (typedrag.index.nearest; 0: none)
    sentences: int = 0  # sentence vectors the index keeps (typedrag.index.sentences; 0: none made at build)
    sentences_embedded: int = 0  # ...of which this run embedded (the rest taken from the previous version)
    sentence_seconds: float = 0.0
    sentence_bytes: int = 0
    sentence_vectors: bool = False  # whether this build kept them (typedrag.index.dense.SentenceChoice)
    sentence_choice: str = (
        ""  # ...and why ("asked", "recorded", "kept", "demo", "default", "no-minilm"; "": not a local build)
    )
    problems: CappedList = field(default_factory=CappedList)  # `skipped` counts them all, kept or not
    notes: CappedList = field(
        default_factory=CappedList
    )  # what was indexed but changed on the way (an over-long run cut)
