"""How a sentence says its sources lack something ("The sources do not say why comets glow."): a statement
about the sources, never a claim one could cite.

Two readings, kept apart because each is tuned to its own use:
- the abstention's (typedrag.abstain.denies_sources): a sentence naming the sources a writing step was given,
  with any denial in it;
- the benchmarks' meta filler (typedrag.evaluation.filler): a sentence naming the sources, the documentation or
  the manual, with a verb of saying or covering denied, or one that says what is asked is not covered.
"""

from __future__ import annotations

import re

# The sources a writing step was given, as a model names them ("the sources", "the provided passages").
THE_SOURCES = (
    r"\b(?:the|these|those|my|your|its|provided|given|supplied|retrieved|available)\s+"
    r"(?:(?:provided|given|supplied|retrieved|available)\s+)?(?:sources?|passages?|documents?|context|texts?|excerpts?)\b"
)
DENIAL = re.compile(r"\b(?:not|no|none|nothing|neither|nor|cannot|unable)\b|n't\b", re.I)
NAMES_SOURCES = re.compile(THE_SOURCES, re.I)

# The benchmarks' reading: the sources, the documentation, the manual, ...
FILLER_SOURCES = re.compile(
    r"\b(?:the|these|those|this|my|your|provided|given|supplied|retrieved|available|cited|numbered)\s+"
    r"(?:(?:provided|given|supplied|retrieved|available|cited|numbered|above|excerpted)\s+)?"
    r"(?:sources?|passages?|documents?|documentation|docs|manual|context|excerpts?|material|information|references?)\b",
    re.I,
)
_SAYING = (
    r"(?:say|state|mention|cover|specify|address|discuss|describe|explain|provide|include|detail|give|contain|"
    r"answer|list|offer|show|indicate|tell|go into|elaborate|clarify|define)"
)
FILLER_DENIED = re.compile(
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
NOT_COVERED = re.compile(r"\b(?:is|are|was|were)(?:\s+not|n't)\s+(?:covered|documented|mentioned|addressed)\b", re.I)
