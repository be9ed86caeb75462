"""Meta filler: the sentences of an answer that speak of what its sources do not say ("The sources do not cover
caching or bulk operations."). A reader (and a blind judge) holds them against an answer unless the question
asked for what is missing; the benchmarks count them, so a change of prompts that adds or removes them shows.

A sentence counts when it names the sources (the sources, the provided passages, the documentation, the manual,
...) and says they lack something: a verb of saying or covering denied ("do not mention", "is not covered in"),
"no information", "cannot determine", "beyond the scope". A claim about the subject that happens to use "not"
("jsonb does not keep whitespace [2]") does not count, nor does a sentence on "documents" as a subject (a JSON
document, a document store) without such a denial.
"""

from __future__ import annotations

import re

from typedrag.citations import strip_markers
from typedrag.phrasing.denials import FILLER_DENIED, FILLER_SOURCES, NOT_COVERED
from typedrag.text import split_sentences

__all__ = ["meta_sentences"]


def meta_sentences(answer: str) -> list[str]:
    """The sentences of `answer` (citation markers set aside) that say its sources do not say something."""
    found = []
    for sentence in split_sentences(answer):
        text = strip_markers(sentence)
        if (FILLER_SOURCES.search(text) and FILLER_DENIED.search(text)) or NOT_COVERED.search(text):
            found.append(re.sub(r"\s+([.,;:!?])", r"\1", " ".join(text.split())))
    return found
