"""Experience (advice, recommendations): extract the topic and keywords, retrieve, rerank by the keywords, advise."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from typedrag.engines.base import Advised, PlanTask
from typedrag.prompts import CITE, GROUNDED, PLANNER, Prompt
from typedrag.questions import advice_topic
from typedrag.steps import Depths, Flow, Number, Plan, Planned, Rank, Search, StrategyOutput, Write
from typedrag.strategies.base import union
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

def offline_plan(question: str) -> ExperiencePlan:
    """The question's content words as the topic, its noun phrases and words as keywords."""
    text = advice_topic(question)
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

    def flow(self, question: str, depths: Depths) -> Flow[StrategyOutput]:
        plan = yield Plan(self.plan, question)
        yield Planned(plan)
        keywords = " ".join(plan.keywords)
        by_question, by_keywords = yield Search([question, keywords], depths.candidates_k)
        [best] = yield Rank([keywords], union([by_question, by_keywords]), depths.top_k)
        # The question's own top passages stay in: never less evidence than plain RAG.
        sources = yield Number(union([by_question[: depths.top_k], best]))
        task = Advised(
            role="answer:experience",
            prompt=EXPERIENCE_ANSWER,
            question=question,
            topic=plan.topic,
            sources=sources,
            lead=len(by_question[: depths.top_k]),
        )
        written = yield Write(task, final=True)
        return StrategyOutput(answer=written.text, plan=plan)
