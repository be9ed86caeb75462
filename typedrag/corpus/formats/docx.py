"""Word DOCX files with python-docx: paragraphs, headings ("Heading 1".. styles) as sections, lists and tables.

The body is read in document order, paragraphs and tables interleaved; page headers and footers
(the running text of every page) are not part of it. python-docx holds every part of the package in
memory, so the sizes its zip declares are checked first (a 1 MB file can declare a 1 GB part), and
paragraph styles are looked up in one map per document (python-docx searches every style per paragraph).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docx
from docx.enum.style import WD_STYLE_TYPE
from docx.opc.exceptions import PackageNotFoundError
from docx.oxml.ns import qn
from docx.table import Table, _Row
from docx.text.paragraph import Paragraph
from lxml.etree import LxmlError

from typedrag.corpus.formats.common import (
    Outline,
    Parsed,
    Unreadable,
    blocks_of,
    clean,
    one_line,
    table_blocks,
    title_line,
)
from typedrag.records import Block, BlockKind, table_row

_HEADING = re.compile(r"^heading\s*(\d)$", re.I)
# What the zip may declare, uncompressed: one part, all parts, and how many times a large part may expand
# (Word's XML deflates 5-20 fold; a zip bomb a thousand fold).
LARGEST_PART = 128 << 20
LARGEST_TOTAL = 512 << 20
LARGEST_RATIO = 200


def read_docx(path: Path, fallback_title: str | None = None) -> Parsed:
    """The document at `path`; `fallback_title` (else the file name) when it has no title of its own."""
    document = _open(path)
    fallback = title_line(path.stem) if fallback_title is None else fallback_title
    title = (
        title_line(document.core_properties.title or "") or _title_paragraph(document, _Styles(document)) or fallback
    )
    return Parsed(title, _blocks(path, title))


def check_sizes(path: Path) -> None:
    """`Unreadable` when the package declares more than python-docx should hold in memory."""
    try:
        with zipfile.ZipFile(path) as archive:
            parts = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return  # python-docx says what is wrong with it
    for part in parts:
        if part.file_size > LARGEST_PART:
            raise Unreadable(
                f"too large: its part {part.filename} holds {part.file_size >> 20:,} MB uncompressed, skipped"
            )
        if part.file_size > 1 << 20 and part.file_size > LARGEST_RATIO * max(part.compress_size, 1):
            ratio = part.file_size // max(part.compress_size, 1)
            raise Unreadable(f"its part {part.filename} expands {ratio:,}-fold (a zip bomb?), skipped")
    total = sum(part.file_size for part in parts)
    if total > LARGEST_TOTAL:
        raise Unreadable(f"too large: {total >> 20:,} MB uncompressed, skipped")


def _open(path: Path) -> docx.document.Document:
    check_sizes(path)
    try:
        return docx.Document(str(path))
    except zipfile.BadZipFile as e:
        raise Unreadable(f"corrupt DOCX ({e}), skipped") from None
    except KeyError as e:  # a zip without the part a Word document must have
        raise Unreadable(f"corrupt DOCX (missing {e}), skipped") from None
    except (PackageNotFoundError, LxmlError, ValueError, EOFError, zipfile.LargeZipFile) as e:
        raise Unreadable(f"corrupt DOCX ({type(e).__name__}: {str(e)[:120]}), skipped") from None


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
# Paragraph styles Word and LibreOffice use for code.
_CODE_STYLES = frozenset({"html preformatted", "macro text", "plain text", "preformatted text", "source text"})


class _Styles:
    """Paragraph style names by style id, read once: what `Paragraph.style.name` gives, without its search; and
    the list (numbering id and level) a style numbers its paragraphs in ("List Number")."""

    def __init__(self, document: docx.document.Document):
        self.names: dict[str, str] = {}
        self.numbering: dict[str, tuple[str, int]] = {}
        self.default = ""
        try:
            for style in document.styles:
                if style.type == WD_STYLE_TYPE.PARAGRAPH and style.style_id:
                    self.names.setdefault(style.style_id, style.name or "")
                    if style._element.default:  # the last default style is the default, as Word reads it
                        self.default = style.name or ""
                    if numbered := _numbering_of(style._element.pPr):
                        self.numbering.setdefault(style.style_id, numbered)
        except (KeyError, AttributeError, ValueError):
            pass

    def of(self, paragraph: Paragraph) -> str:
        style_id = paragraph._p.style
        return self.names.get(style_id, self.default) if style_id else self.default

    def list_of(self, paragraph: Paragraph) -> tuple[str, int] | None:
        """(numbering id, level) of the list the paragraph is an item of, by its own numbering or its style's."""
        own = _numbering_of(paragraph._p.pPr)
        if own is not None:
            return own if own[0] != "0" else None  # numId 0: numbering switched off
        return self.numbering.get(paragraph._p.style or "")


def _numbering_of(properties) -> tuple[str, int] | None:
    """(numId, ilvl) of a `w:pPr`'s `w:numPr`, if it has one."""
    numbering = properties.find(f"{_W}numPr") if properties is not None else None
    if numbering is None:
        return None
    number, level = numbering.find(f"{_W}numId"), numbering.find(f"{_W}ilvl")
    level_value = level.get(f"{_W}val", "0") if level is not None else "0"
    if number is None or not level_value.isdigit():
        return None
    return number.get(f"{_W}val", "0"), int(level_value)


class _Numbering:
    """The lists of a document: whether each list level is ordered (by its number format), and each item's
    number as they come (a level counts from its start; an item restarts the levels below it)."""

    def __init__(self, document: docx.document.Document):
        self.levels: dict[tuple[str, int], tuple[bool, int]] = {}  # (numId, level) -> (ordered, start)
        self.counts: dict[tuple[str, int], int] = {}
        try:
            numbering = document.part.numbering_part.element
        except (NotImplementedError, KeyError, AttributeError, ValueError):
            return
        abstract = {
            definition.get(f"{_W}abstractNumId"): {
                int(level.get(f"{_W}ilvl", "0")): _level_format(level)
                for level in definition.iter(f"{_W}lvl")
                if level.get(f"{_W}ilvl", "0").isdigit()
            }
            for definition in numbering.iter(f"{_W}abstractNum")
        }
        for instance in numbering.iter(f"{_W}num"):
            source = instance.find(f"{_W}abstractNumId")
            levels = abstract.get(source.get(f"{_W}val") if source is not None else None, {})
            for level, format_ in levels.items():
                self.levels[(instance.get(f"{_W}numId", ""), level)] = format_

    def order(self, numbered: tuple[str, int] | None, style: str) -> int | None:
        """The item's number in an ordered list, None in a bulleted one. Without numbering, a "List Number"
        style counts its consecutive paragraphs."""
        if numbered is None:
            numbered, ordered, start = ("style:" + style, 0), "number" in style.lower(), 1
        else:
            ordered, start = self.levels.get(numbered, (False, 1))
        number_id, level = numbered
        for deeper in [key for key in self.counts if key[0] == number_id and key[1] > level]:
            del self.counts[deeper]
        if not ordered:
            return None
        self.counts[numbered] = self.counts.get(numbered, start - 1) + 1
        return self.counts[numbered]

    def interrupted(self) -> None:
        """A paragraph that is no list item: a "List Number" style without numbering starts again after it."""
        for key in [key for key in self.counts if key[0].startswith("style:")]:
            del self.counts[key]


def _level_format(level) -> tuple[bool, int]:
    """(ordered, start) of a `w:lvl`: ordered unless its format is a bullet or none."""
    format_, start = level.find(f"{_W}numFmt"), level.find(f"{_W}start")
    ordered = format_ is not None and format_.get(f"{_W}val", "bullet") not in ("bullet", "none")
    value = start.get(f"{_W}val", "1") if start is not None else "1"
    return ordered, int(value) if value.isdigit() and len(value) < 9 else 1


def _title_paragraph(document: docx.document.Document, styles: _Styles) -> str:
    return next((title_line(p.text) for p in document.paragraphs if styles.of(p) == "Title" and p.text.strip()), "")


def _blocks(path: Path, title: str) -> Iterator[Block]:
    """Each paragraph a block of its kind (a list item with its number, code, a caption, prose), each table one."""
    outline = Outline(title)
    document = _open(path)
    styles, numbering = _Styles(document), _Numbering(document)
    tables = 0  # each table's head and rows carry its number
    for part in document.iter_inner_content():
        if isinstance(part, Table):
            numbering.interrupted()
            tables += 1
            yield from table_blocks(_table_rows(part), outline.path, tables)
            continue
        text = clean(part.text).strip()
        style = styles.of(part)
        level = 0 if style == "Title" else int(m.group(1)) if (m := _HEADING.match(style)) else None
        listed = styles.list_of(part)
        if level is not None:
            numbering.interrupted()
            outline.heading(level, text)
        elif listed is not None or style.startswith("List"):
            order = numbering.order(listed, style)
            if text:
                yield from blocks_of("- " + text, outline.path, kind=BlockKind.ITEM, order=order)
        else:
            if text:
                numbering.interrupted()
                yield from blocks_of(text, outline.path, kind=_paragraph_kind(style))


def _paragraph_kind(style: str) -> BlockKind:
    name = style.casefold()
    if name == "caption":
        return BlockKind.CAPTION
    if name in _CODE_STYLES or "code" in name:
        return BlockKind.CODE
    return BlockKind.PROSE


def _table_rows(table: Table) -> Iterator[tuple[str, BlockKind]]:
    """Each row as a line, "cell | cell" (TABLE), a merged cell (which python-docx repeats) written once; a first row
    marked as the table's header (Word's "Repeat as header row") is its head (TABLE_HEAD)."""
    for number, row in enumerate(table.rows):
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) not in seen:
                seen.add(id(cell._tc))
                cells.append(one_line(cell.text))
        if any(cells):
            head = number == 0 and len(cells) > 1 and _is_header(row)
            yield table_row(cells), BlockKind.TABLE_HEAD if head else BlockKind.TABLE


def _is_header(row: _Row) -> bool:
    """Whether Word repeats `row` at the top of each page as its table's header (`w:tblHeader`)."""
    properties = row._tr.trPr
    marked = properties.find(qn("w:tblHeader")) if properties is not None else None
    return marked is not None and marked.get(qn("w:val"), "true") not in ("0", "false", "off")
