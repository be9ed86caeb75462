"""Experience (advice, recommendations): extract the topic and keywords, retrieve, rerank by the keywords, advise."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, field_validator

from typedrag.engines.base import Extract, PlanTask, Section, WriteTask
from typedrag.engines.heuristics import normalise
from typedrag.prompts import CITE, GROUNDED, PLANNER, Prompt
from typedrag.strategies.base import StrategyContext, StrategyOutput, union
from typedrag.strategies.plans import Name, Query, aspect_list, clean_phrases
from typedrag.text import content_words, key_phrases

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

# Sentences that advise, recommend or report what worked (offline engine).
ADVICE = re.compile(
    r"\b(?:should|recommend\w*|advis\w*|advice|tips?|suggest\w*|best|ideal|avoid\w*|prefer\w*|consider\w*|"
    r"important|helps?|useful|popular|beginners?|start\w*|choose|choice|need\w*|must|try|often|usually)\b",
    re.I,
)
_LEAD = re.compile(
    r"^(?:what|which|any|can you|could you|do you|would you)\s+"
    r"(?:are|is|do|does|have|recommend|suggest|good|some|advice|tips|ideas)?\s*",
    re.I,
)


def offline_plan(question: str) -> ExperiencePlan:
    """The question's content words as the topic, its noun phrases and words as keywords."""
    text = _LEAD.sub("", normalise(question))
    phrases = key_phrases(text)
    if not phrases:
        raise ValueError("no keywords found in the question")
    keywords = list(dict.fromkeys(phrases + content_words(text)))
    return ExperiencePlan(topic=" ".join(content_words(text)), keywords=keywords)


PLAN = PlanTask(role="plan:experience", prompt=PLAN_EXPERIENCE, schema=ExperiencePlan, offline=offline_plan)


class ExperienceStrategy:
    """Retrieve with the question and with the keywords, rerank by the keywords, give advice.

    >>> ExperienceStrategy().name
    'experience'
    """

    name = "experience"
    plan = PLAN

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        plan = await ctx.engine.plan(self.plan, question, ctx.trace)
        ctx.emit("plan", plan=plan.model_dump())
        ctx.attempt = StrategyOutput(answer="", plan=plan)  # kept in the result if this falls back
        keywords = " ".join(plan.keywords)
        by_question, by_keywords = await ctx.retrieve_many([question, keywords], ctx.candidates_k)
        best = await ctx.rerank(keywords, union([by_question, by_keywords]), ctx.top_k)
        # The question's own top passages stay in: never less evidence than plain RAG.
        sources = ctx.book.add(union([by_question[: ctx.top_k], best]))
        task = WriteTask(
            role="answer",
            prompt=EXPERIENCE_ANSWER,
            values={"question": question, "topic": plan.topic},
            sources=sources,
            extract=Extract(
                (
                    Section(query=question, sentences=2),
                    Section(query=f"{plan.topic} {keywords}", sentences=3, cue=ADVICE),
                )
            ),
        )
        return StrategyOutput(answer=await ctx.write_answer(task), plan=plan)
