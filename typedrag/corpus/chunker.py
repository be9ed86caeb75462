"""Split documents into ~100-word passages, the retrieval unit of the Typed-RAG paper (DPR-style).

A passage never crosses from one section of a document to the next (a reader that knows the
document's headings gives its text as blocks, each under a heading path), and carries that path
and, for a PDF, its pages. Documents stream through: a block is read, cut and forgotten, so a
file of any size is chunked in bounded memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from typedrag.records import SECTION_SEPARATOR, Block, Document, Passage

_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*$")
# HTML and wiki tags that dumps leave in article text ("<br>", "</dl>", "<ref name=x>"), and comments: quoted
# in an answer they read as garbage. A "<" not followed by a tag name ("a < b", "<3") is text and stays.
MARKUP = re.compile(r"<!--.*?-->|</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>", re.S)
# Hard limits whatever the text: a run without spaces (base64, a minified file, a 50 MB line) is cut into
# pieces of at most MAX_TOKEN_CHARS, and no passage holds more than MAX_PASSAGE_CHARS characters.
MAX_TOKEN_CHARS = 1000
MAX_PASSAGE_CHARS = 3000


@dataclass(frozen=True)
class _Word:
    text: str
    page: int | None


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
    position = 0
    for section, run in _section_runs(doc.iter_blocks()):
        for chunk in _chunks(_words(run, doc, on_cut), words):
            pages = sorted({w.page for w in chunk if w.page is not None})
            yield Passage(
                f"{doc.doc_id}#{position}",
                doc.doc_id,
                doc.title,
                " ".join(w.text for w in chunk),
                section=SECTION_SEPARATOR.join(section),
                page=pages[0] if pages else None,
                page_end=pages[-1] if len(pages) > 1 else None,
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


def _words(blocks: Iterable[Block], doc: Document, on_cut: Callable[[str], None] | None) -> Iterator[_Word]:
    for block in blocks:
        for token in MARKUP.sub(" ", block.text).split():
            if len(token) <= MAX_TOKEN_CHARS:
                yield _Word(token, block.page)
                continue
            if on_cut is not None:
                on_cut(
                    f"{doc.source or doc.doc_id}: a run of {len(token):,} characters without a space was cut into "
                    f"pieces of {MAX_TOKEN_CHARS:,} (binary or encoded data?)"
                )
            for start in range(0, len(token), MAX_TOKEN_CHARS):
                yield _Word(token[start : start + MAX_TOKEN_CHARS], block.page)


def _chunks(stream: Iterator[_Word], words: int) -> Iterator[list[_Word]]:
    """Passages' words, cut as soon as enough of the section has been read to decide where."""
    longest = max(1, words * 3 // 2)
    slack = words * 3 // 10
    buffer: list[_Word] = []
    for word in stream:
        buffer.append(word)
        if len(buffer) > longest + slack:  # enough lookahead: the cut falls within the buffer
            end = _cut(buffer, words, slack)
            yield buffer[:end]
            del buffer[:end]
    while buffer:
        end = len(buffer) if len(buffer) <= longest else _cut(buffer, words, slack)
        end = _within_char_cap(buffer, end)
        yield buffer[:end]
        del buffer[:end]


def _cut(buffer: list[_Word], words: int, slack: int) -> int:
    """Where the passage starting the buffer ends: the sentence end nearest `words`, else `words`."""
    end = words
    for offset in range(slack + 1):  # nearest sentence end, preferring the shorter side
        if _SENTENCE_END.search(buffer[end - offset - 1].text):
            end -= offset
            break
        if _SENTENCE_END.search(buffer[end + offset - 1].text):
            end += offset
            break
    return _within_char_cap(buffer, end)


def _within_char_cap(buffer: list[_Word], end: int) -> int:
    """`end`, moved earlier if the words up to it hold more than MAX_PASSAGE_CHARS characters (at least one word)."""
    size = 0
    for index in range(end):
        size += len(buffer[index].text) + (1 if index else 0)
        if size > MAX_PASSAGE_CHARS:
            return max(1, index)
    return end
