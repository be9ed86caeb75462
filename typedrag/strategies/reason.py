"""Reason ("why"): sub-queries for distinct causes, answered concurrently, aggregated into one explanation."""

from __future__ import annotations

from typedrag.engines.base import Facet, PlanTask
from typedrag.prompts import DATA_RULE, NO_FILLER, ON_QUESTION, PLANNER, Prompt
from typedrag.phrasing.plans import reason_queries
from typedrag.strategies.decomposed import ASPECT_ANSWER, Combination, SubQueryPlan, SubQueryStrategy

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
    "important first, and how they connect. Drop repetition. " + ON_QUESTION + " " + NO_FILLER + " "
    "At most eight sentences.",
)


def offline_plan(question: str) -> SubQueryPlan:
    """Two searches for the subject's causes, read from the question (typedrag.phrasing.plans)."""
    return SubQueryPlan(sub_queries=reason_queries(question))


PLAN = PlanTask(role="plan:reason", prompt=PLAN_REASON, schema=SubQueryPlan, offline=offline_plan)
REASON = SubQueryStrategy("reason", PLAN, Combination(ASPECT_ANSWER, AGGREGATE_REASON, Facet.CAUSES))
