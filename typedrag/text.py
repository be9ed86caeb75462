"""Text helpers shared by retrieval, planning and extraction: words, terms, key phrases, one sentence splitter.
(The English words they read with, and how a question is phrased, are typedrag.phrasing's.)"""

from __future__ import annotations

import re

from typedrag.phrasing.content import WORD, content_words, key_phrases
from typedrag.phrasing.words import ABBREVIATIONS, ENDINGS, OWN_S, SNOWBALL_STOPWORDS, STOPWORDS

# Named here too: SNOWBALL_STOPWORDS (the index reads its query stop words from typedrag.text), and the content
# words and key phrases of typedrag.phrasing.content that most readers of text take from here.
__all__ = [
    "SNOWBALL_STOPWORDS",
    "STOPWORDS",
    "WORD",
    "content_words",
    "for_terminal",
    "key_phrases",
    "split_sentences",
    "terms",
    "word_pieces",
]

_WORD_PIECE = re.compile(r"\s*\S+\s*|\s+")


def word_pieces(text: str) -> list[str]:
    """`text` cut into words, each with the whitespace around it, so the pieces concatenate back to it
    (how a streamed reply arrives, and how a finished one is replayed as a stream)."""
    return _WORD_PIECE.findall(text)


def terms(text: str) -> set[str]:
    """The content words of `text`, lower case, with common English endings cut ("sinking" -> "sink",
    "zoos" -> "zoo", "viruses" and "virus" -> "virus")."""
    found = set()
    for word in content_words(text.lower()):
        word = word.removesuffix("'s")
        for ending, shortest in ENDINGS:
            if word.endswith(ending) and len(word) - len(ending) >= shortest:
                if not (ending == "s" and word.endswith(OWN_S)):
                    word = word[: -len(ending)]
                break
        found.add(word)
    return found


# A candidate boundary: . ! or ? (and closing quotes/brackets, and citation markers) before a space and
# a capital, digit, quote or bracket.
_BOUNDARY = re.compile(r"[.!?][\"')\]]*((?:\s?\[\d{1,3}\])*)\s+(?=[A-Z0-9\"'(]|\[(?!\d{1,3}\]))|\n+")
_LAST_WORD = re.compile(r"(?<![A-Za-z0-9])([A-Za-z][A-Za-z.]*)\.[\"')\]]*$")  # a whole word: "1930s." is none


def _ends_with_abbreviation(text: str) -> bool:
    """True for "... No.", "... c.", "... J.", "... e.g.", "... U.S." (not for "... in 1984.")."""
    match = _LAST_WORD.search(text)
    if match is None:
        return False
    word = match.group(1)
    if "." in word:  # e.g. / i.e. / U.S.
        return True
    return len(word) == 1 or word.lower() in ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, each keeping the citation markers like [3] that follow it.

    Splits at . ! ? before a capital, digit or quote, and at line breaks, but not after
    abbreviations and initials ("Symphony No. 9 was written c. 1824.", "J. R. R. Tolkien").
    """
    pieces: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        if match.group(0).startswith("\n"):
            end = match.end()
        else:
            head = text[start : match.start() + 1]
            if _ends_with_abbreviation(head):
                continue
            end = match.end()
        piece = text[start:end].strip()
        if piece:
            pieces.append(piece)
        start = end
    tail = text[start:].strip()
    if tail:
        pieces.append(tail)
    return pieces


# What a terminal would act on instead of showing: C0 controls but newline and tab (ESC starts colour,
# clear-screen, OSC 52 clipboard writes and OSC 8 links; CR overwrites a line), DEL, the C1 controls
# (0x9b is a one-byte CSI), and the bidirectional overrides that make text read other than it runs.
_TERMINAL_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def for_terminal(text: str) -> str:
    """`text` safe to print: every control character shown as a visible escape (`\\x1b`), never obeyed.

    For text from a corpus, a model or a file name on its way to a terminal; JSON output keeps the text as is.
    """
    return _TERMINAL_CONTROLS.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text
    )
