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
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml.etree import LxmlError

from typedrag.corpus.formats.common import Outline, Parsed, Unreadable, blocks_of, clean, one_line, title_line
from typedrag.records import Block

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
    title = title_line(document.core_properties.title or "") or _title_paragraph(document, _Styles(document)) or fallback
    return Parsed(title, _blocks(path, title))


def _check_sizes(path: Path) -> None:
    """`Unreadable` when the package declares more than python-docx should hold in memory."""
    try:
        with zipfile.ZipFile(path) as archive:
            parts = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return  # python-docx says what is wrong with it
    for part in parts:
        if part.file_size > LARGEST_PART:
            raise Unreadable(f"too large: its part {part.filename} holds {part.file_size >> 20:,} MB uncompressed, skipped")
        if part.file_size > 1 << 20 and part.file_size > LARGEST_RATIO * max(part.compress_size, 1):
            ratio = part.file_size // max(part.compress_size, 1)
            raise Unreadable(f"its part {part.filename} expands {ratio:,}-fold (a zip bomb?), skipped")
    total = sum(part.file_size for part in parts)
    if total > LARGEST_TOTAL:
        raise Unreadable(f"too large: {total >> 20:,} MB uncompressed, skipped")


def _open(path: Path) -> docx.document.Document:
    _check_sizes(path)
    try:
        return docx.Document(str(path))
    except zipfile.BadZipFile as e:
        raise Unreadable(f"corrupt DOCX ({e}), skipped") from None
    except KeyError as e:  # a zip without the part a Word document must have
        raise Unreadable(f"corrupt DOCX (missing {e}), skipped") from None
    except (PackageNotFoundError, LxmlError, ValueError, EOFError, zipfile.LargeZipFile) as e:
        raise Unreadable(f"corrupt DOCX ({type(e).__name__}: {str(e)[:120]}), skipped") from None


class _Styles:
    """Paragraph style names by style id, read once: what `Paragraph.style.name` gives, without its search."""

    def __init__(self, document: docx.document.Document):
        self.names: dict[str, str] = {}
        self.default = ""
        try:
            for style in document.styles:
                if style.type == WD_STYLE_TYPE.PARAGRAPH and style.style_id:
                    self.names.setdefault(style.style_id, style.name or "")
                    if style._element.default:  # the last default style is the default, as Word reads it
                        self.default = style.name or ""
        except (KeyError, AttributeError, ValueError):
            pass

    def of(self, paragraph: Paragraph) -> str:
        style_id = paragraph._p.style
        return self.names.get(style_id, self.default) if style_id else self.default


def _title_paragraph(document: docx.document.Document, styles: _Styles) -> str:
    return next((title_line(p.text) for p in document.paragraphs if styles.of(p) == "Title" and p.text.strip()), "")


def _blocks(path: Path, title: str) -> Iterator[Block]:
    outline = Outline(title)
    items: list[str] = []  # consecutive list paragraphs: one block
    document = _open(path)
    styles = _Styles(document)
    for part in document.iter_inner_content():
        if isinstance(part, Table):
            yield from _flush(items, outline)
            yield from blocks_of(_table_text(part), outline.path)
            continue
        text = clean(part.text).strip()
        style = styles.of(part)
        level = 0 if style == "Title" else int(m.group(1)) if (m := _HEADING.match(style)) else None
        if level is not None:
            yield from _flush(items, outline)
            outline.heading(level, text)
        elif _is_list_item(part, style):
            if text:
                items.append("- " + text)
        else:
            yield from _flush(items, outline)
            if text:
                yield from blocks_of(text, outline.path)
    yield from _flush(items, outline)


def _is_list_item(paragraph: Paragraph, style: str) -> bool:
    properties = paragraph._p.pPr
    return style.startswith("List") or (properties is not None and properties.numPr is not None)


def _flush(items: list[str], outline: Outline) -> Iterator[Block]:
    if items:
        yield from blocks_of("\n".join(items), outline.path)
        items.clear()


def _table_text(table: Table) -> str:
    """One "cell | cell" line per row; a merged cell, which python-docx repeats, is written once."""
    rows = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            if text := one_line(cell.text):
                cells.append(text)
        if cells:
            rows.append(" | ".join(cells))
    return "\n".join(rows)
