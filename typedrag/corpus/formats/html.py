"""HTML pages: the main content only, with h1-h6 as the section path.

Parsed with selectolax (the Lexbor HTML5 engine): what a browser would build, from any tag soup,
without recursion in Python. Navigation (`<nav>`, DocBook's navheader/navfooter, Sphinx's
related/sphinxsidebar/footer, Publican's docnav, `role=navigation` ...), scripts and styles are cut
out before the walk; lists become "- item" lines, tables "cell | cell" rows, `<pre>` keeps its lines.

Each block has the kind the markup says: a list item (its position in an ordered list), `<pre>` and
API signatures as code (but `<pre class="text">`, prose a page lays out by hand, as prose paragraphs), table rows, a caption, a note or warning box (Sphinx and DocBook admonitions,
DocBook sidebars), a notice (a legal notice, a table of contents left in the page), else prose.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser, LexborNode

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
from typedrag.corpus.formats.detect import looks_binary
from typedrag.records import PROSE_LINE, Block, BlockKind, LineKind, table_row

LARGEST = 256 << 20  # bytes: a page is parsed whole, so a bigger file is refused rather than swapped through

BOILERPLATE = ", ".join(
    [
        "script",
        "style",
        "noscript",
        "template",
        "iframe",
        "object",
        "embed",
        "svg",
        "canvas",
        "button",
        "select",
        "textarea",
        "input",
        "nav",
        "aside",
        "footer",
        "body > header",
        "header[role=banner]",
        "[role=navigation]",
        "[role=search]",
        "[role=banner]",
        "[role=contentinfo]",
        "[role=complementary]",
        "[aria-hidden=true]",
        "[hidden]",
        # Bootstrap's menus are hidden until their toggle is clicked: HAProxy's manuals put one after each keyword
        # named in a sentence ("ca-file" + "This keyword is available in sections : Bind options ...").
        ".dropdown-menu",
        ".navheader",
        ".navfooter",
        ".docnav",
        ".breadcrumb",
        ".breadcrumbs",
        ".toc > p",
        ".related",
        ".sphinxsidebar",
        ".footer",
        "#footer",
        ".headerlink",
        "#sidebarbutton",
        ".mobile-nav",
        "#banner",
        ".skip-link",
        "#docComments",
    ]
)
MAIN = "main, [role=main]"
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# Elements that end the paragraph before them and start a new one after them.
BLOCK_TAGS = frozenset(
    "address article blockquote body caption center dd details dialog dir div dl dt fieldset figcaption "
    "figure form hgroup hr html li main menu ol p section summary table tbody thead tfoot tr td th ul".split()
)
LISTS = frozenset({"ul", "ol", "menu", "dir"})
# Classes of boxes whose text, their title included, is an admonition (Sphinx, DocBook, Publican sidebars,
# Python's version notes).
ADMONITIONS = frozenset(
    "note tip warning caution important admonition sidebar danger attention hint error seealso "
    "versionadded versionchanged deprecated deprecated-removed impl-detail".split()
)
# Headings inside these are box titles ("Note", "Tip", "Example 3.1"), not sections of the page.
BOXES = ADMONITIONS | {"example"}
# Classes of notices: legal text, and navigation a page keeps in its content (a chapter's table of contents).
NOTICES = frozenset("legalnotice copyright toc toctree-wrapper list-of-figures list-of-tables list-of-examples".split())
# DocBook containers whose `p.title` is a caption ("Figure 3.1. ...", "Example 12.1. ...", "Table 3.1. ...").
CAPTIONED = frozenset("figure informalfigure example informalexample table informaltable".split())
TITLE_SEPARATORS = (" — ", " – ", " - ", " | ", " :: ", " · ", " » ")
SPHINX_NO_TITLE = "<no title>"  # what Sphinx titles a page with no heading (sphinx.environment.collectors.title)

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_:.-]+)""", re.I)
_XML_ENCODING = re.compile(rb"""^\s*<\?xml[^>]+encoding\s*=\s*["']([a-zA-Z0-9_.-]+)""", re.I)
_CONTAINER_TAG = re.compile(
    r"<(/?)(?:div|section|article|blockquote|main|ul|ol|dl|table|form|fieldset|details|figure|aside|header|footer|nav|center)\b",
    re.I,
)
_SELF_CLOSED = re.compile(
    r"<(?!(?:area|base|br|col|embed|hr|img|input|link|meta|source|track|wbr)[\s/>])([a-zA-Z][a-zA-Z0-9:-]*)(\s[^<>]*?)?/>"
)
_DEEPEST = 5000  # Lexbor's tree building slows down quadratically with depth: flatten beyond this


def read_html(path: Path, fallback_title: str | None = None) -> Parsed:
    """The page at `path`; `fallback_title` (else the file name) when it has no title of its own."""
    size = path.stat().st_size
    if size > LARGEST:
        raise Unreadable(f"too large for an HTML page ({size >> 20} MB), skipped")
    data = path.read_bytes()
    if looks_binary(data[:8192]) and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise Unreadable("not an HTML document (binary?), skipped")
    return parse_html(decode(data), title_line(path.stem) if fallback_title is None else fallback_title)


def parse_html(markup: str, fallback_title: str) -> Parsed:
    tree = LexborHTMLParser(_flatten_if_too_deep(_SELF_CLOSED.sub(r"<\1\2></\1>", markup)))
    page_title = title_line(_text(tree.css_first("title")))
    root = tree.css_first(MAIN) or tree.body or tree.root
    if root is None:
        return Parsed(page_title or fallback_title, iter(()))
    for node in root.css(BOILERPLATE):
        node.decompose()
    first_h1 = title_line(_text(root.css_first("h1")))
    title = _title(page_title, first_h1) or fallback_title
    return Parsed(title, _Walk(title).blocks(root))


def decode(data: bytes) -> str:
    """BOM, then the charset the page declares, then UTF-8, then windows-1252."""
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, errors="replace")
    head = data[:4096]
    declared = _META_CHARSET.search(head) or _XML_ENCODING.search(head)
    candidates = [_web_encoding(declared.group(1).decode("ascii"))] if declared else []
    for encoding in [*candidates, "utf-8"]:
        if encoding:
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                pass
    # What browsers assume for an undeclared page in most locales. Guessers (charset-normalizer) read
    # short Western pages as Baltic or Central European code pages: worse than this for our documents.
    return data.decode("cp1252", errors="replace")


def _web_encoding(label: str) -> str | None:
    """The Python codec for a declared charset; latin-1 and ASCII labels mean windows-1252 on the web."""
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    return "cp1252" if name in ("latin-1", "iso8859-1", "ascii") else name


def _flatten_if_too_deep(markup: str) -> str:
    """Drop container tags from a page nested thousands deep (an attack or a broken generator): its text survives."""
    if markup.count("<") < _DEEPEST:
        return markup
    depth = deepest = 0
    for match in _CONTAINER_TAG.finditer(markup):
        depth += -1 if match.group(1) else 1
        deepest = max(deepest, depth)
    if deepest <= _DEEPEST:
        return markup
    # `[^>]*>?`: a tag never closed runs to the end of the page, as a browser reads it; with `[^>]*>` every
    # unclosed tag scanned the rest of the page and failed, once per tag.
    return re.sub(_CONTAINER_TAG.pattern + r"[^>]*>?", "\n", markup, flags=re.I)


def _title(page_title: str, first_h1: str) -> str:
    """`<title>`, less a site suffix when it is the first h1 plus a separator ("os.path — ... — Python 3.11 docs");
    none when `<title>` is Sphinx's placeholder for a page without a heading ("<no title> — Black 23.1.0
    documentation": every page of Debian's Black docs, pages of the Python, pytest and Celery docs)."""
    if page_title.startswith(SPHINX_NO_TITLE):
        page_title = ""
    if page_title and first_h1 and page_title != first_h1 and page_title.startswith(first_h1):
        if page_title[len(first_h1) :].startswith(TITLE_SEPARATORS):
            return first_h1
    return page_title or first_h1


def _text(node: LexborNode | None) -> str:
    return node.text(deep=True, separator="") if node is not None else ""


def _is_layout_table(table: LexborNode) -> bool:
    """A table holding headings or other tables lays out a page, and so does one row without a header cell (an
    Asciidoctor note: its icon in one cell, its text in the next); their cells are read as ordinary content."""
    if len(table.css("table")) > 1 or table.css_first("h1, h2, h3, h4, h5, h6") is not None:
        return True
    return len(table.css("tr")) == 1 and table.css_first("th") is None


def _table_text(table: LexborNode) -> tuple[str, list[tuple[str, BlockKind]]]:
    """(caption, rows): the caption on one line, and each row a line of its own, "cell | cell" (TABLE), an empty
    cell keeping its place. A first row of header cells only, one for each column, is the table's head
    (TABLE_HEAD): the names of the cells of the rows under it, with which an answer may quote a row."""
    lines: list[tuple[str, BlockKind]] = []
    for row in table.css("tr"):
        cells = [cell for cell in _children(row) if cell.tag in ("td", "th")]
        texts = [_cell_text(cell) for cell in cells]
        if not any(texts):
            continue
        head = (
            not lines
            and len(cells) > 1
            and all(cell.tag == "th" for cell in cells)
            and all((_number(cell, "colspan") or 1) == 1 for cell in cells)
        )
        lines.append((table_row(texts), BlockKind.TABLE_HEAD if head else BlockKind.TABLE))
    return one_line(_text(table.css_first("caption"))), lines


def _cell_text(cell: LexborNode) -> str:
    """A cell's text on one line, its paragraphs and line breaks as spaces."""
    return " ".join(block.text for block in _Walk("").blocks(cell)).replace("\n", " ")


def _next_element_tag(node: LexborNode) -> str | None:
    """The tag of the element after `node` among its siblings (text between them skipped), None if there is none."""
    following = node.next
    while following is not None and not following.is_element_node:
        following = following.next
    return following.tag if following is not None else None


def _children(node: LexborNode) -> list[LexborNode]:
    children = []
    child = node.child
    while child is not None:
        children.append(child)
        child = child.next
    return children


def laid_out_prose(text: str) -> Iterator[tuple[str, BlockKind]]:
    """The paragraphs of a `<pre class="text">` (a manual written as plain text and wrapped by hand, as HAProxy's
    are): blank lines part them; a paragraph's lines are one text, prose; a paragraph indented deeper than the
    block's own text (an example, a configuration excerpt) keeps its lines, as code."""
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", text.strip("\n")) if p.strip()]
    indents = [len(line) - len(line.lstrip()) for p in paragraphs for line in p.splitlines() if line.strip()]
    base = min(indents, default=0)
    for paragraph in paragraphs:
        lines = [line for line in paragraph.splitlines() if line.strip()]
        if all(len(line) - len(line.lstrip()) > base for line in lines):
            yield "\n".join(line[base:] for line in lines), BlockKind.CODE
        else:  # "- item" with its hanging indent is a list item
            kind = BlockKind.ITEM if lines[0][base:].startswith(("- ", "* ")) else BlockKind.PROSE
            yield " ".join(line.strip() for line in lines), kind


def _classes(node: LexborNode) -> set[str]:
    return set((node.attributes.get("class") or "").split())


def _number(node: LexborNode, attribute: str) -> int | None:
    value = (node.attributes.get(attribute) or "").strip()
    return int(value) if value.isdigit() and len(value) < 9 else None


def _container_kind(node: LexborNode, tag: str) -> BlockKind | None:
    """The kind of everything inside `node`, when its tag or class says (its innermost structure may say more)."""
    if tag in ("figcaption", "caption"):
        return BlockKind.CAPTION
    if tag not in BLOCK_TAGS:
        return None
    classes = _classes(node)
    if tag == "dt" and "sig" in classes:  # Sphinx's API signature: "os.path.join(path, *paths)"
        return BlockKind.CODE
    if tag == "dt" and _next_element_tag(node) == "dd":  # a term and its definition: a setting, an option, a word
        return BlockKind.TERM
    if classes & {"caption", "code-block-caption"}:
        return BlockKind.CAPTION
    if tag == "p" and "title" in classes and node.parent is not None and _classes(node.parent) & CAPTIONED:
        return BlockKind.CAPTION
    if classes & NOTICES:
        return BlockKind.NOTICE
    if classes & ADMONITIONS:
        return BlockKind.ADMONITION
    return None


class _Walk:
    """One depth-first pass over the content, with an explicit stack: a page nested 100,000 deep is fine."""

    def __init__(self, title: str):
        self.outline = Outline(title)
        self.lines: list[str] = []  # finished lines of the current paragraph
        self.words: list[str] = []  # inline text of the current line
        self.bullet = ""  # "- " (indented by list depth) when the current line is a list item
        self.lists = 0  # how many lists we are inside: an item's paragraphs are lines of its block
        self.boxes = 0  # how many notes/tips we are inside: their headings are not sections
        self.numbers: list[int | None] = []  # per list we are inside: the last item number of an ordered one
        self.kinds: list[tuple[LexborNode, LineKind]] = []  # the elements we are inside that say what their text is
        self.tables = 0  # the tables read so far: each table's head and rows carry its number

    @property
    def kind(self) -> LineKind:
        return self.kinds[-1][1] if self.kinds else PROSE_LINE

    def blocks(self, root: LexborNode) -> Iterator[Block]:
        # (node, None) to enter a node; (node, its tag, whether it is a box) to leave a block or a box
        stack: list[tuple[LexborNode, str | None, bool]] = [(root, None, False)]
        words = self.words
        while stack:
            node, leaving, boxed = stack.pop()
            if leaving is not None:
                yield from self.leave(node, leaving, boxed)
                words = self.words
                continue
            if node.is_text_node:
                words.append(node.text_content or "")
                continue
            tag = node.tag
            if not node.is_element_node or tag is None:
                continue
            if tag in HEADINGS:
                yield from self.heading(node, HEADINGS[tag])
            elif tag == "pre" and "text" in _classes(node):  # prose the page lays out itself (HAProxy's manuals)
                yield from self.paragraph_break()
                for paragraph, kind in laid_out_prose(clean(_text(node))):
                    yield from blocks_of(paragraph, self.outline.path, kind=kind)
            elif tag == "pre":
                yield from self.paragraph_break()
                yield from blocks_of(clean(_text(node)).strip("\n"), self.outline.path, kind=BlockKind.CODE)
            elif tag == "table" and not _is_layout_table(node):
                yield from self.paragraph_break()
                caption, rows = _table_text(node)
                yield from blocks_of(caption, self.outline.path, kind=BlockKind.CAPTION)
                self.tables += 1
                yield from table_blocks(rows, self.outline.path, self.tables)
            elif tag == "br":
                self.line_break()
            else:
                boxed = tag in ("div", "aside", "section") and not _classes(node).isdisjoint(BOXES)
                children = list(node.iter(include_text=True))
                if tag in BLOCK_TAGS or boxed:  # lists, items, captions are block tags too
                    yield from self.enter(node, tag, boxed)
                    stack.append((node, tag, boxed))
                elif not any(child.is_element_node for child in children):  # a link, a span of words: its text at once
                    words.extend([child.text_content or "" for child in children if child.is_text_node])
                    continue
                # entering or leaving a span, a link or emphasis changes nothing: only its children are walked
                children.reverse()
                stack.extend([(child, None, False) for child in children])
            words = self.words
        yield from self.paragraph_break()

    def enter(self, node: LexborNode, tag: str, boxed: bool) -> Iterator[Block]:
        """An element that breaks the text or says what it is (the walk skips the others: spans, links, emphasis)."""
        if tag in BLOCK_TAGS:
            yield from self.block_break()
        kind = None
        if tag in LISTS:
            self.lists += 1
            self.numbers.append((_number(node, "start") or 1) - 1 if tag == "ol" else None)
        elif tag == "li":
            self.bullet = "  " * max(0, self.lists - 1) + "- "
            kind = LineKind(BlockKind.ITEM, self.item_number(node))
        elif (container := _container_kind(node, tag)) and not (
            container is BlockKind.TERM and self.kind.kind is BlockKind.NOTICE  # a table of contents' entry
        ):
            kind = LineKind(container)
        if boxed:
            self.boxes += 1
        if kind is not None:  # the text so far keeps its kind; this element's text is a block of its own
            yield from self.paragraph_break()
            self.kinds.append((node, kind))

    def item_number(self, item: LexborNode) -> int | None:
        """The item's number in an ordered list (its `value`, else one more than the item before), else None."""
        if not self.numbers or self.numbers[-1] is None:
            return None
        self.numbers[-1] = _number(item, "value") or self.numbers[-1] + 1
        return self.numbers[-1]

    def leave(self, node: LexborNode, tag: str, boxed: bool) -> Iterator[Block]:
        if tag in LISTS:
            self.lists -= 1
            self.numbers.pop()
        if boxed:
            self.boxes -= 1
        if tag in BLOCK_TAGS:
            yield from self.block_break()
        if self.kinds and self.kinds[-1][0] is node:
            yield from self.paragraph_break()
            self.kinds.pop()

    def heading(self, node: LexborNode, level: int) -> Iterator[Block]:
        text = one_line(_text(node))
        if self.boxes:  # "Note", "Tip": a line of the box's text
            yield from self.block_break()
            self.words.append(text)
            self.line_break()
        else:
            yield from self.paragraph_break()
            self.outline.heading(level, text)

    def block_break(self) -> Iterator[Block]:
        """Where a paragraph ends: a new block, but only a new line inside a list item, a box, a caption or a
        notice, each of which is one block."""
        if self.lists or self.kind.kind in (BlockKind.ADMONITION, BlockKind.CAPTION, BlockKind.NOTICE):
            self.line_break()
            return iter(())
        if not self.words and not self.lines:
            return iter(())
        return self.paragraph_break()

    def line_break(self) -> None:
        if not self.words:
            return
        line = " ".join(clean("".join(self.words)).split())  # str.split's whitespace is re's \s
        if line:
            self.lines.append(self.bullet + line)
            self.bullet = ""
        self.words = []

    def paragraph_break(self) -> Iterator[Block]:
        self.line_break()
        if self.lines:
            text, self.lines = "\n".join(self.lines), []
            yield from blocks_of(text, self.outline.path, kind=self.kind.kind, order=self.kind.order)
