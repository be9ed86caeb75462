"""Debate, offline: the case for and the case against, each quoting only sentences that take that side."""

from __future__ import annotations

import re

from typedrag.engines.base import Extract, WriteTask
from typedrag.engines.offline.decomposed import Facet, aspect, combined
from typedrag.engines.offline.questions import subject
from typedrag.engines.offline.settings import OfflineSettings
from typedrag.engines.offline.shapes import AGAINST, FOR
from typedrag.strategies.debate import DebatePlan, Perspective

FACETS = (Facet("in favour", "For", FOR), Facet("against", "Against", AGAINST))
_QUERY_WORDS = {"in favour": "benefits", "against": "criticism"}
_CORE = re.compile(
    r"^(?:is it (?:right|wrong|ethical|moral|fair|ok|okay|good|bad) (?:to|that)|should (?:we|i|you|people|the government|governments)|"
    r"should|is|are|do you think|does|do|can|what do you think (?:of|about)|your opinion on|"
    r"what are the pros and cons of|pros and cons of)\s+",
    re.I,
)


def plan(question: str) -> DebatePlan:
    """The case for and the case against, each searched around the topic."""
    core, phrase = subject(question, _CORE, "debated topic")
    return DebatePlan(
        topic=core or phrase,
        perspectives=[Perspective(name=f.word, sub_query=f"{phrase} {_QUERY_WORDS[f.word]}") for f in FACETS],
    )


def aspect_answer(task: WriteTask, settings: OfflineSettings) -> Extract:
    return aspect(task, settings, FACETS)


def mediated(task: WriteTask, settings: OfflineSettings) -> Extract:
    """Plain RAG's lead, then one sentence for and one against; "Views differ." only when both sides spoke.

    The header names no topic: an offline topic is cut from the question's words, which reads badly in a
    sentence and only echoes the question."""
    return combined(
        task,
        settings,
        FACETS,
        header="Views differ.",
        header_needs=tuple(f.label for f in FACETS),
        footer="Which view prevails turns on how these points are weighed.",
    )
