"""Reason ("why"): sub-queries for distinct causes, answered concurrently, aggregated into one explanation."""

from __future__ import annotations

import re

from typedrag.engines.base import Extract, Part, PlanTask
from typedrag.engines.heuristics import subject
from typedrag.prompts import DATA_RULE, PLANNER, Prompt
from typedrag.strategies.decomposed import ASPECT_ANSWER, Combination, SubQueryPlan, SubQueryStrategy, part_sections

PLAN_REASON = Prompt(
    "plan_reason",
    "You break questions that ask why into single-aspect search queries. " + PLANNER,
    "Question: {question}\n\n"
    "Write two to five search queries, each about one distinct cause, condition or mechanism that could "
    "explain the answer, each naming the subject so it is understandable on its own.\n{reply_format}",
)

AGGREGATE_REASON = Prompt(
    "aggregate_reason",
    "You merge partial answers into one clear explanation. Keep the citation markers like [3] that the "
    "partial answers carry, attached to the claims they support. " + DATA_RULE,
    "Question: {question}\n\nPartial answers, one per aspect:\n{parts}\n\n"
    "Write one concise, well-structured explanation of why: name the main causes or conditions, most "
    "important first, and how they connect. Drop repetition and anything off the question. "
    "At most eight sentences.",
)

# Sentences that state a cause, a reason or a mechanism (offline engine).
CAUSE = re.compile(
    r"\b(?:because|due to|caus\w*|reasons?|result\w*|led to|lead to|leads to|owing to|since|so that|therefore|"
    r"thus|hence|as a consequence|consequen\w*|factors?|explain\w*|why|effects?|responsible|triggered|"
    r"contributed|blamed|attributed|died of|killed by)\b",
    re.I,
)
_CORE = re.compile(
    r"^(?:why|how come|what (?:is|are|was|were) the (?:reasons?|causes?) (?:for|of|why|behind)|what causes?|what caused|"
    r"what makes|for what reason|what leads to|what led to|what is the reason)\s+"
    r"(?:(?:do|does|did|is|are|was|were|can|could|would|should|will|has|have|had)\s+)?",
    re.I,
)


def offline_plan(question: str) -> SubQueryPlan:
    """Three facets of the subject: its causes, its background, its consequences."""
    _, phrase = subject(question, _CORE, "subject")
    return SubQueryPlan(sub_queries=[f"{phrase} causes", f"{phrase} background", f"{phrase} consequences"])


PLAN = PlanTask(role="plan:reason", prompt=PLAN_REASON, schema=SubQueryPlan, offline=offline_plan)


def merged(question: str, parts: list[Part]) -> Extract:
    """The offline aggregate: the sentences that answer best, then each aspect's strongest causes."""
    return Extract(part_sections(question, parts, lambda _: CAUSE), layout="bullets")


COMBINATION = Combination(ASPECT_ANSWER, "answer:aspect", lambda _: CAUSE, AGGREGATE_REASON, "aggregate", merged)


REASON = SubQueryStrategy("reason", PLAN, COMBINATION)
