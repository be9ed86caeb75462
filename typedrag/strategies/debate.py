"""Debate: the topic and 2-5 perspectives, one biased sub-query each, answered concurrently, then mediated."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from typedrag.engines.base import Facet, PlanTask, Weighing
from typedrag.prompts import CITE, DATA_RULE, GROUNDED, NO_FILLER, ON_QUESTION, PLANNER, Prompt
from typedrag.phrasing.content import content_words
from typedrag.phrasing.plans import debate_sides
from typedrag.result import Aspect
from typedrag.steps import Depths, Flow, Plan, Planned, StrategyOutput
from typedrag.strategies.decomposed import Combination, Planning, answer_and_combine
from typedrag.strategies.plans import MAX_ASPECTS, Name, Query, aspect_list, keep_at_most
from typedrag.text import split_sentences


class Perspective(BaseModel):
    """One viewpoint on the debated topic and the search query its holders would write."""

    name: Name = Field(description="a short label for the viewpoint")
    sub_query: Query = Field(description="a short search query worded the way someone holding this view would search")


class DebatePlan(BaseModel):
    """The debated topic and 2-5 distinct perspectives, each with its own biased sub-query."""

    topic: Query = Field(description="the topic under debate")
    perspectives: list[Perspective] = aspect_list("two to five genuinely different perspectives on the topic")

    @field_validator("perspectives", mode="before")
    @classmethod
    def _dedupe(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        seen: set[str] = set()
        kept = []
        for item in value:
            name = item.get("name") if isinstance(item, dict) else None
            if isinstance(name, str):
                key = " ".join(name.split()).casefold()
                if not key or key in seen:
                    continue
                seen.add(key)
            kept.append(item)
        return kept


PLAN_DEBATE = Prompt(
    "plan_debate",
    "You map out the sides of debated questions. " + PLANNER,
    "Question: {question}\n\n"
    "Name the topic under debate and the perspectives on it; for each perspective write a search query "
    "worded the way someone holding that view would search.\n{reply_format}",
)

PERSPECTIVE_ANSWER = Prompt(
    "perspective_answer",
    GROUNDED,
    "Sources:\n{sources}\n\nDebated question: {question}\n"
    "Present the strongest case as seen by {focus}, using the sources. At most three sentences. " + CITE,
)

WEIGH_DEBATE = Prompt(
    "weigh_debate",
    "You weigh what documents say on a debated question. " + PLANNER,
    "Question: {question}\nTopic: {topic}\n\nThe case made from each perspective, from the documents:\n{parts}\n\n"
    "Do the documents recommend or clearly support one side (for example a manual that advises against "
    "something, or evidence that points one way), or do they leave the question open? Say one side only when "
    "the documents themselves say so, not from your own opinion.\n{reply_format}",
)

MEDIATE_DEBATE = Prompt(
    "mediate_debate",
    "You write the answer to a debated question from the cases made for each perspective, as a fair expert "
    "would. Keep the citation markers like [3] attached to the claims they support. " + DATA_RULE,
    "Question: {question}\nTopic: {topic}\n\nThe case made from each perspective:\n{parts}\n\n{stance}\n\n"
    "Write in your own voice (never 'the participants said' or 'perspective 1 argues'). "
    + ON_QUESTION
    + " "
    + NO_FILLER
    + " "
    "At most six sentences.",
)
# The mediator's {stance}, by the weighing (typedrag.engines.base.Weighing).
CONCLUDE = (
    "The documents favour one side: {side} ({reason}). Open with that conclusion as a direct answer to the "
    'question (for example "Generally no, because ..."), give its main reasons, then the strongest point '
    "on the other side and when it applies."
)
BALANCE = (
    "The documents leave this open. State the strongest reasons for and against, each with its sources, "
    "then what the choice turns on."
)


def offline_plan(question: str) -> DebatePlan:
    """The case for and the case against, each searched around the topic the question names (typedrag.phrasing.plans)."""
    topic, sides = debate_sides(question)
    if len(split_sentences(topic)) > 1:  # "... RAID-1, so we don't bother with anything else. Is that reasonable?"
        topic = " ".join(content_words(topic))  # its content words, as its searches are: one phrase
    return DebatePlan(topic=topic, perspectives=[Perspective(name=name, sub_query=query) for name, query in sides])


PLAN = PlanTask(role="plan:debate", prompt=PLAN_DEBATE, schema=DebatePlan, offline=offline_plan)
WEIGH = PlanTask(role="weigh:debate", prompt=WEIGH_DEBATE, schema=Weighing)
MEDIATION = Combination(
    PERSPECTIVE_ANSWER, MEDIATE_DEBATE, Facet.VIEWS, combine="mediate", weigh=(WEIGH, CONCLUDE, BALANCE)
)


class DebateStrategy:
    """Plan the perspectives, answer each from its own passages, mediate a balanced answer.

    >>> DebateStrategy().name
    'debate'
    """

    name = "debate"
    plan = PLAN

    def flow(self, question: str, depths: Depths) -> Flow[StrategyOutput]:
        return answer_and_combine(question, depths, self.name, MEDIATION, self.planning(question))

    def planning(self, question: str) -> Flow[Planning]:
        """The plan, and an aspect for each perspective (at most MAX_ASPECTS, the drop recorded)."""
        plan = yield Plan(self.plan, question)
        perspectives = yield from keep_at_most(plan.perspectives, MAX_ASPECTS, "perspectives", PLAN.role)
        aspects = [Aspect(label=p.name, query=p.sub_query) for p in perspectives]
        yield Planned(plan, aspects)
        return plan, aspects, plan.topic
