"""Split documents into ~100-word passages, the retrieval unit of the Typed-RAG paper (DPR-style).

A passage never crosses from one section of a document to the next (a reader that knows the
document's headings gives its text as blocks, each under a heading path), and carries that path
and, for a PDF, its pages. Documents stream through: a block is read, cut and forgotten, so a
file of any size is chunked in bounded memory.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Iterator

from typedrag.records import SECTION_SEPARATOR, Block, Document, Passage

_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*$")
_ENDINGS = frozenset(".!?\"'”’)]")  # a token can end a sentence only if it ends with one of these
# HTML and wiki tags that dumps leave in article text ("<br>", "</dl>", "<ref name=x>"), and comments: quoted
# in an answer they read as garbage. A "<" not followed by a tag name ("a < b", "<3") is text and stays.
MARKUP = re.compile(r"<!--.*?-->|</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>", re.S)
# Hard limits whatever the text: a run without spaces (base64, a minified file, a 50 MB line) is cut into
# pieces of at most MAX_TOKEN_CHARS, and no passage holds more than MAX_PASSAGE_CHARS characters.
MAX_TOKEN_CHARS = 1000
MAX_PASSAGE_CHARS = 3000
# Changes with any change to how documents become passages (a reader or the chunker): an index built by
# another version is rebuilt, not synced.
CHUNKER_VERSION = 5


def chunk_document(doc: Document, words: int = 100) -> list[Passage]:
    """All of `doc`'s passages (see `iter_passages`)."""
    return list(iter_passages(doc, words))


def iter_passages(doc: Document, words: int = 100, on_cut: Callable[[str], None] | None = None) -> Iterator[Passage]:
    """Cut `doc` into passages of about `words` words, ids `<doc_id>#<position>`, section by section.

    A cut moves to the nearest sentence end within 30% of the target, so passages read as whole
    sentences; no passage exceeds 1.5x `words` (nor MAX_PASSAGE_CHARS), and a tail that fits in 1.5x is
    not split off as a stub. Markup tags are dropped and whitespace is normalised to single spaces;
    together the passages hold every other word in order. `on_cut` hears a one-line note whenever an
    over-long run of characters had to be cut.
    """
    if words < 1:
        raise ValueError(f"words must be >= 1, got {words}")
    longest, slack = max(1, words * 3 // 2), words * 3 // 10
    position = 0
    for section, run in _section_runs(doc.iter_blocks()):
        path = SECTION_SEPARATOR.join(section)
        for text, pages in _chunks(run, doc, words, longest, slack, on_cut):
            spread = sorted(set(pages)) if pages else []
            yield Passage(
                f"{doc.doc_id}#{position}",
                doc.doc_id,
                doc.title,
                text,
                section=path,
                page=spread[0] if spread else None,
                page_end=spread[-1] if len(spread) > 1 else None,
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


def _chunks(
    blocks: Iterable[Block], doc: Document, words: int, longest: int, slack: int, on_cut: Callable[[str], None] | None
) -> Iterator[tuple[str, list[int]]]:
    """(text, pages of its words) of each passage of one section, cut as soon as enough has been read to
    decide where. Blocks and their lines (paragraphs, list items, table rows, code) stay on lines of their
    own in the passage, so a line with no full stop does not run into the next sentence. The words read
    but not yet cut are kept from `start` on; the lists are compacted now and then, so a single huge
    block is cut in linear time."""
    tokens: list[str] = []
    pages: list[int] = []  # one per token, only when the blocks have pages (a PDF)
    starts: list[int] = []  # where each block after the first begins, as token indices
    start = 0
    for block in blocks:
        for line in MARKUP.sub(" ", block.text).split("\n"):  # list items, table rows, code lines: lines of their own
            new = _tokens(line, doc, on_cut)
            if tokens and new:
                starts.append(len(tokens))
            tokens += new
            if block.page is not None:
                pages += [block.page] * len(new)
        while len(tokens) - start > longest + slack:  # enough lookahead: the cut falls within what is read
            text, end = _capped(tokens, starts, start, start + _cut(tokens, start, words, slack))
            yield text, pages[start:end]
            start = end
        if start > 4096:
            del tokens[:start], pages[:start]
            starts = [i - start for i in starts if i > start]
            start = 0
    while start < len(tokens):
        end = len(tokens) if len(tokens) - start <= longest else start + _cut(tokens, start, words, slack)
        text, end = _capped(tokens, starts, start, end)
        yield text, pages[start:end]
        start = end


def _capped(tokens: list[str], starts: list[int], start: int, end: int) -> tuple[str, int]:
    """The passage tokens[start:end] as text, and its end, made shorter if the text runs past MAX_PASSAGE_CHARS
    (joined text is as long as the words plus one separator between each two, so the check is on the text)."""
    text = _joined(tokens, starts, start, end)
    if len(text) <= MAX_PASSAGE_CHARS:
        return text, end
    end = start + _within_char_cap(tokens, start, end - start)
    return _joined(tokens, starts, start, end), end


def _joined(tokens: list[str], starts: list[int], start: int, end: int) -> str:
    """tokens[start:end] as text: words joined by spaces, a new line where a block begins."""
    inside = starts[bisect.bisect_right(starts, start) : bisect.bisect_left(starts, end)]
    if not inside:
        return " ".join(tokens[start:end])
    edges = [start, *inside, end]
    return "\n".join(" ".join(tokens[a:b]) for a, b in zip(edges, edges[1:]))


def _cut(tokens: list[str], start: int, words: int, slack: int) -> int:
    """How many words the passage starting at `start` takes: to the sentence end nearest `words`, else `words`."""
    length = words
    for offset in range(slack + 1):  # nearest sentence end, preferring the shorter side
        if _ends_sentence(tokens[start + words - offset - 1]):
            length = words - offset
            break
        if _ends_sentence(tokens[start + words + offset - 1]):
            length = words + offset
            break
    return length


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
