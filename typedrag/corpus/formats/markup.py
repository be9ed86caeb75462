"""Plain text, Markdown and reStructuredText, streamed line by line so a 4 GB file is never held whole.

Paragraphs (text between blank lines) become blocks; Markdown's ATX (`#`) and setext headings and
reStructuredText's underlined (and overlined) titles give the section path. Fenced code stays as it
is written. A first pass checks the whole file is UTF-8 without NUL bytes, so a binary file is
reported before any of it reaches the index. docutils is not used: it needs the whole document in
memory, and its warnings and errors on sloppy input would have to be caught one by one.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from typedrag.corpus.formats.common import MAX_BLOCK_CHARS, Outline, Parsed, Unreadable, blocks_of, clean, title_line
from typedrag.records import Block

_CHUNK = 1 << 20
_LONGEST_LINE = 1 << 16  # characters read at once: a file with no line breaks still streams
_TITLE_SEARCH = 1 << 20  # characters to look through for the first heading

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MD_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1+[ \t]*$")  # one punctuation character, repeated
_RST_EXPLICIT = re.compile(r"^\.\.(?:[ \t]|$)")  # directives, comments and link targets
_RST_ROLE = re.compile(r":[\w.+-]+:`([^`\n]*?)(?:\s*<[^>\n]*>)?`")
_RST_LINK = re.compile(r"`([^`<\n]*?)\s*(?:<[^>\n]*>)?`__?")
_RST_LITERAL = re.compile(r"``([^`\n]+)``")


@dataclass(frozen=True, slots=True)
class Heading:
    """A heading line (or an underlined one), at its level: 1 is the outermost."""

    level: int
    text: str


@dataclass(frozen=True, slots=True)
class Paragraph:
    """A run of text between blank lines or headings (a fenced code block is one, whole)."""

    text: str


def read_markup(path: Path, syntax: str, fallback_title: str | None = None) -> Parsed:
    """`syntax` is "text", "markdown" or "rst"; raises `Unreadable` (with the line) for binary content. The title
    is the first heading, else `fallback_title` (else the file name)."""
    check_utf8(path)
    title = "" if syntax == "text" else title_line(first_heading(path, syntax))
    title = title or (title_line(path.stem) if fallback_title is None else fallback_title)
    return Parsed(title, _blocks(path, syntax, title))


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
                raise Unreadable("not a UTF-8 text file (binary?), skipped", line + chunk.count(b"\n", 0, e.start)) from None
            nul = chunk.find(b"\x00")
            if nul >= 0:
                raise Unreadable("NUL byte (binary file?), skipped", line + chunk.count(b"\n", 0, nul))
            line += chunk.count(b"\n")
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise Unreadable("not a UTF-8 text file (binary?), skipped", line) from None


def lines(path: Path) -> Iterator[str]:
    """Decoded lines without their line break; a line longer than 64 K characters comes in pieces."""
    with open(path, encoding="utf-8-sig", errors="replace", newline=None) as f:
        while line := f.readline(_LONGEST_LINE):
            yield clean(line.removesuffix("\n"))


def first_heading(path: Path, syntax: str) -> str:
    """The first heading in the first megabyte of the file, or ""."""
    seen = 0
    for event in events(lines(path), syntax):
        if isinstance(event, Heading):
            return event.text
        seen += len(event.text)
        if seen > _TITLE_SEARCH:
            break
    return ""


def _blocks(path: Path, syntax: str, title: str) -> Iterator[Block]:
    outline = Outline(title)
    for event in events(lines(path), syntax):
        if isinstance(event, Heading):
            outline.heading(event.level, event.text)
        else:
            yield from blocks_of(event.text, outline.path)


def events(source: Iterator[str], syntax: str) -> Iterator[Heading | Paragraph]:
    if syntax == "markdown":
        return _markdown(source)
    if syntax == "rst":
        return _rst(source)
    return _paragraphs(source)


class _Buffer:
    """The lines of the paragraph being read; hands out a `Paragraph` before it outgrows a block."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0

    def add(self, line: str) -> Paragraph | None:
        self.lines.append(line)
        self.size += len(line) + 1
        return self.flush() if self.size > MAX_BLOCK_CHARS else None

    def flush(self, inline=None, verbatim: bool = False) -> Paragraph | None:
        """The paragraph read so far: a code block's lines as they are; prose unwrapped (see `unwrap`)."""
        text = ("\n".join(self.lines) if verbatim else unwrap(self.lines)).strip("\n")
        self.lines, self.size = [], 0
        if inline:
            text = inline(text)
        return Paragraph(text) if text.strip() else None


_STRUCTURED_LINE = re.compile(r"^\s*(?:[-*+•]\s|\d{1,3}[.)]\s|\|)|^(?: {4}|\t)")


def unwrap(lines: list[str]) -> str:
    """A paragraph's lines as text: a hard-wrapped line joins the one before with a space, but a list item,
    a table row or an indented (code) line stays a line of its own."""
    text = ""
    for line in lines:
        if not text:
            text = line
        elif _STRUCTURED_LINE.match(line):
            text += "\n" + line
        else:
            text += " " + line.strip()
    return text


def _paragraphs(source: Iterator[str]) -> Iterator[Paragraph]:
    buffer = _Buffer()
    for line in source:
        done = buffer.flush() if not line.strip() else buffer.add(line)
        if done:
            yield done
    if done := buffer.flush():
        yield done


def _md_inline(text: str) -> str:
    return _MD_LINK.sub(r"\1", text)


def _markdown(source: Iterator[str]) -> Iterator[Heading | Paragraph]:
    buffer = _Buffer()
    fence = ""
    for line in source:
        if fence:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = ""
                if done := buffer.flush(verbatim=True):
                    yield done
            elif done := buffer.add(line):
                yield done
            continue
        if opened := _FENCE.match(line):
            if done := buffer.flush(_md_inline):
                yield done
            fence = opened.group(1)
            continue
        if atx := _ATX.match(line):
            if done := buffer.flush(_md_inline):
                yield done
            yield Heading(len(atx.group(1)), _md_inline(atx.group(2) or ""))
            continue
        if setext := _SETEXT.match(line):
            if not buffer.lines:
                continue  # a thematic break
            text = " ".join(buffer.lines)
            buffer.lines, buffer.size = [], 0
            yield Heading(1 if setext.group(1)[0] == "=" else 2, _md_inline(text))
            continue
        if not line.strip():
            if done := buffer.flush(_md_inline):
                yield done
        elif done := buffer.add(line):
            yield Paragraph(_md_inline(done.text))
    if done := buffer.flush(_md_inline):
        yield done


def _rst_inline(text: str) -> str:
    return _RST_LITERAL.sub(r"\1", _RST_LINK.sub(r"\1", _RST_ROLE.sub(r"\1", text)))


def _rst(source: Iterator[str]) -> Iterator[Heading | Paragraph]:
    """Titles are a text line under an adornment line (`====`) at least as long, optionally over one too;
    levels follow the order in which adornment styles first appear, as in docutils."""
    buffer = _Buffer()
    styles: list[tuple[str, bool]] = []
    overline = ""  # an adornment line that may open an overlined title
    skipping_directive = False
    for line in source:
        if overline:
            if buffer.lines and _RST_ADORNMENT.match(line) and line.strip() == overline:
                title = buffer.lines[0].strip()
                buffer.lines, buffer.size, overline = [], 0, ""
                yield Heading(_rst_level(styles, (line.strip()[0], True)), _rst_inline(title))
                continue
            if not buffer.lines and line.strip():
                buffer.add(line)
                continue
            overline = ""  # it was a transition or a table border after all
        adornment = _RST_ADORNMENT.match(line)
        if adornment and len(buffer.lines) == 1 and buffer.lines[0].strip() and not buffer.lines[0][0].isspace():
            title = buffer.lines[0].strip()
            if len(line.strip()) >= min(len(title), 4):
                buffer.lines, buffer.size = [], 0
                yield Heading(_rst_level(styles, (line.strip()[0], False)), _rst_inline(title))
                continue
        if adornment and not buffer.lines and len(line.strip()) >= 3:
            overline = line.strip()
            continue
        if _RST_EXPLICIT.match(line):  # ".. note::", ".. _target:", ".. comment": the marker line carries no prose
            if done := buffer.flush(_rst_inline):
                yield done
            skipping_directive = True
            continue
        if skipping_directive and line.strip().startswith(":") and line[:1].isspace():
            continue  # a directive's options (":maxdepth: 2")
        skipping_directive = False
        if not line.strip():
            if done := buffer.flush(_rst_inline):
                yield done
        elif done := buffer.add(line):
            yield Paragraph(_rst_inline(done.text))
    if done := buffer.flush(_rst_inline):
        yield done


def _rst_level(styles: list[tuple[str, bool]], style: tuple[str, bool]) -> int:
    if style not in styles:
        styles.append(style)
    return styles.index(style) + 1
