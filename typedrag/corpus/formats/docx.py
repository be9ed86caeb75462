"""Word DOCX files with python-docx: paragraphs, headings ("Heading 1".. styles) as sections, lists and tables.

The body is read in document order, paragraphs and tables interleaved; page headers and footers
(the running text of every page) are not part of it.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docx
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml.etree import LxmlError

from typedrag.corpus.formats.common import Outline, Parsed, Unreadable, blocks_of, clean, one_line, title_line
from typedrag.records import Block

_HEADING = re.compile(r"^heading\s*(\d)$", re.I)


def read_docx(path: Path, fallback_title: str | None = None) -> Parsed:
    """The document at `path`; `fallback_title` (else the file name) when it has no title of its own."""
    document = _open(path)
    fallback = title_line(path.stem) if fallback_title is None else fallback_title
    title = title_line(document.core_properties.title or "") or _title_paragraph(document) or fallback
    return Parsed(title, _blocks(path, title))


def _open(path: Path) -> docx.document.Document:
    try:
        return docx.Document(str(path))
    except zipfile.BadZipFile as e:
        raise Unreadable(f"corrupt DOCX ({e}), skipped") from None
    except KeyError as e:  # a zip without the part a Word document must have
        raise Unreadable(f"corrupt DOCX (missing {e}), skipped") from None
    except (PackageNotFoundError, LxmlError, ValueError, EOFError, zipfile.LargeZipFile) as e:
        raise Unreadable(f"corrupt DOCX ({type(e).__name__}: {str(e)[:120]}), skipped") from None


def _style(paragraph: Paragraph) -> str:
    try:
        return paragraph.style.name if paragraph.style is not None else ""
    except (KeyError, AttributeError):
        return ""


def _title_paragraph(document: docx.document.Document) -> str:
    return next((title_line(p.text) for p in document.paragraphs if _style(p) == "Title" and p.text.strip()), "")


def _blocks(path: Path, title: str) -> Iterator[Block]:
    outline = Outline(title)
    items: list[str] = []  # consecutive list paragraphs: one block
    for part in _open(path).iter_inner_content():
        if isinstance(part, Table):
            yield from _flush(items, outline)
            yield from blocks_of(_table_text(part), outline.path)
            continue
        text = clean(part.text).strip()
        style = _style(part)
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
