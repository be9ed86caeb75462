"""PDF text layers, page by page, in reading order, with page numbers and (from bookmarks) sections.

pypdfium2 (Google's PDFium) opens the file by path and loads one page at a time, so a 300 MB manual
is read in bounded memory. PDFium gives the text as positioned segments; this module puts them in
reading order (a two-column page is read column by column), joins lines into paragraphs, repairs
words hyphenated at line ends, drops running headers and footers (a line at the top or bottom of a
page that repeats on a nearby page, ignoring digits, and bare page numbers) and follows the outline.

A PDF says little about structure; what it does tell is kept: a bookmarked heading's own line is a
heading, lines set in a typewriter font are code (their line breaks kept), a line that starts with
a bullet or a number ("•", "2.") starts a list item, and a line that ends in a leader of dots and a page
number is a table of contents' entry (navigation, a notice).
"""

from __future__ import annotations

import ctypes
import re
import statistics
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from typedrag.corpus.formats.common import Outline, Parsed, Unreadable, blocks_of, clean, one_line, title_line
from typedrag.records import Block, BlockKind

# PDFium keeps every object it has parsed (images included) until the document is closed: reopening it
# every so many pages bounds memory (a 300 MB PDF of scans: 321 MB peak RSS read in one go, 45 MB this way).
REOPEN_EVERY = 32
NEARBY_PAGES = 8  # a running header repeats within this many pages (chapter headers change every few pages)
EDGE_LINES = 2  # lines at the top and at the bottom of a page that may be running headers or footers
_PAGE_NUMBER = re.compile(r"^(?:page\s+)?(?:\d+|[ivxlcdm]+)(?:\s*(?:/|of)\s*\d+)?$", re.I)
_DIGITS = re.compile(r"\d+")
_HYPHENATED = re.compile(r"[a-zà-ÿ][-\u00ad\u2010]$")
_PDFIUM_HYPHENS = str.maketrans({"\x02": "\u00ad", "\ufffe": "\u00ad"})  # how PDFium marks a hyphen it thinks soft
# Typewriter fonts: Courier, DejaVu Sans Mono, Consolas, Inconsolata, TeX's CMTT / LMMono / SFTT ...
_MONOSPACE = re.compile(
    r"mono|courier|consol|inconsolata|typewriter|code|cmtt|cmsltt|sftt|lmtt|tt\d|pcrr|nimbusmono", re.I
)
_FIXED_PITCH = 1  # PDF font descriptor flag
# A contents entry: a title, a leader of dots, the page it starts on ("3.6 Redirections. . . . . . 38").
_CONTENTS_ENTRY = re.compile(r"(?:\.\s*){4,}(?:\d+|[ivxlcdm]+)$", re.I)
_ITEM = re.compile(r"^(?:[•◦▪▫■□●○‣⁃∙·*–-]|(\d{1,3})[.)]|\((\d{1,3})\))\s+\S")
_NOT_TITLES = re.compile(
    r"^(untitled|title|document|slide \d+|microsoft word.*|.*\.(pdf|docx?|tex|dvi|ps|rtf|odt|indd))$", re.I
)


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of text on one line, as PDFium cuts it, in PDF points (y grows upwards)."""

    text: str
    left: float
    bottom: float
    right: float
    top: float
    mono: bool = False  # set in a typewriter font


@dataclass(slots=True)
class Line:
    """Segments joined into one line of text, with the box around them."""

    text: str
    left: float
    bottom: float
    right: float
    top: float
    column_start: bool = False  # the first line of a column or band: always starts a paragraph
    mono: bool = False  # every segment set in a typewriter font: a line of code

    @property
    def height(self) -> float:
        return self.top - self.bottom


@dataclass(frozen=True, slots=True)
class Bookmark:
    """An outline entry: where a section starts (page and height) and how deep it sits."""

    level: int
    title: str
    page: int  # 0-based
    y: float  # top of the destination; +inf when the bookmark names only the page


def read_pdf(path: Path, fallback_title: str | None = None) -> Parsed:
    """The PDF at `path`; `fallback_title` (else the file name) when neither its metadata nor its first page give one."""
    first = _first_page_with_text(path)
    if first is None:
        raise Unreadable("no text layer; OCR it first")
    pdf = open_pdf(path)
    skipped: list[str] = []
    try:
        fallback = title_line(path.stem) if fallback_title is None else fallback_title
        title = _meaningful(pdf.get_metadata_dict().get("Title", "")) or _largest_text(pdf, first) or fallback
        bookmarks = _bookmarks(pdf)
    finally:
        pdf.close()
    return Parsed(title, _blocks(path, title, bookmarks, skipped), skipped)


def _documents(path: Path) -> Iterator[tuple[int, pdfium.PdfDocument]]:
    """(page index, the document open at it) for every page, reopening the document every REOPEN_EVERY pages."""
    pdf = open_pdf(path)
    try:
        for index in range(len(pdf)):
            if index and index % REOPEN_EVERY == 0:
                pdf.close()
                pdf = open_pdf(path)
            yield index, pdf
    finally:
        pdf.close()


def open_pdf(path: Path) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as e:
        error = pdfium_c.FPDF_GetLastError()
        if error in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
            raise Unreadable("encrypted PDF, skipped") from None
        if error == pdfium_c.FPDF_ERR_FILE:
            raise Unreadable("cannot open the PDF file") from None
        raise Unreadable(f"corrupt PDF ({str(e).rstrip('.')}), skipped") from None


def _first_page_with_text(path: Path) -> int | None:
    """The index of the first page with text; None if none has. A page PDFium cannot load (a page tree that
    lists itself) is passed over; `Unreadable` if no page loads."""
    pages = loaded = 0
    for index, pdf in _documents(path):
        pages += 1
        try:
            page = pdf[index]
        except pdfium.PdfiumError:
            continue
        loaded += 1
        textpage = page.get_textpage()
        try:
            if textpage.get_text_range().strip():
                return index
        finally:
            textpage.close()
            page.close()
    if pages and not loaded:
        raise Unreadable("corrupt PDF (no page can be loaded), skipped")
    return None


def _meaningful(title: str) -> str:
    title = title_line(title or "")
    return title if len(title) >= 3 and any(c.isalpha() for c in title) and not _NOT_TITLES.match(title) else ""


def _largest_text(pdf: pdfium.PdfDocument, index: int) -> str:
    """The run of the largest characters on the first page with text, when it stands out: the title."""
    page = pdf[index]
    textpage = page.get_textpage()
    try:
        count = textpage.count_chars()
        sizes = [pdfium_c.FPDFText_GetFontSize(textpage.raw, i) for i in range(count)]
        visible = [s for s in sizes if s > 0]
        if not visible or max(visible) < 1.3 * statistics.median(visible):
            return ""
        biggest = max(visible) * 0.95
        start = next(i for i, s in enumerate(sizes) if s >= biggest)
        end = start
        while end < count and (sizes[end] >= biggest or sizes[end] == 0 or textpage.get_text_range(end, 1).isspace()):
            end += 1
        title = title_line(textpage.get_text_range(start, end - start))
        return title if 3 <= len(title) <= 200 else ""
    finally:
        textpage.close()
        page.close()


def _bookmarks(pdf: pdfium.PdfDocument) -> list[Bookmark]:
    """The outline in document order; an entry pointing back before the previous one is dropped."""
    marks: list[Bookmark] = []
    try:
        for item in pdf.get_toc(max_depth=8):
            dest = item.get_dest()
            page = dest.get_index() if dest is not None else None
            if page is None:
                continue
            _, view = dest.get_view()
            y = view[1] if len(view) >= 2 and view[1] else float("inf")
            mark = Bookmark(item.level, one_line(item.get_title() or ""), page, y)
            if mark.title and (not marks or (page, -y) >= (marks[-1].page, -marks[-1].y)):
                marks.append(mark)
    except pdfium.PdfiumError:
        return []
    return marks


def _blocks(path: Path, title: str, bookmarks: list[Bookmark], skipped: list[str]) -> Iterator[Block]:
    sections = _Sections(title, bookmarks)
    unloaded: list[int] = []
    for number, lines in _pages_without_running_lines(path, unloaded):
        yield from _paragraph_blocks(lines, number, sections)
    if len(unloaded) == 1:
        skipped.append(f"page {unloaded[0]} cannot be loaded, skipped")
    elif unloaded:
        numbers = ", ".join(map(str, unloaded[:3])) + (", ..." if len(unloaded) > 3 else "")
        skipped.append(f"{len(unloaded):,} pages cannot be loaded (pages {numbers}), skipped")


def _pages_without_running_lines(path: Path, unloaded: list[int]) -> Iterator[tuple[int, list[Line]]]:
    """(page number, lines) for each page, minus running headers and footers; reads NEARBY_PAGES ahead.
    A page PDFium cannot load has no lines, and its number goes to `unloaded`."""
    window: deque[tuple[int, list[Line], list[Line]]] = deque(maxlen=2 * NEARBY_PAGES + 1)
    ready = 1  # the next page number to hand out
    for index, pdf in _documents(path):
        try:
            lines = page_lines(pdf, index)
        except pdfium.PdfiumError:
            unloaded.append(index + 1)
            lines = []
        window.append((index + 1, lines, _edges(lines)))
        while ready <= index + 1 - NEARBY_PAGES:
            yield _without_running(window, ready)
            ready += 1
    while window and ready <= window[-1][0]:
        yield _without_running(window, ready)
        ready += 1


def _edges(lines: list[Line]) -> list[Line]:
    by_height = sorted(lines, key=lambda line: -line.top)
    return by_height[:EDGE_LINES] + by_height[EDGE_LINES:][-EDGE_LINES:]


def _shape(text: str) -> str:
    return _DIGITS.sub("#", " ".join(text.split()).casefold())


def _without_running(window: deque[tuple[int, list[Line], list[Line]]], number: int) -> tuple[int, list[Line]]:
    position = number - window[0][0]
    _, lines, edges = window[position]
    elsewhere = {_shape(line.text) for i, (_, _, other) in enumerate(window) if i != position for line in other}
    running = {id(line) for line in edges if _PAGE_NUMBER.match(line.text) or _shape(line.text) in elsewhere}
    return number, [line for line in lines if id(line) not in running]


def page_lines(pdf: pdfium.PdfDocument, index: int) -> list[Line]:
    """The page's text lines in reading order."""
    page = pdf[index]
    textpage = page.get_textpage()
    try:
        width = page.get_width()
        segments = []
        for i in range(textpage.count_rects()):
            left, bottom, right, top = textpage.get_rect(i)
            text = textpage.get_text_bounded(left, bottom, right, top).translate(_PDFIUM_HYPHENS)
            text = clean(text).replace("\n", " ")
            if text.strip():
                segments.append(Segment(text, left, bottom, right, top, _monospace(textpage, left, bottom, top)))
    finally:
        textpage.close()
        page.close()
    return reading_order(segments, width)


def _monospace(textpage: pdfium.PdfTextPage, left: float, bottom: float, top: float) -> bool:
    """Whether the segment's first character is set in a typewriter font (by its fixed-pitch flag or its name)."""
    index = pdfium_c.FPDFText_GetCharIndexAtPos(textpage.raw, left + 1, (bottom + top) / 2, 2, 2)
    if index < 0:
        return False
    flags, name = ctypes.c_int(0), ctypes.create_string_buffer(96)
    pdfium_c.FPDFText_GetFontInfo(textpage.raw, index, name, len(name), ctypes.byref(flags))
    return bool(flags.value & _FIXED_PITCH) or _MONOSPACE.search(name.value.decode("latin-1")) is not None


def reading_order(segments: list[Segment], width: float) -> list[Line]:
    """Lines top to bottom; where the page has two columns, the left column's lines before the right's.

    Segments that cross the gutter (a title over both columns, a wide figure caption) cut the page into
    bands, each read column by column.
    """
    gutter = _gutter(segments, width)
    if gutter is None:
        return _lines(segments)
    ordered: list[Line] = []
    band_left: list[Segment] = []
    band_right: list[Segment] = []
    for segment in sorted(segments, key=lambda s: (-s.top, s.left)):
        if segment.right <= gutter:
            band_left.append(segment)
        elif segment.left >= gutter:
            band_right.append(segment)
        else:
            ordered += _lines(band_left) + _lines(band_right) + _lines([segment])
            band_left, band_right = [], []
    return ordered + _lines(band_left) + _lines(band_right)


def _gutter(segments: list[Segment], width: float) -> float | None:
    """The x of a vertical gap between two columns of prose, or None for a one-column page.

    Both sides must hold at least four wide segments (a table's short cells do not make columns), and
    at most a fifth of the segments may cross the gap.
    """
    if len(segments) < 8:
        return None
    best, best_crossing = None, len(segments) // 5 + 1
    for x in range(int(width * 0.3), int(width * 0.7), 2):
        crossing = sum(1 for s in segments if s.left < x < s.right)
        if crossing < best_crossing:
            best, best_crossing = x, crossing
    if best is None:
        return None
    left = [s.right - s.left for s in segments if s.right <= best]
    right = [s.right - s.left for s in segments if s.left >= best]
    wide = width * 0.2
    if len(left) < 4 or len(right) < 4 or statistics.median(left) < wide or statistics.median(right) < wide:
        return None
    return best


def _lines(segments: list[Segment]) -> list[Line]:
    """Segments on the same line (their middles inside its first segment's height), left to right, lines top to bottom."""
    rows: list[list[Segment]] = []
    for segment in sorted(segments, key=lambda s: -s.top):
        middle = (segment.top + segment.bottom) / 2
        if rows and rows[-1][0].bottom <= middle <= rows[-1][0].top:
            rows[-1].append(segment)
        else:
            rows.append([segment])
    lines = [_line(sorted(row, key=lambda s: s.left)) for row in rows]
    if lines:
        lines[0].column_start = True
    return lines


def _line(row: list[Segment]) -> Line:
    text = row[0].text
    height = max(s.top - s.bottom for s in row)
    for before, segment in zip(row, row[1:]):
        # PDFium ends a segment with the space it saw; only a wide gap (table cells) needs one added
        wide = segment.left - before.right > height
        text += (" " if wide and not text.endswith(" ") else "") + segment.text
    return Line(
        text.strip(),
        min(s.left for s in row),
        min(s.bottom for s in row),
        max(s.right for s in row),
        max(s.top for s in row),
        mono=all(s.mono for s in row),
    )


class _Sections:
    """The section path along the document, from the bookmarks.

    A bookmark takes effect at the line of its page that holds its title; its destination's height
    is only the fallback, since generators often point every bookmark at the top of the page.
    """

    def __init__(self, title: str, bookmarks: list[Bookmark]):
        self.outline = Outline(title)
        self.pending = deque(bookmarks)

    def starts(self, page_index: int, lines: list[Line]) -> dict[int, list[Bookmark]]:
        """Line index -> the bookmarks that start there; bookmarks of earlier pages start at line 0."""
        starts: dict[int, list[Bookmark]] = {}
        position = 0
        texts = [line.text.casefold() for line in lines]
        while self.pending and self.pending[0].page <= page_index:
            mark = self.pending.popleft()
            if mark.page == page_index:
                title = mark.title.casefold()
                found = next((i for i in range(position, len(lines)) if title in texts[i]), None)
                if found is None:
                    found = next((i for i in range(position, len(lines)) if lines[i].top <= mark.y + 2), len(lines))
                position = found
            starts.setdefault(position, []).append(mark)
        return starts

    def enter(self, marks: list[Bookmark]) -> tuple[str, ...]:
        for mark in marks:
            self.outline.heading(mark.level + 1, mark.title)
        return self.outline.path


def _paragraph_blocks(lines: list[Line], number: int, sections: _Sections) -> Iterator[Block]:
    """Lines joined into paragraphs: a new one at a column start, a section start, a gap wider than a line, a list
    item's first line, and where typewriter lines (code, kept line by line) start or end."""
    usual = statistics.median(line.height for line in lines) if lines else 0
    starts = sections.starts(number - 1, lines)
    section = sections.enter(starts.pop(0, []))
    paragraph: list[Line] = []
    previous: Line | None = None
    for index, line in enumerate(lines):
        gap = previous.bottom - line.top if previous is not None else 0
        breaks = index in starts or line.column_start or gap > 0.8 * usual or gap < -usual
        contents = not line.mono and _CONTENTS_ENTRY.search(line.text)  # a table of contents: navigation, a notice
        if paragraph and (
            breaks or contents or line.mono != paragraph[-1].mono or (not line.mono and _ITEM.match(line.text))
        ):
            yield from _paragraph(paragraph, section, number)
            paragraph = []
        previous = line
        if index in starts:
            section = sections.enter(starts[index])
            if _holds_a_title(line, starts[index]):  # the heading's own line: a line of its own, not prose
                heading = len(line.text) <= max(len(mark.title) for mark in starts[index]) + 12  # "2.5 Missing values"
                yield from blocks_of(line.text, section, number, kind=BlockKind.HEADING if heading else BlockKind.PROSE)
                continue
        if contents:
            yield from blocks_of(line.text, section, number, kind=BlockKind.NOTICE)
            continue
        paragraph.append(line)
    if paragraph:
        yield from _paragraph(paragraph, section, number)
    sections.enter(starts.get(len(lines), []))


def _paragraph(lines: list[Line], section: tuple[str, ...], number: int) -> Iterator[Block]:
    if lines[0].mono:
        yield from blocks_of("\n".join(line.text for line in lines), section, number, kind=BlockKind.CODE)
        return
    text = _join([line.text for line in lines])
    if item := _ITEM.match(text):
        order = item.group(1) or item.group(2)
        yield from blocks_of(text, section, number, kind=BlockKind.ITEM, order=int(order) if order else None)
    else:
        yield from blocks_of(text, section, number)


def _holds_a_title(line: Line, marks: list[Bookmark]) -> bool:
    text = line.text.casefold()
    return any(mark.title.casefold() in text for mark in marks)


def _join(lines: list[str]) -> str:
    """A paragraph's lines joined with spaces (a PDF's line breaks are where the page ran out, not structure),
    a word hyphenated across two lines made whole ("infor-" + "mation").

    PDFium marks every hyphen that ends a line as soft; it stays a hyphen unless a lowercase letter
    goes on from it ("self-" + "Contained" keeps it).
    """
    text = lines[0]
    for line in lines[1:]:
        if _HYPHENATED.search(text) and line[:1].islower():
            text = text[:-1] + line
        else:
            text = text.removesuffix("\u00ad") + ("-" if text.endswith("\u00ad") else "") + " " + line
    return text.replace("\u00ad", "")
