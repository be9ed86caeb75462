"""Which words of a text carry its meaning: English words less the stop words, and runs of them (key phrases).

Below the rest of phrasing and below `typedrag.text`, which hands these on: both read questions and passages
through them.
"""

from __future__ import annotations

import re

from typedrag.phrasing.words import STOPWORDS

WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'+#.-]*[A-Za-z0-9+#]|[A-Za-z0-9]")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'+#.-]*[A-Za-z0-9+#]|[A-Za-z0-9]|[^\sA-Za-z0-9]")


def content_words(text: str) -> list[str]:
    """The words of `text` that carry meaning (no stopwords), in order."""
    return [w for w in WORD.findall(text) if w.lower() not in STOPWORDS]


def key_phrases(text: str) -> list[str]:
    """Runs of consecutive content words, longest first: a cheap noun-phrase chunker."""
    phrases: list[list[str]] = [[]]
    for token in _TOKEN.findall(text):
        if token.lower() in STOPWORDS or not token[0].isalnum():
            if phrases[-1]:
                phrases.append([])
        else:
            phrases[-1].append(token)
    found = [" ".join(p) for p in phrases if p]
    return sorted(dict.fromkeys(found), key=lambda p: -len(p.split()))
