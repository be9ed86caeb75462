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
from typedrag.text import split_sentences

__all__ = ["meta_sentences"]

_SOURCES = re.compile(
    r"\b(?:the|these|those|this|my|your|provided|given|supplied|retrieved|available|cited|numbered)\s+"
    r"(?:(?:provided|given|supplied|retrieved|available|cited|numbered|above|excerpted)\s+)?"
    r"(?:sources?|passages?|documents?|documentation|docs|manual|context|excerpts?|material|information|references?)\b",
    re.I,
)
_SAYING = (
    r"(?:say|state|mention|cover|specify|address|discuss|describe|explain|provide|include|detail|give|contain|"
    r"answer|list|offer|show|indicate|tell|go into|elaborate|clarify|define)"
)
_DENIED = re.compile(
    rf"\b(?:do|does|did)(?:\s+not|n't)\s+(?:\w+\s+)?{_SAYING}"  # "do not mention", "does not explicitly say"
    r"|\b(?:is|are|was|were)(?:\s+not|n't)\s+(?:\w+\s+)?(?:covered|mentioned|discussed|addressed|described|specified|"
    r"included|stated|given|provided|detailed|explained|found|available|listed)"
    rf"|\b(?:no|not any)\s+(?:\w+\s+)?(?:information|mention|details?|data|guidance|discussion|explanation)\b"
    r"|\b(?:cannot|can't|can not|unable to)\s+(?:\w+\s+)?(?:determine|say|tell|answer|describe|confirm|be determined|be answered)"
    r"|\b(?:beyond|outside)\s+(?:the\s+)?scope\b|\bsilent\s+(?:on|about)\b|\bdo(?:es)?\s+not\s+go\s+into\b"
    r"|\blacks?\b|\blacking\b|\bnothing\s+(?:about|on|in)\b|\bneither\b.*\bnor\b.*\b" + _SAYING,
    re.I,
)


# Said of what is asked, with no source named: "Which composer wrote it is not covered", "... is not documented".
_NOT_COVERED = re.compile(r"\b(?:is|are|was|were)(?:\s+not|n't)\s+(?:covered|documented|mentioned|addressed)\b", re.I)


def meta_sentences(answer: str) -> list[str]:
    """The sentences of `answer` (citation markers set aside) that say its sources do not say something."""
    found = []
    for sentence in split_sentences(answer):
        text = strip_markers(sentence)
        if (_SOURCES.search(text) and _DENIED.search(text)) or _NOT_COVERED.search(text):
            found.append(re.sub(r"\s+([.,;:!?])", r"\1", " ".join(text.split())))
    return found
