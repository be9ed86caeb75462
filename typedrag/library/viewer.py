"""The original of a passage, as a reader sees it, with the passage highlighted.

- HTML is sanitised with nh3 (Ammonia): no script, style, form, image or frame, no event handler or id of its
  own, links only to http(s) and mail addresses, never served raw; Markdown is rendered by markdown-it (raw HTML
  in it left as text) and sanitised the same way; plain text, reStructuredText and DOCX are shown as their text.
- The passage is found in the document by its words (a passage holds its document's words in order: the chunker
  only drops markup and spacing) and each stretch of text it covers is wrapped in `<mark class="passage">`, the
  first with id "passage" so the viewer can scroll to it.
- A PDF is shown a page at a time, rendered by PDFium (pypdfium2, the library that reads it); the passage's words
  are found among the page's characters, and their boxes come back as fractions of the page for the viewer to
  draw over the image.
- A gzipped original ("intro.md.gz") is shown as the document inside, uncompressed into a temporary copy.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nh3

from typedrag.corpus.formats.common import Unreadable
from typedrag.corpus.formats.detect import Kind, choose
from typedrag.corpus.formats.gunzip import uncompressed

VIEW_MAX_BYTES = 20 << 20  # a text original larger than this is not shown whole (its passage is)
PAGE_MAX_PIXELS = 1600  # the longer side of a rendered PDF page
ANCHOR_WORDS = 6  # words in a row that pin where a passage starts or ends in its document
ANCHOR_TRIES = 24  # anchors tried from each end (a word the reader repaired, a hyphenation, ...)
_WORD = re.compile(r"\w+")
_START, _END = "\ue000", "\ue001"  # private-use characters marking the passage while the tree is serialised

TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "caption",
    "cite",
    "code",
    "dd",
    "del",
    "details",
    "dfn",
    "div",
    "dl",
    "dt",
    "em",
    "figcaption",
    "figure",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "ins",
    "kbd",
    "li",
    "mark",
    "ol",
    "p",
    "pre",
    "q",
    "s",
    "samp",
    "section",
    "small",
    "span",
    "strong",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "u",
    "ul",
    "var",
    "article",
    "aside",
    "header",
    "footer",
    "main",
    "nav",
    "tt",
}
GONE_WITH_CONTENT = {
    "script",
    "style",
    "title",
    "noscript",
    "template",
    "iframe",
    "object",
    "embed",
    "svg",
    "math",
    "head",
    "textarea",
    "select",
    "button",
}
ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan"},
    "ol": {"start"},
    "mark": {"class", "id"},
}


def _keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    """Links only to other sites or mail: a relative link would lead to a page of the manual that is not here."""
    if tag == "a" and attribute == "href" and not value.lower().startswith(("http://", "https://", "mailto:")):
        return None
    if tag == "mark" and ((attribute == "class" and value != "passage") or (attribute == "id" and value != "passage")):
        return None
    return value


def sanitise(markup: str) -> str:
    return nh3.clean(
        markup,
        tags=TAGS,
        clean_content_tags=GONE_WITH_CONTENT,
        attributes=ATTRIBUTES,
        attribute_filter=_keep_attribute,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def words_of(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


def locate(passage: list[str], document: list[str]) -> tuple[int, int] | None:
    """(first, last) word of `document` that the passage's words cover, or None when they are not found: the
    passage's first and last runs of ANCHOR_WORDS words are looked up (the next ones in if a run is not there),
    and the pair whose span is nearest the passage's length wins."""
    n = len(passage)
    if not n or not document:
        return None
    k = min(ANCHOR_WORDS, n)
    grams: dict[tuple[str, ...], list[int]] = {}
    for i in range(len(document) - k + 1):
        grams.setdefault(tuple(document[i : i + k]), []).append(i)
    starts = sorted(
        {
            max(0, at - offset)
            for offset in range(min(ANCHOR_TRIES, n - k + 1))
            for at in grams.get(tuple(passage[offset : offset + k]), ())
        }
    )
    ends = sorted(
        {
            min(len(document) - 1, at + k - 1 + offset)
            for offset in range(min(ANCHOR_TRIES, n - k + 1))
            for at in grams.get(tuple(passage[n - k - offset : n - offset]), ())
        }
    )
    if not starts and not ends:
        return None
    if not starts:
        starts = [max(0, end - n + 1) for end in ends]
    if not ends:
        ends = [min(len(document) - 1, start + n - 1) for start in starts]
    pairs = [(s, e) for s in starts for e in ends if s <= e <= s + 2 * n + 20]
    if not pairs:
        return None
    return min(pairs, key=lambda pair: (abs(pair[1] - pair[0] + 1 - n), pair[0]))


def highlight(fragment: str, passage_text: str | None) -> tuple[str, bool]:
    """The sanitised HTML `fragment` with the passage's text wrapped in marks; (html, whether it was found)."""
    import lxml.html

    if not passage_text:
        return fragment, False
    root = lxml.html.fragment_fromstring(
        fragment.replace(_START, "").replace(_END, "") or "<p></p>", create_parent="div"
    )
    segments = list(_text_segments(root))
    spans: list[tuple[int, int, int]] = []  # (segment, start, end) of each word
    for number, (owner, slot) in enumerate(segments):
        for match in _WORD.finditer(getattr(owner, slot) or ""):
            spans.append((number, match.start(), match.end()))
    document = [(getattr(segments[s][0], segments[s][1]) or "")[a:b].casefold() for s, a, b in spans]
    found = locate(words_of(passage_text), document)
    if found is None:
        return fragment, False
    first, last = spans[found[0]], spans[found[1]]
    for number in range(first[0], last[0] + 1):
        owner, slot = segments[number]
        text = getattr(owner, slot) or ""
        start = first[1] if number == first[0] else 0
        end = last[2] if number == last[0] else len(text)
        if not text[start:end].strip():
            continue
        setattr(owner, slot, text[:start] + _START + text[start:end] + _END + text[end:])
    marked = lxml.html.tostring(root, encoding="unicode")
    marked = (
        marked.replace(_START, '<mark class="passage" id="passage">', 1)
        .replace(_START, '<mark class="passage">')
        .replace(_END, "</mark>")
    )
    return sanitise(marked), True


def _text_segments(root) -> Iterator[tuple[Any, str]]:
    """Every piece of text under `root` in reading order, as (element, "text" or "tail"); no recursion."""
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        element, closing = stack.pop()
        if closing:
            if element is not root and element.tail:
                yield element, "tail"
            continue
        if not isinstance(element.tag, str):  # a comment or processing instruction: its tail only
            if element.tail:
                yield element, "tail"
            continue
        if element.text:
            yield element, "text"
        stack.append((element, True))
        stack.extend((child, False) for child in reversed(element))


def kind_of(path: Path, name: str) -> Kind:
    try:
        return choose(path, name)
    except Unreadable:
        return Kind.TEXT


def view(
    path: Path, name: str, passage_text: str | None, first: int | None = None, last: int | None = None
) -> dict[str, Any]:
    """What the viewer shows of document `path` (named `name`): `render`'s view, with a PDF's pages that hold the
    passage (pages `first`..`last`, or the first page) and whether it was found on them."""
    try:
        with uncompressed(path, name) as (plain, plain_name):
            shown = render(plain, plain_name, passage_text)
            if shown["kind"] == "pdf":
                pages = range(first, (last or first) + 1) if first else range(1, 2)
                shown["pages"] = [
                    pdf_page(plain, n, passage_text, first, last) for n in pages if 1 <= n <= shown["page_count"]
                ]
                shown["located"] = any(p["boxes"] for p in shown["pages"])
    except Unreadable as error:
        return {"kind": "none", "note": f"the original cannot be shown: {error.reason.removesuffix(', skipped')}"}
    return shown


def render(path: Path, name: str, passage_text: str | None) -> dict[str, Any]:
    """How the viewer shows document `path` (named `name`): {"kind": "html", "html", "located"} for every text-like
    document, {"kind": "pdf", "page_count"} for a PDF (its pages come from `pdf_page`)."""
    kind = kind_of(path, name)
    if kind is Kind.PDF:
        import pypdfium2 as pdfium

        pdf = pdfium.PdfDocument(str(path))
        try:
            return {"kind": "pdf", "format": kind.value, "page_count": len(pdf)}
        finally:
            pdf.close()
    if kind is Kind.DOCX:
        body = _docx_html(path, name)
    else:
        if path.stat().st_size > VIEW_MAX_BYTES:
            return {
                "kind": "none",
                "format": kind.value,
                "note": f"the original is over {VIEW_MAX_BYTES >> 20} MB: only the passage is shown",
            }
        text = _decoded(path.read_bytes())
        if kind is Kind.HTML:
            body = sanitise(text)
        elif kind is Kind.MARKDOWN:
            from markdown_it import MarkdownIt

            body = sanitise(MarkdownIt("commonmark", {"html": False}).enable("table").render(text))
        else:
            body = f'<pre class="original-text">{html.escape(text)}</pre>'
    marked, located = highlight(body, passage_text)
    return {"kind": "html", "format": kind.value, "html": marked, "located": located}


def _decoded(data: bytes) -> str:
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")


def _docx_html(path: Path, name: str) -> str:
    """A DOCX as its text: the paragraphs, headings, items and tables typedrag's reader takes from it."""
    from typedrag.corpus.readers import SourceFile, read_file
    from typedrag.records import BlockKind, table_cells

    parts, section, table = [], (), None  # table: the number of the table whose rows are being written
    for doc in read_file(SourceFile(path, name, name), strict=False, problems=[]):
        parts.append(f"<h1>{html.escape(doc.title)}</h1>")
        for block in doc.iter_blocks():
            if table is not None and (
                block.kind not in (BlockKind.TABLE, BlockKind.TABLE_HEAD) or block.order != table
            ):
                parts.append("</table>")
                table = None
            if block.section != section and block.section:
                parts.append(f"<h2>{html.escape(' › '.join(block.section))}</h2>")
            section = block.section
            if block.kind in (BlockKind.TABLE, BlockKind.TABLE_HEAD):  # a table as a table, its head as its header
                if table is None:
                    parts.append("<table>")
                    table = block.order
                cell = "th" if block.kind is BlockKind.TABLE_HEAD else "td"
                for row in block.text.split("\n"):
                    cells = "".join(f"<{cell}>{html.escape(text)}</{cell}>" for text in table_cells(row))
                    parts.append(f"<tr>{cells}</tr>")
                continue
            tag = "pre" if block.kind is BlockKind.CODE else "p"
            parts.append(f"<{tag}>{html.escape(block.text)}</{tag}>")
    if table is not None:
        parts.append("</table>")
    return "\n".join(parts)


def pdf_page(
    path: Path, number: int, passage_text: str | None = None, first: int | None = None, last: int | None = None
) -> dict[str, Any]:
    """Page `number` (1-based) of a PDF: its size, and the boxes (fractions of the page: left, top, width, height) of
    the passage's text on it, when the passage (on pages `first`..`last`) is found there."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(path))
    try:
        if not 1 <= number <= len(pdf):
            raise IndexError(f"no page {number}: the PDF has {len(pdf)} pages")
        page = pdf[number - 1]
        width, height = page.get_size()
        boxes: list[list[float]] = []
        if passage_text and first is not None and first <= number <= (last or first):
            boxes = _passage_boxes(pdf, number, passage_text, first, last or first, width, height)
        return {"number": number, "page_count": len(pdf), "width": width, "height": height, "boxes": boxes}
    finally:
        pdf.close()


def _passage_boxes(
    pdf, number: int, passage_text: str, first: int, last: int, width: float, height: float
) -> list[list[float]]:
    """The passage's words are found across its pages' text (hyphenation and headers aside), and the boxes of
    the characters they cover on page `number` are returned."""
    texts, words = {}, []  # words: (page, start char, end char, word)
    for page_number in range(first, last + 1):
        if not 1 <= page_number <= len(pdf):
            continue
        textpage = pdf[page_number - 1].get_textpage()
        text = textpage.get_text_range()
        texts[page_number] = textpage
        words.extend((page_number, m.start(), m.end(), m.group().casefold()) for m in _WORD.finditer(text))
    found = locate(words_of(passage_text), [w[3] for w in words])
    if found is None or number not in texts:
        return []
    covered = [w for w in words[found[0] : found[1] + 1] if w[0] == number]
    if not covered:
        return []
    textpage = texts[number]
    start, end = covered[0][1], covered[-1][2]
    boxes = []
    for i in range(textpage.count_rects(start, end - start)):
        left, bottom, right, top = textpage.get_rect(i)
        boxes.append(
            [
                round(left / width, 4),
                round((height - top) / height, 4),
                round((right - left) / width, 4),
                round((top - bottom) / height, 4),
            ]
        )
    return boxes


def pdf_page_png(path: Path, name: str, number: int) -> bytes:
    """Page `number` (1-based) of the PDF `path` (named `name`: a gzipped one is read uncompressed) rendered as a
    PNG, its longer side PAGE_MAX_PIXELS at most."""
    import pypdfium2 as pdfium

    with uncompressed(path, name) as (plain, _):
        pdf = pdfium.PdfDocument(str(plain))
        try:
            if not 1 <= number <= len(pdf):
                raise IndexError(f"no page {number}: the PDF has {len(pdf)} pages")
            page = pdf[number - 1]
            scale = min(2.0, PAGE_MAX_PIXELS / max(page.get_size()))
            image = page.render(scale=scale).to_pil()
            out = io.BytesIO()
            image.save(out, format="PNG", optimize=False)
            return out.getvalue()
        finally:
            pdf.close()
