"""Split documents into ~100-word passages, the retrieval unit of the Typed-RAG paper (DPR-style)."""

from __future__ import annotations

import re

from typedrag.records import Document, Passage

_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*$")
# HTML and wiki tags that dumps leave in article text ("<br>", "</dl>", "<ref name=x>"), and comments: quoted
# in an answer they read as garbage. A "<" not followed by a tag name ("a < b", "<3") is text and stays.
MARKUP = re.compile(r"<!--.*?-->|</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>", re.S)


def chunk_document(doc: Document, words: int = 100) -> list[Passage]:
    """Cut `doc` into passages of about `words` words, ids `<doc_id>#<position>`.

    A cut moves to the nearest sentence end within 30% of the target, so passages read as whole
    sentences; no passage exceeds 1.5x `words`, and a tail that fits in 1.5x is not split off as a
    stub. Markup tags are dropped and whitespace is normalised to single spaces; together the passages
    hold every other word in order.
    """
    if words < 1:
        raise ValueError(f"words must be >= 1, got {words}")
    tokens = MARKUP.sub(" ", doc.text).split()
    longest = max(1, words * 3 // 2)
    slack = words * 3 // 10
    passages: list[Passage] = []
    start = 0
    while start < len(tokens):
        if len(tokens) - start <= longest:
            end = len(tokens)
        else:
            end = start + words
            for offset in range(slack + 1):  # nearest sentence end, preferring the shorter side
                if _SENTENCE_END.search(tokens[end - offset - 1]):
                    end -= offset
                    break
                if _SENTENCE_END.search(tokens[end + offset - 1]):
                    end += offset
                    break
        text = " ".join(tokens[start:end])
        passages.append(Passage(f"{doc.doc_id}#{len(passages)}", doc.doc_id, doc.title, text))
        start = end
    return passages
