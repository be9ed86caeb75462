"""Plain text, Markdown and reStructuredText, streamed line by line so a 4 GB file is never held whole.

Paragraphs (text between blank lines) become blocks; Markdown's ATX (`#`) and setext headings and
reStructuredText's underlined (and overlined) titles give the section path. Code stays as it is
written. Each block has its kind: in Markdown, fenced and indented code, list items (an ordered one
with its number), tables, and quotes that open with a note marker ("> **Note**", "> [!WARNING]") as
admonitions; in reStructuredText, literal blocks (`::`) and code directives, list items, grid and
simple tables, admonition directives (their name as the title line), figure captions, and the
comments and navigation directives (`toctree`) as notices. A first pass checks the whole file is
UTF-8 without NUL bytes, so a binary file is reported before any of it reaches the index. A Markdown file's YAML
front matter (Jekyll's and Hugo's "---" block of `title:`, `description:`, ... at its very start) is metadata, not
text: its `title` is the page's title, and none of it is read as a paragraph or a heading.

The block structure is read here, line by line: docutils and markdown-it parse a whole document at once,
in memory, and docutils' warnings and errors on sloppy input would have to be caught one by one. Markdown's
inline markup within a block (links, images, code spans, escapes) is read by markdown-it's CommonMark
inline parser, which is linear in the text whatever it holds (150,000 "[" in a row cost a hand-written
pattern minutes); reStructuredText's roles and links by patterns that never scan past the next backquote.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml
from docutils.parsers.rst.tableparser import GridTableParser, SimpleTableParser, TableMarkupError
from docutils.statemachine import StringList
from markdown_it import MarkdownIt
from markdown_it.common.utils import normalizeReference

from typedrag.corpus.formats.common import MAX_BLOCK_CHARS, Outline, Parsed, Unreadable, blocks_of, clean, title_line
from typedrag.records import Block, BlockKind, table_row

_CHUNK = 1 << 20
_LONGEST_LINE = 1 << 16  # characters read at once: a file with no line breaks still streams
_TITLE_SEARCH = 1 << 20  # characters to look through for the first heading
# Front matter longer than this is no page's metadata: the file is read as Markdown from its first line.
_FRONT_MATTER_LINES = 200
_FRONT_MATTER_CHARS = 64 * 1024

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")  # its closing "#"s are cut by `_atx_text`, not by a pattern
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A link reference definition on one line, as CommonMark defines it: "[label]: destination" and an optional title,
# nothing else ("[fs.ReadStream]: fs.md#class-fsreadstream"). "[Warning]: Never run the backup script as root ..."
# is a paragraph, and so is a footnote ("[^1]: ...", `definition`). No part can match the same text two ways, and
# the spaces are taken possessively: linear on any line.
_MD_DEFINITION = re.compile(
    r"^ {0,3}\[((?:[^\\\[\]\n]|\\.){1,999})\]:[ \t]*+(?:<(?:[^<>\n\\]|\\.)*+>|[^\s<]\S*+)"
    r"(?:[ \t]++(?:\"(?:[^\"\\\n]|\\.)*+\"|'(?:[^'\\\n]|\\.)*+'|\((?:[^()\\\n]|\\.)*+\)))?[ \t]*+$"
)
_MD_INLINE = MarkdownIt("commonmark")
_MD_INLINE_MARKS = frozenset("[<&\\")  # a line with none of these has no link, image, autolink, entity or escape
_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1+[ \t]*$")  # one punctuation character, repeated
_RST_EXPLICIT = re.compile(r"^\.\.(?:[ \t]|$)")  # directives, comments and link targets
# Roles (":class:`tuple`"), links ("`text <url>`_") and literals ("``x``"): each scan stops at the next backquote,
# so a line of any length is read in linear time; a link's or a role's "<target>" is cut by `_without_target`.
_RST_ROLE = re.compile(r":[\w.+-]++:`([^`\n]*+)`")
_RST_LINK = re.compile(r"`([^`\n]*+)`__?")
_RST_LITERAL = re.compile(r"``([^`\n]++)``")
_MD_ITEM = re.compile(r"^( {0,3})([-*+]|(\d{1,9})[.)])(?:[ \t]+|$)")
_MD_TABLE_DELIMITER = re.compile(r"^ {0,3}\|?[ \t]*+:?-++:?[ \t]*+(?:\|[ \t]*+:?-++:?[ \t]*+)*+\|?[ \t]*+$")
_MD_QUOTE = re.compile(r"^ {0,3}> ?")
# A quote that opens with one of these is a note box: "> **Note**", "> **Warning:** ...", "> [!TIP]", "> Note: ..."
_MD_ADMONITION = re.compile(
    r"^(?:\*\*|__)?\[?!?(note|tip|hint|important|warning|caution|danger|attention|info)\]?:?(?:\*\*|__)?(?::|\s|$)",
    re.I,
)
_RST_ITEM = re.compile(r"^(\s*)([-*+•‣⁃]|\(?(\d{1,9}|#|[a-zA-Z])[.)])(?:[ \t]+|$)")
_RST_DIRECTIVE = re.compile(r"^\.\.[ \t]+([\w:.+-]+)[ \t]*::(?:[ \t]+(.*))?$")
_RST_FOOTNOTE = re.compile(r"^\.\.[ \t]+\[[^\]\n]+\](?:[ \t]+(.*))?$")
_RST_TARGET = re.compile(r"^\.\.[ \t]+(?:_|\|)")  # ".. _name: url", ".. |substitution| ..."
_RST_OPTION = re.compile(r"^:[\w.-]+:(?:[ \t]|$)")
_RST_FIELD = re.compile(r"^:[^:\s][^:]*:(?:[ \t]|$)")  # a field list's field (":param name: ...")
_RST_SIMPLE_TABLE = re.compile(r"^ *=+(?: +=+)+ *$")
_RST_GRID_TABLE = re.compile(r"^ *\+[-=]")
_RST_TABLE_CHARS = 1 << 20  # a table longer than this stays verbatim: docutils' parsers hold it whole, cell by cell


@dataclass(frozen=True, slots=True)
class Heading:
    """A heading line (or an underlined one), at its level: 1 is the outermost."""

    level: int
    text: str


@dataclass(frozen=True, slots=True)
class Paragraph:
    """A run of text between blank lines or headings, of one kind (a code block is one, whole; a list item one)."""

    text: str
    kind: BlockKind = BlockKind.PROSE
    order: int | None = None


def read_markup(path: Path, syntax: str, fallback_title: str | None = None) -> Parsed:
    """`syntax` is "text", "markdown" or "rst"; raises `Unreadable` (with the line) for binary content. The title
    is the first heading, else `fallback_title` (else the file name)."""
    check_utf8(path)
    meta, skip = front_matter(path) if syntax == "markdown" else ({}, 0)
    labels = link_labels(path, syntax)
    stated = meta.get("title")
    title = title_line(stated) if isinstance(stated, str) else ""
    if not title and syntax != "text":
        title = title_line(first_heading(path, syntax, labels, skip))
    title = title or (title_line(path.stem) if fallback_title is None else fallback_title)
    return Parsed(title, _blocks(path, syntax, title, labels, skip))


def front_matter(path: Path) -> tuple[dict, int]:
    """The YAML front matter a Markdown file opens with (after blank lines, if any: "---", `key: value` lines, "---"
    or "..."), and how many lines it takes; ({}, 0) when there is none. Only a block that YAML reads as a mapping
    counts: a file that opens with a thematic break ("---") over a paragraph is Markdown, read from its first line."""
    held: list[str] = []
    size = 0
    opened = False
    for number, line in enumerate(lines(path)):
        if not opened:  # blank lines may come first: Debian's docker-doc pages open with one
            if not line.strip() and number < _FRONT_MATTER_LINES:
                continue
            if line.rstrip() != "---":
                return {}, 0
            opened = True
            continue
        if line.rstrip() in ("---", "..."):
            try:
                meta = yaml.safe_load("\n".join(held))
            except yaml.YAMLError:
                return {}, 0
            return (meta, number + 1) if isinstance(meta, dict) else ({}, 0)
        size += len(line)
        if number > _FRONT_MATTER_LINES or size > _FRONT_MATTER_CHARS:
            break
        held.append(line)
    return {}, 0


def check_utf8(path: Path) -> None:
    """Read the file once in 1 MB chunks; `Unreadable` at the first byte that is not UTF-8, or a NUL."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line = 1
    with open(path, "rb") as f:
        first = True
        while chunk := f.read(_CHUNK):
            if first:
                chunk, first = chunk.removeprefix(codecs.BOM_UTF8), False
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as e:
                raise Unreadable(
                    "not a UTF-8 text file (binary?), skipped", line + chunk.count(b"\n", 0, e.start)
                ) from None
            nul = chunk.find(b"\x00")
            if nul >= 0:
                raise Unreadable("NUL byte (binary file?), skipped", line + chunk.count(b"\n", 0, nul))
            line += chunk.count(b"\n")
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise Unreadable("not a UTF-8 text file (binary?), skipped", line) from None


def lines(path: Path, skip: int = 0) -> Iterator[str]:
    """Decoded lines without their line break, but the first `skip` (front matter); a line longer than 64 K
    characters comes in pieces."""
    with open(path, encoding="utf-8-sig", errors="replace", newline=None) as f:
        while line := f.readline(_LONGEST_LINE):
            if skip:  # front matter's lines are short (`front_matter`): each is read whole
                skip -= 1
                continue
            yield clean(line.removesuffix("\n"))


def first_heading(path: Path, syntax: str, labels: frozenset[str] = frozenset(), skip: int = 0) -> str:
    """The first heading in the first megabyte of the file past its first `skip` lines, or "" (`labels`: see
    `link_labels`)."""
    seen = 0
    for event in events(lines(path, skip), syntax, labels):
        if isinstance(event, Heading):
            return event.text
        seen += len(event.text)
        if seen > _TITLE_SEARCH:
            break
    return ""


def _blocks(path: Path, syntax: str, title: str, labels: frozenset[str], skip: int = 0) -> Iterator[Block]:
    outline = Outline(title)
    for event in events(lines(path, skip), syntax, labels):
        if isinstance(event, Heading):
            outline.heading(event.level, event.text)
        else:
            yield from blocks_of(event.text, outline.path, kind=event.kind, order=event.order)


def link_labels(path: Path, syntax: str) -> frozenset[str]:
    """The labels a Markdown file defines a link target for ("[fs.ReadStream]: fs.md#..."), wherever they are: a
    reference link ("[text][label]") reads as its text only when its label is defined, as CommonMark has it."""
    if syntax != "markdown":
        return frozenset()
    return frozenset(normalizeReference(label) for line in lines(path) if (label := definition(line)))


def definition(line: str) -> str | None:
    """The label `line` defines a link target for (None: it defines none). A GFM footnote ("[^1]: The migration
    takes about ten minutes per gigabyte.") is text a reader reads, whatever follows its label."""
    found = _MD_DEFINITION.match(line)
    if found is None or not found.group(1).strip() or found.group(1).startswith("^"):
        return None
    return found.group(1)


def markdown_text(line: str, references: dict[str, dict[str, str]]) -> str:
    """One line of Markdown as a reader reads it: a link as its text (a reference link only when `references`
    defines its label), an image as its description, an autolink as its address, escapes and entities as the
    characters they stand for; code spans, emphasis and anything else as written."""
    if not _MD_INLINE_MARKS.intersection(line):
        return line
    body = line.strip()
    start = line.index(body[0]) if body else 0
    tokens = _MD_INLINE.parseInline(body, {"references": references})[0].children or []
    out = []
    for token in tokens:
        if token.type in ("link_open", "link_close"):
            continue
        if token.type == "code_inline":
            out.append(f"{token.markup}{token.content}{token.markup}")
        elif token.type in ("softbreak", "hardbreak"):
            out.append(" ")
        else:  # text, html_inline, an image's description; emphasis is its marker
            out.append(token.content or token.markup)
    return line[:start] + "".join(out) + line[start + len(body) :]


def events(source: Iterator[str], syntax: str, labels: frozenset[str] = frozenset()) -> Iterator[Heading | Paragraph]:
    if syntax == "markdown":
        return _table_heads(_Markdown(labels).events(source))
    if syntax == "rst":
        return _Rst().events(source)
    return _paragraphs(source)


def _table_heads(events: Iterator[Heading | Paragraph]) -> Iterator[Heading | Paragraph]:
    """A pipe table as the other document readers write a table: its header row ("| Key | Action |", above its
    "| --- | --- |") the table's head (TABLE_HEAD), then each row "cell | cell" (TABLE), outer bars left out."""
    tables, reading = 0, False  # the tables read so far (each table's head and rows carry its number); in one?
    for event in events:
        if not isinstance(event, Paragraph) or event.kind is not BlockKind.TABLE:
            reading = False
            yield event
            continue
        rows = event.text.split("\n")
        if len(rows) >= 2 and _MD_TABLE_DELIMITER.match(rows[1]):
            tables, reading = tables + 1, True
            yield Paragraph(table_row(_pipe_cells(rows[0])), BlockKind.TABLE_HEAD, tables)
            rows = rows[2:]
        elif not reading:
            tables, reading = tables + 1, True
        if rows:
            yield Paragraph("\n".join(table_row(_pipe_cells(row)) for row in rows), BlockKind.TABLE, tables)


def _pipe_cells(row: str) -> list[str]:
    """The cells of a pipe table's row, with outer bars or without ("| a | b |", "a | b")."""
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row)]


def _rst_table(lines: list[str]) -> tuple[list[list[str]], list[list[str]]] | None:
    """(head rows, body rows) of a grid or simple table, each row its cells' text, read by docutils' own table
    parsers (a cell over several lines, one spanning columns); None when the lines are neither."""
    if _RST_GRID_TABLE.match(lines[0]):
        parser = GridTableParser()
    elif _RST_SIMPLE_TABLE.match(lines[0]):
        parser = SimpleTableParser()
    else:  # a list-table's items, a csv-table's lines: no grid to read
        return None
    margin = min((_indent(line) for line in lines if line.strip()), default=0)
    try:
        _, head, body = parser.parse(StringList([_dedent(line, margin).rstrip() for line in lines]))
    except (TableMarkupError, IndexError, ValueError):
        return None

    def cells(row) -> list[str]:  # a spanned-over cell (None) is empty, so each row has a cell per column
        return ["" if cell is None else _rst_inline(" ".join(" ".join(cell[3]).split())) for cell in row]

    return [cells(row) for row in head], [cells(row) for row in body]


class _Buffer:
    """The lines of the block being read, and what kind of block it is; hands out a `Paragraph` before it
    outgrows a block (the rest of the block keeps its kind)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.kind = BlockKind.PROSE
        self.order: int | None = None
        self.verbatim = False  # code and tables: lines as they are, not unwrapped
        self.inline = None  # markup to drop from the text (links, roles)

    def start(
        self, kind: BlockKind, order: int | None = None, *, verbatim: bool = False, inline=None
    ) -> Paragraph | None:
        """Begin a block of `kind`; the block read so far, if any, is handed out."""
        done = self.flush()
        self.kind, self.order, self.verbatim, self.inline = kind, order, verbatim, inline
        return done

    def add(self, line: str) -> Paragraph | None:
        self.lines.append(line)
        self.size += len(line) + 1
        return self.flush() if self.size > MAX_BLOCK_CHARS else None

    def flush(self) -> Paragraph | None:
        """The block read so far: a code block's or a table's lines as they are; prose unwrapped (see `unwrap`)."""
        text = ("\n".join(self.lines) if self.verbatim else unwrap(self.lines)).strip("\n")
        self.lines, self.size = [], 0
        if self.inline:
            text = self.inline(text)
        return Paragraph(text, self.kind, self.order) if text.strip() else None


_STRUCTURED_LINE = re.compile(r"^\s*(?:[-*+•]\s|\d{1,3}[.)]\s|\|)|^(?: {4}|\t)")


def unwrap(lines: list[str]) -> str:
    """A paragraph's lines as text: a hard-wrapped line joins the one before with a space, but a list item,
    a table row or an indented (code) line stays a line of its own, and so does a line after a blank one (a
    block of several paragraphs, such as a note)."""
    text, broken = "", False
    for line in lines:
        if not line.strip():
            broken = bool(text)
            continue
        if not text:
            text = line
        elif broken or _STRUCTURED_LINE.match(line):
            text += "\n" + line
        else:
            text += " " + line.strip()
        broken = False
    return text


def _paragraphs(source: Iterator[str]) -> Iterator[Paragraph]:
    buffer = _Buffer()
    for line in source:
        done = buffer.flush() if not line.strip() else buffer.add(line)
        if done:
            yield done
    if done := buffer.flush():
        yield done


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


def _dedent(line: str, width: int) -> str:
    """`line` less up to `width` columns of leading space."""
    line = line.expandtabs(4)
    return line[min(width, _indent(line)) :]


def _atx_text(text: str) -> str:
    """An ATX heading's text without its closing sequence ("## Usage ##"), which a space must precede."""
    text = text.strip(" \t")
    opened = text.rstrip("#")
    if opened != text and (not opened or opened[-1] in " \t"):
        return opened.rstrip(" \t")
    return text


def _item_line(order: int | None, text: str) -> str:
    """An item's first line as the document readers write it, whatever its marker was ("*", "+", "#.",
    "a)"): "- " and its text, or its number in its list (typedrag.engines.offline reads it back by its kind)."""
    return f"{order}. {text}" if order is not None else f"- {text}"


class _Markdown:
    """CommonMark's block structure, line by line: fenced and indented code, lists (an ordered item numbered from
    its list's start), pipe tables, block quotes, ATX and setext headings, paragraphs."""

    def __init__(self, labels: frozenset[str] = frozenset()) -> None:
        # the link labels the document defines (link_labels), as markdown-it looks them up
        self.references = {label: {"href": "", "title": ""} for label in labels}
        self.buffer = _Buffer()
        self.mode = ""  # "", "prose", "fence", "code", "item", "quote", "table"
        self.fence = ""
        self.item_indent = 0  # where an item's text begins: a line indented this far after a blank continues it
        self.blank = False  # the line before was blank
        self.lists: list[tuple[int, int | None]] = []  # open lists: (marker indent, last number; None if bulleted)

    def events(self, source: Iterator[str]) -> Iterator[Heading | Paragraph]:
        for line in source:
            yield from self.line(line)
            self.blank = not line.strip()
        if done := self.buffer.flush():
            yield done

    def begin(
        self, mode: str, kind: BlockKind, order: int | None = None, *, verbatim: bool = False
    ) -> Iterator[Paragraph]:
        self.mode = mode
        if done := self.buffer.start(
            kind, order, verbatim=verbatim, inline=None if kind is BlockKind.CODE else self.inline
        ):
            yield done

    def inline(self, text: str) -> str:
        """The text a reader reads, line by line (`markdown_text`): links as their text, inline ones ("[text](url)")
        and reference ones whose label the document defines."""
        return "\n".join(markdown_text(line, self.references) for line in text.split("\n"))

    def add(self, line: str) -> Iterator[Paragraph]:
        if done := self.buffer.add(line):
            yield done

    def end(self) -> Iterator[Paragraph]:
        """End the block being read (and, outside a list, any list)."""
        yield from self.begin("", BlockKind.PROSE)

    def line(self, line: str) -> Iterator[Heading | Paragraph]:
        if self.mode == "fence":
            stripped = line.strip()
            if stripped.startswith(self.fence) and not stripped.strip(self.fence[0]):
                yield from self.end()
            else:
                yield from self.add(line)
            return
        if self.mode == "code":
            if not line.strip() or _indent(line) >= 4:
                yield from self.add(_dedent(line, 4))
                return
            yield from self.end()
        if not line.strip():
            if self.mode in ("prose", "quote", "table"):
                yield from self.end()
            return
        indent = _indent(line)
        if self.mode == "item" and self.blank and indent < self.item_indent and not _MD_ITEM.match(line):
            yield from self.end()  # the list is over
            self.lists = []
        if self.mode != "item" and self.mode != "prose" and not _MD_ITEM.match(line):
            self.lists = [] if indent < 4 or not self.lists else self.lists
        if opened := _FENCE.match(line):
            self.fence = opened.group(1)
            yield from self.begin("fence", BlockKind.CODE, verbatim=True)
            return
        if self.mode == "" and definition(line) is not None:
            return  # a link's target ("[fs.ReadStream]: fs.md#..."), no text of the document
        if atx := _ATX.match(line):
            yield from self.end()
            yield Heading(len(atx.group(1)), self.inline(_atx_text(atx.group(2) or "")))
            return
        if self.mode == "prose" and (setext := _SETEXT.match(line)):
            text = " ".join(self.buffer.lines)
            self.buffer.lines, self.buffer.size, self.mode = [], 0, ""
            yield Heading(1 if setext.group(1)[0] == "=" else 2, self.inline(text))
            return
        if _SETEXT.match(line) and self.mode != "item" and set(line.strip()) == {"-"} and len(line.strip()) >= 3:
            yield from self.end()  # a thematic break
            return
        if quoted := _MD_QUOTE.match(line):
            content = line[quoted.end() :]
            if self.mode != "quote":
                admonition = _MD_ADMONITION.match(content.strip())
                yield from self.begin("quote", BlockKind.ADMONITION if admonition else BlockKind.PROSE)
                if admonition and admonition.end() >= len(content.strip()):  # "**Note**" alone: the box's title line
                    title = content.strip()
                    yield from self.add(admonition.group(1).capitalize() if title.startswith("[!") else title)
                    yield from self.add("")
                    return
            yield from self.add(content)
            return
        if item := _MD_ITEM.match(line):
            yield from self.item(line, item)
            return
        if self.mode == "item" and (not self.blank or indent >= self.item_indent):
            yield from self.add(_dedent(line, self.item_indent) if indent >= self.item_indent else line.strip())
            return
        if self.mode == "table" and "|" in line:
            yield from self.add(line.strip())
            return
        if line.lstrip().startswith("|") and indent < 4 and self.mode in ("", "table"):
            if self.mode != "table":
                yield from self.begin("table", BlockKind.TABLE, verbatim=True)
            yield from self.add(line.strip())
            return
        if (
            self.mode == "prose"
            and len(self.buffer.lines) == 1
            and _MD_TABLE_DELIMITER.match(line)
            and "|" in line + self.buffer.lines[0]
        ):
            header = self.buffer.lines[0].strip()  # "a | b" then "--- | ---": a table without outer pipes
            self.buffer.lines, self.buffer.size = [], 0
            yield from self.begin("table", BlockKind.TABLE, verbatim=True)
            yield from self.add(header)
            yield from self.add(line.strip())
            return
        if indent >= 4 and self.mode in ("", "table"):
            yield from self.begin("code", BlockKind.CODE, verbatim=True)
            yield from self.add(_dedent(line, 4))
            return
        if self.mode != "prose":
            yield from self.begin("prose", BlockKind.PROSE)
        yield from self.add(line)

    def item(self, line: str, marker: re.Match) -> Iterator[Paragraph]:
        """A list marker: a new item, numbered in its list when the list is ordered."""
        indent = _indent(line)
        number = int(marker.group(3)) if marker.group(3) else None
        while self.lists and self.lists[-1][0] > indent:
            self.lists.pop()
        if self.lists and self.lists[-1][0] == indent and (self.lists[-1][1] is None) == (number is None):
            last = self.lists[-1][1]
            order = None if last is None else last + 1
            self.lists[-1] = (indent, order)
        else:
            if self.lists and self.lists[-1][0] == indent:
                self.lists.pop()  # a bulleted list right after a numbered one, or the reverse: a new list
            order = number
            self.lists.append((indent, order))
        self.item_indent = len(marker.group(0).expandtabs(4)) if line[marker.end() :].strip() else indent + 2
        yield from self.begin("item", BlockKind.ITEM, order)
        yield from self.add(_item_line(order, line[marker.end() :].strip()))


def _rst_inline(text: str) -> str:
    return _RST_LITERAL.sub(r"\1", _RST_LINK.sub(_without_target, _RST_ROLE.sub(_without_target, text)))


def _without_target(found: re.Match) -> str:
    """A role's or a link's text without the target it names ("`Python <https://python.org>`_" is "Python"); a
    link that is only its target ("`<https://python.org>`_") is its address."""
    text = found.group(1)
    opening = text.rfind("<")
    if opening < 0 or not text.endswith(">"):
        return text
    return text[:opening].rstrip() or text[opening + 1 : -1]


# What a directive's content is, by the directive's name.
_RST_CODE = frozenset(
    "code code-block sourcecode literalinclude doctest testcode testoutput parsed-literal productionlist highlight".split()
)
_RST_ADMONITIONS = frozenset(
    "note tip hint important warning caution danger error attention admonition seealso versionadded versionchanged "
    "deprecated impl-detail".split()
)
_RST_NOTICES = frozenset("toctree contents index sectnum include only raw meta tabularcolumns".split())
_RST_CAPTIONS = frozenset("figure image".split())
_RST_TABLES = frozenset("table csv-table list-table".split())
# Sphinx's description directives: their argument is a signature ("spam(eggs, ham=None)"), their content prose.
_RST_SIGNATURES = frozenset(
    "function class method attribute data exception module decorator decoratormethod staticmethod classmethod "
    "property describe option cmdoption envvar program opcode type member macro var".split()
)
# Bodies that are one block, their paragraphs lines of it: a note with its title, a caption, a notice.
_ONE_BLOCK = frozenset({BlockKind.ADMONITION, BlockKind.CAPTION, BlockKind.NOTICE})
# Directives whose argument is a file name, a language or a name: no text.
_RST_NO_TEXT = frozenset("highlight currentmodule moduleauthor sectionauthor codeauthor default-role role".split())
_RST_TITLES = {
    "seealso": "See also",
    "versionadded": "New in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
    "impl-detail": "CPython implementation detail",
}


@dataclass(slots=True)
class _Body:
    """An indented body: the document itself (outer -1), a directive's content, a literal block, a comment.
    Its lines are indented deeper than `outer`; `indent` is its first line's indent, once met."""

    outer: int
    kind: BlockKind
    verbatim: bool = False
    indent: int | None = None


class _Rst:
    """reStructuredText's block structure, line by line. Titles are a text line under an adornment line
    (`====`) at least as long, optionally over one too; levels follow the order in which adornment styles first
    appear, as in docutils. Indented blocks after `::` and code directives are code; an admonition directive
    gives its name as its first line ("Note"); list items, tables, figure captions and comments are blocks of
    their own kind. Directives and literal blocks nest, as bodies indented deeper than what opened them."""

    def __init__(self) -> None:
        self.buffer = _Buffer()
        self.styles: list[tuple[str, bool]] = []
        self.overline = ""  # an adornment line that may open an overlined title
        self.mode = ""  # "", "prose", "item", "table"
        self.bodies = [_Body(-1, BlockKind.PROSE)]
        self.options = False  # a directive's ":option: value" lines may follow
        self.literal = None  # the indent of the paragraph before when it ended with "::": a deeper block is code
        self.paragraph_indent = 0
        self.lists: list[tuple[int, int | None]] = []  # open lists: (marker indent, last number; None if bulleted)
        self.item_indent = 0
        self.table: list[str] | None = None  # the lines of the table being read, read whole when it ends
        self.table_size = 0
        self.tables = 0  # the tables read into rows so far: each table's head and rows carry its number

    def events(self, source: Iterator[str]) -> Iterator[Heading | Paragraph]:
        for line in source:
            yield from self.line(line)
        yield from self.end_table()
        if done := self.buffer.flush():
            yield self.literal_marker(done)

    def begin(
        self, mode: str, kind: BlockKind, order: int | None = None, *, verbatim: bool = False
    ) -> Iterator[Paragraph]:
        yield from self.end_table()
        self.mode = mode
        if done := self.buffer.start(
            kind, order, verbatim=verbatim, inline=None if kind is BlockKind.CODE else _rst_inline
        ):
            yield self.literal_marker(done)

    def literal_marker(self, paragraph: Paragraph) -> Paragraph | None:
        """A paragraph ending "::" announces a literal block: it ends ":" ("Example::"), or goes ("::" alone)."""
        if paragraph.kind is BlockKind.CODE or not paragraph.text.endswith("::"):
            return paragraph
        self.literal = self.paragraph_indent
        text = paragraph.text[:-2].rstrip()
        text = text + ":" if text and not paragraph.text[:-2].endswith((" ", "\n")) else text
        return Paragraph(text, paragraph.kind, paragraph.order) if text else None

    def end(self) -> Iterator[Paragraph]:
        """End the block being read; what follows is prose of the body it is in."""
        yield from (done for done in self.begin("", self.bodies[-1].kind) if done)

    def add(self, line: str) -> Iterator[Paragraph]:
        if done := self.buffer.add(line):
            yield done

    def line(self, line: str) -> Iterator[Heading | Paragraph]:
        indent, blank = _indent(line), not line.strip()
        while not blank and len(self.bodies) > 1 and indent <= self.bodies[-1].outer:  # out of a body
            self.bodies.pop()
            self.options = False
            yield from self.end()
            if self.mode == "item" or self.lists and indent < self.lists[-1][0]:
                self.lists = [entry for entry in self.lists if entry[0] < indent]
        body = self.bodies[-1]
        if blank:
            self.options = False  # options follow the directive line at once
            if body.verbatim or (body.kind in _ONE_BLOCK and self.mode in ("prose", "")):
                if self.buffer.lines:
                    yield from self.add("")  # a paragraph of a note: a line of its block
            elif self.mode not in ("item", "") or self.buffer.lines:
                yield from self.end()
            return
        if self.options and _RST_OPTION.match(line.strip()):
            return  # a directive's options (":maxdepth: 2"), not a role that starts its text (":class:`tuple` ...")
        self.options = False
        if body.indent is None:
            body.indent = indent
        if body.verbatim:
            yield from (self.table_line if body.kind is BlockKind.TABLE else self.add)(_dedent(line, body.indent))
            return
        if self.literal is not None:
            literal, self.literal = self.literal, None
            if indent > literal:  # the indented block after "::"
                yield from self.open_body(literal, BlockKind.CODE)
                yield from self.line(line)
                return
        if len(self.bodies) == 1:
            title = self.title(line)
            if title is not None:
                yield from title
                return
        if _RST_SIMPLE_TABLE.match(line) or (self.mode != "table" and _RST_GRID_TABLE.match(line)):
            if self.mode != "table":
                yield from self.begin("table", BlockKind.TABLE, verbatim=True)
                self.table = []
            yield from self.table_line(_dedent(line, body.indent).rstrip())
            return
        if self.mode == "table":
            yield from self.table_line(_dedent(line, body.indent).rstrip())
            return
        if line.lstrip().startswith(".."):
            yield from self.explicit(line)
            return
        if item := _RST_ITEM.match(line):
            if item.group(2) not in "-*+" or line[item.end() :].strip():  # "-" alone on a line is not a list
                yield from self.item(line, item)
                return
        if self.mode == "item" and indent >= self.item_indent or self.mode == "signature":
            yield from self.add(line.strip())
            return
        if self.mode == "prose" and indent > self.paragraph_indent and self.term_above(body):
            yield from self.definition(line)
            return
        if self.mode != "prose":
            self.lists = [] if self.mode == "item" else self.lists
            if not (body.kind in _ONE_BLOCK and self.mode == "" and self.buffer.lines):  # a note's next paragraph
                yield from self.begin("prose", body.kind)
            self.mode = "prose"
            self.paragraph_indent = indent
        yield from self.add(line.strip())

    def table_line(self, line: str) -> Iterator[Paragraph]:
        """A line of the table being read, kept to be read whole when the table ends; past `_RST_TABLE_CHARS` the table
        is given out as its lines, verbatim, as they are read (a file of any size streams)."""
        if self.table is None:
            yield from self.add(line)
            return
        self.table.append(line)
        self.table_size += len(line) + 1
        if self.table_size > _RST_TABLE_CHARS:
            held, self.table, self.table_size = self.table, None, 0
            for kept in held:
                yield from self.add(kept)

    def end_table(self) -> Iterator[Paragraph]:
        """The table read so far as its head and rows (TABLE_HEAD over "cell | cell" rows, each with the table's
        number), as every document reader writes a table; its lines verbatim when docutils reads no grid or simple
        table in them (a list-table's items, a malformed grid)."""
        lines, self.table, self.table_size = self.table, None, 0
        if not lines:
            return
        read = _rst_table(lines)
        if read is None:
            yield Paragraph(_rst_inline("\n".join(lines)), BlockKind.TABLE)
            return
        self.tables += 1
        head, body = read
        if head:  # a head over two lines or more: each column's name is its parts in order
            names = [" ".join(filter(None, column)) for column in zip(*head)]
            yield Paragraph(table_row(names), BlockKind.TABLE_HEAD, self.tables)
        if body:
            yield Paragraph("\n".join(table_row(row) for row in body), BlockKind.TABLE, self.tables)

    def term_above(self, body: _Body) -> bool:
        """Whether the paragraph being read is a definition list's term: one line, with the line after it indented
        deeper (docutils' rule), in no note; a field (":param name: ...") and a line that opens a literal block are
        not terms."""
        if len(self.buffer.lines) != 1 or body.kind in _ONE_BLOCK:
            return False
        term = self.buffer.lines[0]
        return not _RST_FIELD.match(term) and not term.endswith("::")

    def definition(self, line: str) -> Iterator[Heading | Paragraph]:
        """The term read so far as a block of its own (TERM), then `line` and the lines indented under the term as
        its definition ("work_mem (integer)" over "Sets the base maximum amount of memory ...")."""
        self.buffer.kind = BlockKind.TERM
        if term := self.buffer.flush():
            yield term
        yield from self.open_body(self.paragraph_indent, BlockKind.PROSE)
        yield from self.line(line)

    def title(self, line: str) -> Iterator[Heading | Paragraph] | None:
        """The events of a line that makes (or may open) a title; None for any other line."""
        if self.overline:
            if self.buffer.lines and _RST_ADORNMENT.match(line) and line.strip() == self.overline:
                title = self.buffer.lines[0].strip()
                self.buffer.lines, self.buffer.size, self.overline, self.mode = [], 0, "", ""
                return iter([Heading(_rst_level(self.styles, (line.strip()[0], True)), _rst_inline(title))])
            if not self.buffer.lines and self.mode == "prose":
                self.buffer.lines.append(line)  # the title between the two adornment lines
                return iter(())
            self.overline = ""  # it was a transition or a table border after all
        adornment = _RST_ADORNMENT.match(line)
        if adornment and self.mode == "prose" and len(self.buffer.lines) == 1 and self.paragraph_indent == 0:
            title = self.buffer.lines[0].strip()
            if len(line.strip()) >= min(len(title), 4):
                self.buffer.lines, self.buffer.size, self.mode = [], 0, ""
                return iter([Heading(_rst_level(self.styles, (line.strip()[0], False)), _rst_inline(title))])
        if (
            adornment
            and self.mode in ("", "prose")
            and not self.buffer.lines
            and len(line.strip()) >= 3
            and not line[0].isspace()
        ):
            self.overline = line.strip()
            self.mode = "prose"
            return iter(())
        return None

    def open_body(self, outer: int, kind: BlockKind, *, options: bool = False) -> Iterator[Paragraph]:
        """Read the lines indented deeper than `outer` as a body of `kind`."""
        verbatim = kind in (BlockKind.CODE, BlockKind.TABLE)
        yield from self.begin("", kind, verbatim=verbatim)
        self.bodies.append(_Body(outer, kind, verbatim))
        self.table = [] if kind is BlockKind.TABLE else None  # a table directive's content: read whole
        self.options = options

    def explicit(self, line: str) -> Iterator[Paragraph]:
        """A line starting "..": a directive, a footnote, a target or a comment."""
        indent, text = _indent(line), line.strip()
        if directive := _RST_DIRECTIVE.match(text):
            name, argument = directive.group(1).lower().rsplit(":", 1)[-1], (directive.group(2) or "").strip()
            if name in _RST_ADMONITIONS:
                if name == "admonition":  # its argument is its title
                    title, first = argument, ""
                elif name in ("versionadded", "versionchanged", "deprecated"):  # its argument is a version
                    title, first = f"{_RST_TITLES[name]} {argument}".strip(), ""
                else:  # its argument is the start of its text
                    title, first = _RST_TITLES.get(name, name.capitalize()), argument
                yield from self.open_body(indent, BlockKind.ADMONITION, options=True)
                self.mode = "prose"
                yield from self.add(title)
                yield from self.add("")  # the title: a line of its own
                if first:
                    yield from self.add(first)
            elif name in _RST_CODE:
                yield from self.open_body(indent, BlockKind.CODE, options=True)
            elif name in _RST_TABLES:
                if argument:
                    yield from self.begin("", BlockKind.CAPTION)
                    yield from self.add(argument)
                yield from self.open_body(indent, BlockKind.TABLE, options=True)
            elif name in _RST_CAPTIONS:
                yield from self.open_body(indent, BlockKind.CAPTION, options=True)
            elif name in _RST_NOTICES:
                yield from self.open_body(indent, BlockKind.NOTICE, options=True)
                if argument and name != "include":
                    self.mode = "prose"
                    yield from self.add(argument)
            elif name in _RST_SIGNATURES and argument:
                yield from self.begin("", BlockKind.CODE, verbatim=True)
                yield from self.add(argument)
                yield from self.open_body(indent, BlockKind.PROSE, options=True)
                yield from self.begin("signature", BlockKind.CODE, verbatim=True)  # more signatures may follow
            else:  # another directive: its argument and content are prose ("availability:: Unix, not WASI.")
                yield from self.open_body(indent, BlockKind.PROSE, options=True)
                if argument and name not in _RST_NO_TEXT:
                    self.mode = "prose"
                    yield from self.add(argument)
            return
        if footnote := _RST_FOOTNOTE.match(text):
            yield from self.open_body(indent, BlockKind.PROSE)
            if footnote.group(1):
                self.mode, self.paragraph_indent = "prose", indent
                yield from self.add(footnote.group(1))
            return
        yield from self.open_body(indent, BlockKind.NOTICE)  # a target, or a comment (often a licence header)
        if not _RST_TARGET.match(text) and text[2:].strip():
            self.mode, self.paragraph_indent = "prose", indent
            yield from self.add(text[2:].strip())

    def item(self, line: str, marker: re.Match) -> Iterator[Paragraph]:
        indent = _indent(line)
        enumerator = marker.group(3)
        ordered = enumerator is not None
        while self.lists and self.lists[-1][0] > indent:
            self.lists.pop()
        last = self.lists[-1][1] if self.lists and self.lists[-1][0] == indent else None
        follows = ordered and last is not None and (not enumerator.isdigit() or int(enumerator) == last + 1)
        if self.lists and self.lists[-1][0] == indent and (follows or (not ordered and self.lists[-1][1] is None)):
            order = last + 1 if follows else None
            self.lists[-1] = (indent, order)
        else:
            if self.lists and self.lists[-1][0] == indent:
                self.lists.pop()
            order = _enumerator_value(enumerator) if ordered else None
            self.lists.append((indent, order))
        self.item_indent = len(marker.group(0).expandtabs(4))
        yield from self.begin("item", BlockKind.ITEM, order)
        self.paragraph_indent = indent
        yield from self.add(_item_line(order, line[marker.end() :].strip()))


def _enumerator_value(enumerator: str) -> int:
    """The number a list's first enumerator stands for: "3" is 3, "#" and "a" are 1 ("c" is 3)."""
    if enumerator.isdigit():
        return int(enumerator)
    if len(enumerator) == 1 and enumerator.isalpha():
        return ord(enumerator.lower()) - ord("a") + 1
    return 1


def _rst_level(styles: list[tuple[str, bool]], style: tuple[str, bool]) -> int:
    if style not in styles:
        styles.append(style)
    return styles.index(style) + 1
