"""Split documents into ~100-word passages, the retrieval unit of the Typed-RAG paper (DPR-style).

A passage never crosses from one section of a document to the next (a reader that knows the
document's headings gives its text as blocks, each under a heading path), and carries that path,
for a PDF its pages, and the kind of each of its lines (the kind of the block the line came from:
prose, a list item and its order, code, a table row ...). Documents stream through: a block is
read, cut and forgotten, so a file of any size is chunked in bounded memory.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Iterator

from typedrag.records import PROSE_LINE, SECTION_SEPARATOR, Block, BlockKind, Document, LineKind, Passage

_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*$")
_ENDINGS = frozenset(".!?\"'”’)]")  # a token can end a sentence only if it ends with one of these
# HTML and wiki tags that dumps leave in article text ("<br>", "</dl>", "<ref name=x>"), and comments: quoted
# in an answer they read as garbage. A "<" not followed by a tag name ("a < b", "<3") is text and stays.
# Comments are cut by `without_markup`, not a pattern: "<!--.*?-->" scans to the end of the text from every
# "<!--" no "-->" closes, quadratic on a block of them.
MARKUP = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")
# Hard limits whatever the text: a run without spaces (base64, a minified file, a 50 MB line) is cut into
# pieces of at most MAX_TOKEN_CHARS, and no passage holds more than MAX_PASSAGE_CHARS characters.
MAX_TOKEN_CHARS = 1000
MAX_PASSAGE_CHARS = 3000
MAX_INDENT = 24  # a code line's indentation kept in its passage, in spaces
# Changes with any change to how documents become passages (a reader or the chunker): an index built by
# another version is rebuilt, not synced.
CHUNKER_VERSION = 19
# A table's head longer than this (characters) is not repeated where a passage continues its rows.
MAX_HEAD_CHARS = 300

Lines = tuple[LineKind, ...]


def chunk_document(doc: Document, words: int = 100) -> list[Passage]:
    """All of `doc`'s passages (see `iter_passages`)."""
    return list(iter_passages(doc, words))


def iter_passages(doc: Document, words: int = 100, on_cut: Callable[[str], None] | None = None) -> Iterator[Passage]:
    """Cut `doc` into passages of about `words` words, ids `<doc_id>#<position>`, section by section.

    A cut moves to the nearest sentence end within 30% of the target, so passages read as whole
    sentences, or where there is none (code, lists) to the nearest line start; no passage exceeds 1.5x
    `words` (nor MAX_PASSAGE_CHARS), and a tail that fits in 1.5x is not split off as a stub. Markup tags
    are dropped and whitespace is normalised to single spaces; together the passages hold every other word
    in order. `on_cut` hears a one-line note whenever an over-long run of characters had to be cut. A
    document given as blocks gets the kind of each line of its passages (`Passage.lines`); one given as
    plain text, none (unknown, read as prose).
    """
    if words < 1:
        raise ValueError(f"words must be >= 1, got {words}")
    longest, slack = max(1, words * 3 // 2), words * 3 // 10
    position = 0
    structured = doc.blocks is not None
    for section, run in _section_runs(doc.iter_blocks()):
        path = SECTION_SEPARATOR.join(section)
        for text, pages, lines in _chunks(run, doc, words, longest, slack, on_cut):
            spread = sorted(set(pages)) if pages else []
            yield Passage(
                f"{doc.doc_id}#{position}",
                doc.doc_id,
                doc.title,
                text,
                section=path,
                page=spread[0] if spread else None,
                page_end=spread[-1] if len(spread) > 1 else None,
                lines=lines if structured else (),
            )
            position += 1


def _section_runs(blocks: Iterable[Block]) -> Iterator[tuple[tuple[str, ...], Iterator[Block]]]:
    """Consecutive blocks grouped by section path, each group streamed as it is read."""
    blocks = iter(blocks)
    pending = next(blocks, None)
    while pending is not None:
        section = pending.section
        following: list[Block | None] = [None]

        def run(first: Block = pending) -> Iterator[Block]:
            yield first
            for block in blocks:
                if block.section != section:
                    following[0] = block
                    return
                yield block

        group = run()
        yield section, group
        for _ in group:  # a caller that stopped early: skip the rest of the section
            pass
        pending = following[0]


def _tokens(text: str, doc: Document, on_cut: Callable[[str], None] | None) -> list[str]:
    """The words of a line (its markup already dropped); a run longer than MAX_TOKEN_CHARS cut into pieces (and noted)."""
    tokens = text.split()
    if len(text) <= MAX_TOKEN_CHARS or max(map(len, tokens), default=0) <= MAX_TOKEN_CHARS:
        return tokens
    pieces = []
    for token in tokens:
        if len(token) <= MAX_TOKEN_CHARS:
            pieces.append(token)
            continue
        if on_cut is not None:
            on_cut(
                f"{doc.source or doc.doc_id}: a run of {len(token):,} characters without a space was cut into "
                f"pieces of {MAX_TOKEN_CHARS:,} (binary or encoded data?)"
            )
        pieces += [token[start : start + MAX_TOKEN_CHARS] for start in range(0, len(token), MAX_TOKEN_CHARS)]
    return pieces


class _Lines:
    """Where each line of the words read begins (token indices, the first at 0), its kind, and for a table's row the
    head of its table (the header row's text, repeated where a passage continues the rows)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.kinds: list[LineKind] = []
        self.heads: list[str | None] = []
        self.indents: list[int] = []  # a code line's indentation, in spaces (Python's meaning rests on it); else 0

    def begin(self, at: int, kind: LineKind, head: str | None = None, indent: int = 0) -> None:
        self.starts.append(at)
        self.kinds.append(kind)
        self.heads.append(head)
        self.indents.append(indent)

    def joined(self, tokens: list[str], start: int, end: int) -> tuple[str, Lines]:
        """tokens[start:end] as text (words joined by spaces, a new line where a line begins) and the kind of
        each of its lines: a passage that begins inside a line takes that line's kind. Where the passage holds
        rows of a table whose head it does not, the head is put before the first row that begins in it (a row
        cut at the passage's start stays above it, unnamed)."""
        first = bisect.bisect_right(self.starts, start) - 1  # the line `start` is in
        inside = self.starts[first + 1 : bisect.bisect_left(self.starts, end)]
        kinds = list(self.kinds[first : first + 1 + len(inside)])
        edges = [start, *inside, end]
        texts = [" ".join(tokens[a:b]) for a, b in zip(edges, edges[1:])]
        at = 0 if self.starts[first] == start else 1  # the first line that begins in the passage
        texts = [" " * self.indents[first + n] + text if n >= at else text for n, text in enumerate(texts)]
        if at < len(kinds) and (head := self.heads[first + at]) is not None:
            texts.insert(at, head)
            kinds.insert(at, LineKind(BlockKind.TABLE_HEAD, kinds[at].order))
        return "\n".join(texts), tuple(kinds)

    def ends_row(self, at: int) -> bool:
        """Whether a table's row (or its head) ends just before token `at`, where a line begins: a place to cut."""
        line = self._beginning(at)
        return line is not None and self.kinds[line - 1].kind in (BlockKind.TABLE, BlockKind.TABLE_HEAD)

    def starts_line(self, at: int) -> bool:
        """Whether a line (a paragraph, a list item, a code line) begins at token `at`: a place to cut."""
        return self._beginning(at) is not None

    def _beginning(self, at: int) -> int | None:
        """The number of the line that begins at token `at`, unless none does or it is the first."""
        line = bisect.bisect_left(self.starts, at)
        return line if 0 < line < len(self.starts) and self.starts[line] == at else None

    def drop_before(self, start: int) -> None:
        """Forget the lines that end before token `start`, and count from there."""
        first = bisect.bisect_right(self.starts, start) - 1
        self.starts = [max(0, at - start) for at in self.starts[first:]]
        self.kinds = self.kinds[first:]
        self.heads = self.heads[first:]
        self.indents = self.indents[first:]


def without_markup(text: str) -> str:
    """`text` with its HTML comments and tags (MARKUP) each read as a space, in linear time."""
    kept, at = [], 0
    while (opened := text.find("<!--", at)) >= 0 and (closed := text.find("-->", opened + 4)) >= 0:
        kept += [text[at:opened], " "]
        at = closed + 3
    kept.append(text[at:])
    return MARKUP.sub(" ", "".join(kept))


def _kind_of(block: Block) -> LineKind:
    return PROSE_LINE if block.kind is BlockKind.PROSE and block.order is None else LineKind(block.kind, block.order)


def _chunks(
    blocks: Iterable[Block], doc: Document, words: int, longest: int, slack: int, on_cut: Callable[[str], None] | None
) -> Iterator[tuple[str, list[int], Lines]]:
    """(text, pages of its words, kinds of its lines) of each passage of one section, cut as soon as enough has
    been read to decide where. Blocks and their lines (paragraphs, list items, table rows, code) stay on lines
    of their own in the passage, so a line with no full stop does not run into the next sentence, and each
    line has the kind of its block. The words read but not yet cut are kept from `start` on; the lists are
    compacted now and then, so a single huge block is cut in linear time."""
    tokens: list[str] = []
    pages: list[int] = []  # one per token, only when the blocks have pages (a PDF)
    lines = _Lines()
    start = 0
    head: tuple[int | None, str] | None = None  # the number and head of the table whose rows are being read
    for block in blocks:
        kind = _kind_of(block)
        if head is not None and (block.kind is not BlockKind.TABLE or block.order != head[0]):
            head = None
        for line in without_markup(block.text).split("\n"):  # list items, table rows, code lines: lines of their own
            new = _tokens(line, doc, on_cut)
            if new:
                indent = _indent(line) if block.kind is BlockKind.CODE else 0
                lines.begin(len(tokens), kind, head[1] if head is not None else None, indent)
                if block.kind is BlockKind.TABLE_HEAD and len(text := " ".join(new)) <= MAX_HEAD_CHARS:
                    head = (block.order, text)
            tokens += new
            if block.page is not None:
                pages += [block.page] * len(new)
        while len(tokens) - start > longest + slack:  # enough lookahead: the cut falls within what is read
            text, end, kinds = _capped(tokens, lines, start, start + _cut(tokens, lines, start, words, slack))
            yield text, pages[start:end], kinds
            start = end
        if start > 4096:
            del tokens[:start], pages[:start]
            lines.drop_before(start)
            start = 0
    while start < len(tokens):
        end = len(tokens) if len(tokens) - start <= longest else start + _cut(tokens, lines, start, words, slack)
        text, end, kinds = _capped(tokens, lines, start, end)
        yield text, pages[start:end], kinds
        start = end


def _indent(line: str) -> int:
    """A code line's indentation in spaces (a tab is four), at most MAX_INDENT."""
    expanded = line.expandtabs(4)
    return min(len(expanded) - len(expanded.lstrip(" ")), MAX_INDENT)


def _capped(tokens: list[str], lines: _Lines, start: int, end: int) -> tuple[str, int, Lines]:
    """The passage tokens[start:end] as text, its end and its lines' kinds, made shorter if the text runs past
    MAX_PASSAGE_CHARS (joined text is as long as the words plus one separator between each two, so the check
    is on the text)."""
    text, kinds = lines.joined(tokens, start, end)
    if len(text) <= MAX_PASSAGE_CHARS:
        return text, end, kinds
    end = start + _within_char_cap(tokens, start, end - start)
    text, kinds = lines.joined(tokens, start, end)
    while len(text) > MAX_PASSAGE_CHARS and end - start > 1:  # code lines' indentation took the rest
        end = start + max(1, (end - start) * MAX_PASSAGE_CHARS // len(text))
        text, kinds = lines.joined(tokens, start, end)
    return text, end, kinds


def _cut(tokens: list[str], lines: _Lines, start: int, words: int, slack: int) -> int:
    """How many words the passage starting at `start` takes: to the sentence end or the end of a table's row
    nearest `words`, else to the start of a line nearest it (code and lists hold few full stops: cut inside a line,
    "If xsrf_cookies is set, ..." after a code block became a passage ending "If" and one opening "xsrf_cookies is
    set"), else `words`."""
    near = [candidate for offset in range(slack + 1) for candidate in (words - offset, words + offset)]  # shorter first
    for candidate in near:
        if _ends_sentence(tokens[start + candidate - 1]) or lines.ends_row(start + candidate):
            return candidate
    return next((candidate for candidate in near if lines.starts_line(start + candidate)), words)


def _ends_sentence(token: str) -> bool:
    return token[-1] in _ENDINGS and _SENTENCE_END.search(token) is not None


def _within_char_cap(tokens: list[str], start: int, length: int) -> int:
    """`length`, made shorter if those words hold more than MAX_PASSAGE_CHARS characters (at least one word)."""
    if sum(map(len, tokens[start : start + length])) + length - 1 <= MAX_PASSAGE_CHARS:
        return length
    size = 0
    for index in range(length):
        size += len(tokens[start + index]) + (1 if index else 0)
        if size > MAX_PASSAGE_CHARS:
            return max(1, index)
    return length
