"""Instruction, offline: what the task takes and how it is done, as numbered steps of procedural sentences."""

from __future__ import annotations

import re

from typedrag.engines.base import Extract, WriteTask
from typedrag.engines.offline.decomposed import Facet, aspect, combined
from typedrag.engines.offline.questions import subject
from typedrag.engines.offline.settings import OfflineSettings
from typedrag.engines.offline.shapes import STEP
from typedrag.strategies.decomposed import SubQueryPlan

FACETS = (Facet("requirements", "Steps", STEP), Facet("steps", "Steps", STEP))
_CORE = re.compile(
    r"^(?:how (?:do|can|should|would|could|might) (?:i|you|we|one|someone|people)|how to|how is|how are|how does|"
    r"what(?:'s| is| are) the (?:best |easiest |right |proper )?(?:way|ways|steps|method|process) (?:to|for|of)|"
    r"what should i do to|steps to|tips (?:for|on))\s+",
    re.I,
)


def plan(question: str) -> SubQueryPlan:
    """What the task needs first, then its steps, searched around its content words."""
    _, phrase = subject(question, _CORE, "task")
    return SubQueryPlan(sub_queries=[f"{phrase} {facet.word}" for facet in FACETS])


def aspect_answer(task: WriteTask, settings: OfflineSettings) -> Extract:
    return aspect(task, settings, FACETS)


def aggregate(task: WriteTask, settings: OfflineSettings) -> Extract:
    """Plain RAG's lead, then "Steps:" over procedural sentences only, each aspect's in document order."""
    return combined(task, settings, FACETS, layout="numbered", header="Steps:", in_order=True)
