"""Instruction ("how to"): sub-queries for steps and requirements, answered concurrently, merged into ordered steps."""

from __future__ import annotations

from typedrag.engines.base import Facet, PlanTask
from typedrag.prompts import DATA_RULE, NO_FILLER, ON_QUESTION, PLANNER, Prompt
from typedrag.phrasing.plans import instruction_queries
from typedrag.strategies.decomposed import ASPECT_ANSWER, Combination, SubQueryPlan, SubQueryStrategy

PLAN_INSTRUCTION = Prompt(
    "plan_instruction",
    "You break questions that ask how to do something into single-aspect search queries. " + PLANNER,
    "Question: {question}\n\n"
    "Write two to five search queries, each about one distinct step, requirement or method needed to do "
    "what is asked, in the order they would be done, each naming the task so it is understandable on its "
    "own.\n{reply_format}",
)

AGGREGATE_INSTRUCTION = Prompt(
    "aggregate_instruction",
    "You merge partial answers into one set of instructions. Keep the citation markers like [3] that the "
    "partial answers carry, attached to the steps they support. " + DATA_RULE,
    "Question: {question}\n\nPartial answers, one per aspect:\n{parts}\n\n"
    "Write the answer as numbered steps in the order a person would follow them, each step one or two "
    "sentences, with requirements first. Drop repetition. " + ON_QUESTION + " If the partial answers show that "
    "what is asked cannot be done, say so first and give no steps for another task. " + NO_FILLER + " At most eight "
    "steps.",
)


def offline_plan(question: str) -> SubQueryPlan:
    """What the task needs first, then its steps, read from the question (typedrag.phrasing.plans)."""
    return SubQueryPlan(sub_queries=instruction_queries(question))


PLAN = PlanTask(role="plan:instruction", prompt=PLAN_INSTRUCTION, schema=SubQueryPlan, offline=offline_plan)
INSTRUCTION = SubQueryStrategy("instruction", PLAN, Combination(ASPECT_ANSWER, AGGREGATE_INSTRUCTION, Facet.STEPS))
