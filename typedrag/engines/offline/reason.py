"""Reason, offline: the subject's causes and consequences, each quoting only sentences of that shape."""

from __future__ import annotations

import re

from typedrag.engines.base import Extract, WriteTask
from typedrag.engines.offline.decomposed import Facet, aspect, combined
from typedrag.engines.offline.questions import subject
from typedrag.engines.offline.settings import OfflineSettings
from typedrag.engines.offline.shapes import CAUSE, CONSEQUENCE
from typedrag.strategies.decomposed import SubQueryPlan

FACETS = (Facet("causes", "Causes", CAUSE), Facet("consequences", "Consequences", CONSEQUENCE))
_CORE = re.compile(
    r"^(?:why|how come|what (?:is|are|was|were) the (?:reasons?|causes?) (?:for|of|why|behind)|what causes?|what caused|"
    r"what makes|for what reason|what leads to|what led to|what is the reason)\s+"
    r"(?:(?:do|does|did|is|are|was|were|can|could|would|should|will|has|have|had)\s+)?",
    re.I,
)


def plan(question: str) -> SubQueryPlan:
    """The subject's causes and its consequences, searched around its content words."""
    _, phrase = subject(question, _CORE, "subject")
    return SubQueryPlan(sub_queries=[f"{phrase} {facet.word}" for facet in FACETS])


def aspect_answer(task: WriteTask, settings: OfflineSettings) -> Extract:
    return aspect(task, settings, FACETS)


def aggregate(task: WriteTask, settings: OfflineSettings) -> Extract:
    return combined(task, settings, FACETS)
