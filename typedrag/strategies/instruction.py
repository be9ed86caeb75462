"""Instruction ("how to"): sub-queries for steps and requirements, answered concurrently, merged into ordered steps."""

from __future__ import annotations

import re

from typedrag.engines.base import Extract, Part, PlanTask
from typedrag.engines.heuristics import subject
from typedrag.prompts import DATA_RULE, PLANNER, Prompt
from typedrag.strategies.decomposed import ASPECT_ANSWER, Combination, SubQueryPlan, SubQueryStrategy, part_sections

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
    "sentences, with requirements first. Drop repetition. At most eight steps.",
)

# Sentences that tell how something is done: sequence words, requirements, actions (offline engine).
STEP = re.compile(
    r"\b(?:first|then|next|after|before|finally|once|until|step\w*|begin\w*|start\w*|requir\w*|needs?|must|"
    r"should|use[sd]?|using|add\w*|mix\w*|place\w*|remov\w*|appl(?:y|ied|ies)|prepar\w*|made by|done by|"
    r"process|method|procedure|technique|by (?:\w+ing))\b",
    re.I,
)
_CORE = re.compile(
    r"^(?:how (?:do|can|should|would|could|might) (?:i|you|we|one|someone|people)|how to|how is|how are|how does|"
    r"what(?:'s| is| are) the (?:best |easiest |right |proper )?(?:way|ways|steps|method|process) (?:to|for|of)|"
    r"what should i do to|steps to|tips (?:for|on))\s+",
    re.I,
)


def offline_plan(question: str) -> SubQueryPlan:
    """Three facets of the task, in the order they are needed: what it takes, how it is done, what helps."""
    _, phrase = subject(question, _CORE, "task")
    return SubQueryPlan(sub_queries=[f"{phrase} requirements", f"{phrase} method", f"{phrase} tips"])


PLAN = PlanTask(role="plan:instruction", prompt=PLAN_INSTRUCTION, schema=SubQueryPlan, offline=offline_plan)


def merged(question: str, parts: list[Part]) -> Extract:
    """The offline steps: procedural sentences, the overview's first, aspects in plan order, each in text order."""
    return Extract(part_sections(question, parts, lambda _: STEP, in_order=True), layout="numbered", header="Steps:")


COMBINATION = Combination(ASPECT_ANSWER, "answer:aspect", lambda _: STEP, AGGREGATE_INSTRUCTION, "aggregate", merged)


INSTRUCTION = SubQueryStrategy("instruction", PLAN, COMBINATION)
