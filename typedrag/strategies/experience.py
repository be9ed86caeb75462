"""Experience (advice, recommendations): extract the topic and keywords, retrieve, rerank by the keywords, advise."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from typedrag import telemetry
from typedrag.engines.base import Advised, PlanTask
from typedrag.prompts import CITE, GROUNDED, PLANNER, Prompt
from typedrag.strategies.base import StrategyContext, StrategyOutput, union
from typedrag.strategies.plans import Name, Query, aspect_list, clean_phrases

MAX_KEYWORDS = 8


class ExperiencePlan(BaseModel):
    """The topic and key entities used to rerank advice-style passages."""

    topic: Query = Field(description="what the person needs advice on")
    keywords: list[Name] = aspect_list(
        f"up to {MAX_KEYWORDS} key entities, activities and constraints that relevant experiences would mention",
        at_least=1,
        at_most=MAX_KEYWORDS,
    )

    @field_validator("keywords", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        cleaned = clean_phrases(value)
        return cleaned[:MAX_KEYWORDS] if isinstance(cleaned, list) else cleaned


PLAN_EXPERIENCE = Prompt(
    "plan_experience",
    "You analyse requests for advice and recommendations. " + PLANNER,
    "Question: {question}\n\nGive the topic the person needs advice on, and the keywords that relevant "
    "experiences would mention.\n{reply_format}",
)

EXPERIENCE_ANSWER = Prompt(
    "experience_answer",
    GROUNDED,
    "Sources:\n{sources}\n\nQuestion: {question}\n\n"
    "This asks for advice or recommendations about {topic}. Give practical guidance that draws on the "
    "different experiences and facts in the sources, and mention trade-offs. At most six sentences. " + CITE,
)

PLAN = PlanTask(role="plan:experience", prompt=PLAN_EXPERIENCE, schema=ExperiencePlan)


class ExperienceStrategy:
    """Retrieve with the question and with the keywords, rerank by the keywords, give advice.

    >>> ExperienceStrategy().name
    'experience'
    """

    name = "experience"
    plan = PLAN

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        plan = await telemetry.traced("plan", ctx.engine.plan(self.plan, question, ctx.trace), role=self.plan.role, engine=ctx.engine.name)
        ctx.emit("plan", plan=plan.model_dump())
        ctx.attempt = StrategyOutput(answer="", plan=plan)  # kept in the result if this falls back
        keywords = " ".join(plan.keywords)
        by_question, by_keywords = await ctx.retrieve_many([question, keywords], ctx.candidates_k)
        best = await ctx.rerank(keywords, union([by_question, by_keywords]), ctx.top_k)
        # The question's own top passages stay in: never less evidence than plain RAG.
        sources = ctx.book.add(union([by_question[: ctx.top_k], best]))
        task = Advised(
            role="answer:experience",
            prompt=EXPERIENCE_ANSWER,
            question=question,
            topic=plan.topic,
            sources=sources,
            lead=len(by_question[: ctx.top_k]),
        )
        written = await ctx.write_answer(task)
        return StrategyOutput(answer=written.text, plan=plan)
