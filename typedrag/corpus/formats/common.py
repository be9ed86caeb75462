"""What every format reader shares: the result type, the error, text cleaning and the heading path."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter

from typedrag.records import Block, BlockKind

# A block never exceeds this many characters (64 KB of UTF-8 at worst): longer text is cut at whitespace.
MAX_BLOCK_CHARS = 16_000

# ANSI escape sequences (CSI and OSC) whole, then any other C0/C1 control character except \t and \n.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]{0,256}(?:\x07|\x1b\\)?|[\x00-\x08\x0e-\x1f\x7f-\x9f]"
)
_NEWLINES = str.maketrans({"\r": "\n", "\x0b": "\n", "\x0c": "\n"})
# Every character `clean` changes or removes: the newlines above, the escape and the control characters.
_DIRTY = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"\s+")
# Bidi embeddings, overrides and isolates: in a title they can make a line read backwards ("Asteroid live").
_BIDI_CONTROLS = dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])


class Unreadable(Exception):
    """A file (or the rest of it) cannot be read; `reason` is the message the user sees, `line` where, if known."""

    def __init__(self, reason: str, line: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.line = line


@dataclass(frozen=True)
class Parsed:
    """A file as a reader understood it: its title and its blocks, in order (a generator, consumed once).
    `skipped` says what the blocks left out as they were read (a PDF page that cannot be loaded): one
    reason each, reported once the blocks are consumed."""

    title: str
    blocks: Iterator[Block]
    skipped: list[str] = field(default_factory=list)


def clean(text: str) -> str:
    """`text` without control characters or escape sequences; \\r, \\v and \\f become line breaks."""
    if _DIRTY.search(text) is None:  # most text: one scan, nothing to change
        return text
    return _CONTROL.sub("", text.replace("\r\n", "\n").translate(_NEWLINES))


def one_line(text: str) -> str:
    """`text` cleaned and squeezed onto one line: for titles, headings and table cells."""
    return _SPACES.sub(" ", clean(text)).strip()


def title_line(text: str) -> str:
    """`one_line`, less bidi controls: for titles and headings, whether from the document or its file name."""
    return one_line(text.translate(_BIDI_CONTROLS))


def split_long(text: str, limit: int = MAX_BLOCK_CHARS) -> Iterator[str]:
    """`text` in pieces of at most `limit` characters, cut at a line break or else a space when there is one."""
    while len(text) > limit:
        cut = text.rfind("\n", limit // 2, limit)
        if cut < 0:
            cut = max(text.rfind(" ", limit // 2, limit), text.rfind("\t", limit // 2, limit))
        if cut < 0:
            cut = limit
        head, text = text[:cut].strip(), text[cut:].lstrip()
        if head:
            yield head
    text = text.strip()
    if text:
        yield text


class Outline:
    """The heading path above the current text, as headings are met in order.

    The first heading that repeats the document's title (a DocBook page's h2, a Markdown file's "# Title")
    is the title, not a section: the path holds only the headings below it.
    """

    def __init__(self, title: str):
        self._title = title.casefold()
        self._title_seen = False
        self._open: list[tuple[int, str]] = []

    def heading(self, level: int, text: str) -> None:
        text = title_line(text)
        if not text:
            return
        if not self._title_seen and not self._open and text.casefold() == self._title:
            self._title_seen = True
            return
        while self._open and self._open[-1][0] >= level:
            self._open.pop()
        self._open.append((level, text))

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(text for _, text in self._open)


def blocks_of(
    text: str,
    section: tuple[str, ...],
    page: int | None = None,
    *,
    kind: BlockKind = BlockKind.PROSE,
    order: int | None = None,
) -> Iterator[Block]:
    """`text` as one block of `kind`, or several when it is longer than `MAX_BLOCK_CHARS`."""
    for piece in split_long(text):
        yield Block(piece, section, page, kind, order)


def table_blocks(rows: Iterable[tuple[str, BlockKind]], section: tuple[str, ...], number: int) -> Iterator[Block]:
    """A table's rows (text, TABLE_HEAD or TABLE) as blocks of their kinds, each carrying the table's `number` in its
    document, so that two tables in a row are never read as one."""
    for kind, run in groupby(rows, key=itemgetter(1)):
        yield from blocks_of("\n".join(text for text, _ in run), section, kind=kind, order=number)
