"""Comparison: find the purpose and the items, retrieve per item, dedupe, rerank, answer by purpose."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from typedrag.engines.base import Compared, PlanTask
from typedrag.prompts import CITE, GROUNDED, PLANNER, Prompt
from typedrag.phrasing.questions import compared, says_compare
from typedrag.result import Aspect
from typedrag.steps import Depths, Flow, Number, Plan, Planned, Rank, Search, StrategyOutput, Write
from typedrag.strategies.base import union
from typedrag.strategies.evidence import question_hits
from typedrag.strategies.plans import MAX_ASPECTS, Name, aspect_list, clean_phrases, keep_at_most
from typedrag.text import content_words


class ComparisonPlan(BaseModel):
    """What is compared, and to what end (it shapes the answer)."""

    purpose: Literal["difference", "similarity", "superiority"] = Field(
        description="difference (how they differ), similarity (what they share) or superiority (which is better)"
    )
    items: list[Name] = aspect_list(
        "the two to five things compared, each named specifically enough to find documents on its own"
    )

    @field_validator("purpose", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("items", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return clean_phrases(value)


PLAN_COMPARISON = Prompt(
    "plan_comparison",
    "You analyse comparison questions. " + PLANNER,
    "Question: {question}\n\n"
    "Identify what the question compares and why. Name each compared thing in full, as the question's "
    "context makes it specific, never by a pronoun.\n{reply_format}",
)

COMPARISON_ANSWER = Prompt(
    "comparison_answer",
    GROUNDED,
    "Sources:\n{sources}\n\nQuestion: {question}\n\n"
    "The reader wants to know the {purpose} among these: {items}.{item_passages} {purpose_instruction} Then the "
    "other points that matter, each stated for every item from what its own passages say about it. Describe each "
    "item by what it does; call something a drawback only where the sources present it as one (a setting that "
    "can be tuned is not a weakness). An item the sources do not describe is not compared from guesswork: open by "
    "saying they do not describe it, give what they say of the others, and draw no conclusion between them. Leave out "
    "what the passages say of an item that does not bear on the question. Answer in at most seven sentences. " + CITE,
)

# How the answer opens, by purpose: with what decides it, never with a summary that keeps it for the end.
PURPOSE_INSTRUCTIONS = {
    "difference": "Open with the decisive difference, the one that matters most for the question, stated for each item.",
    "similarity": "Open with what they have most in common, then the one difference that matters most.",
    "superiority": "Open with the conclusion: which is better for what the question asks, and the difference that decides it; "
    "then say when the other is the better choice.",
}


def item_query(item: str, question: str, items: list[str]) -> str:
    """The item, then the question's other content words: "Forgotten Pills film came first" finds the film,
    where "Forgotten Pills" alone finds contraceptive tablets. The item's own words come first and stay the
    majority for a short question; words of the other items and of comparing itself are left out."""
    named = {w.lower() for other in items for w in content_words(other)}
    context = [w for w in content_words(question) if w.lower() not in named and not says_compare(w)]
    return " ".join([item, *dict.fromkeys(context)])


def offline_plan(question: str) -> ComparisonPlan:
    """The items and purpose read from the question's phrasing ("X vs Y", "difference between X and Y", "X or Y")."""
    purpose, items = compared(question)
    return ComparisonPlan(purpose=purpose, items=items)


PLAN = PlanTask(role="plan:comparison", prompt=PLAN_COMPARISON, schema=ComparisonPlan, offline=offline_plan)


class ComparisonStrategy:
    """Retrieve for the question and for each item, dedupe, rerank against the question, answer by purpose.

    >>> ComparisonStrategy().name
    'comparison'
    """

    name = "comparison"
    plan = PLAN

    def flow(self, question: str, depths: Depths) -> Flow[StrategyOutput]:
        plan = yield Plan(self.plan, question)
        items = yield from keep_at_most(plan.items, MAX_ASPECTS, "items", "plan:comparison")
        yield Planned(plan)
        queries = [item_query(item, question, items) for item in items]
        # The question's own search, widened as plain RAG's is (a model's queries, fused; offline the question alone).
        by_question = yield from question_hits(question, depths.item_search)
        per_item = yield Search(queries, depths.item_search)
        [best] = yield Rank([question], union(per_item), len(items))
        # The question's own top passages (never less evidence than plain RAG), every item's best passage
        # (no item goes unanswered because the others rank higher), and the item passages closest to the question.
        sources = yield Number(union([by_question[: depths.top_k], [hits[0] for hits in per_item if hits], best]))
        numbers = {s.passage_id: s.number for s in sources}
        aspects = [
            Aspect(
                label=item, query=query, source_numbers=[numbers[h.passage_id] for h in hits if h.passage_id in numbers]
            )
            for item, query, hits in zip(items, queries, per_item)
        ]
        task = Compared(
            role="answer:comparison",
            prompt=COMPARISON_ANSWER,
            question=question,
            purpose=plan.purpose,
            items=tuple(items),
            instruction=PURPOSE_INSTRUCTIONS[plan.purpose],
            sources=sources,
            lead=len(by_question[: depths.top_k]),
            item_sources=tuple(tuple(aspect.source_numbers) for aspect in aspects),
        )
        written = yield Write(task, final=True)
        return StrategyOutput(answer=written.text, plan=plan, aspects=aspects)
