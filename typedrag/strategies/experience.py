"""Experience (advice, recommendations): extract the topic and keywords, retrieve, rerank by the keywords, advise.

The paper's method, with what an expert's advice needs besides: a model's plan also names the facets of the
advice (the settings to change, the tools to use, the practices to follow, the pitfalls to avoid), each searched
for on its own, so the answer draws on the whole manual and not only on the passages that read like the
question; the answer puts what matters most first, each point concrete, with when and why.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from typedrag.engines.base import Advised, PlanTask
from typedrag.prompts import CITE, GROUNDED, PLANNER, Prompt
from typedrag.phrasing.plans import advice_keywords
from typedrag.records import ScoredPassage
from typedrag.steps import Depths, Flow, Number, Plan, Planned, Rank, Search, StrategyOutput, Write
from typedrag.strategies.base import on_topic, union
from typedrag.strategies.decomposed import retrieval_query
from typedrag.strategies.evidence import question_hits
from typedrag.strategies.plans import Name, Query, aspect_list, clean_phrases

MAX_KEYWORDS = 8
MAX_FACETS = 4


class ExperiencePlan(BaseModel):
    """The topic and key entities used to rerank advice-style passages, and the facets of the advice to search for."""

    topic: Query = Field(description="what the person needs advice on")
    keywords: list[Name] = aspect_list(
        f"up to {MAX_KEYWORDS} key entities, activities and constraints that relevant experiences would mention",
        at_least=1,
        at_most=MAX_KEYWORDS,
    )
    # Offline plans have none: the offline engine quotes the question's own passages and advice among them.
    facets: list[Query] = Field(
        [],
        description=f"two to {MAX_FACETS} search queries, each for one facet of the advice an expert would give here (the "
        "settings or options to change, the tools or commands to use, the practices to follow, the pitfalls to avoid), "
        "most important first, each naming the subject",
        json_schema_extra={"maxItems": MAX_FACETS},
    )

    @field_validator("keywords", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        cleaned = clean_phrases(value)
        return cleaned[:MAX_KEYWORDS] if isinstance(cleaned, list) else cleaned

    @field_validator("facets", mode="before")
    @classmethod
    def _clean_facets(cls, value: Any) -> Any:
        cleaned = clean_phrases(value)
        return cleaned[:MAX_FACETS] if isinstance(cleaned, list) else cleaned


PLAN_EXPERIENCE = Prompt(
    "plan_experience",
    "You analyse requests for advice and recommendations. " + PLANNER,
    "Question: {question}\n\nGive the topic the person needs advice on, the keywords that relevant "
    "experiences would mention, and the facets of the advice an expert would give, each as a search query "
    "for one facet: the settings to tune, the tools to use, the practices to follow or the mistakes to avoid.\n{reply_format}",
)

EXPERIENCE_ANSWER = Prompt(
    "experience_answer",
    GROUNDED,
    "Sources:\n{sources}\n\nQuestion: {question}\n\n"
    "This asks for advice about {topic}. Advise as an experienced practitioner would, from the sources: first "
    "what matters most in this situation, then the rest in order of importance. Make each point concrete (the "
    "setting, command, tool or practice by name, with a value or an example where the sources give one) and say "
    "when it applies and why; include the pitfalls to avoid.{facets} Leave out what does not bear on the question "
    "and what the sources call obsolete or rarely needed. Short bullet points are fine. At most eight points. " + CITE,
)


def offline_plan(question: str) -> ExperiencePlan:
    """The question's content words as the topic, its noun phrases and words as keywords (typedrag.phrasing.plans)."""
    topic, keywords = advice_keywords(question)
    return ExperiencePlan(topic=topic, keywords=keywords)


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
        # The question's own search, widened as plain RAG's is (a model's queries, fused; offline the question alone).
        by_question = yield from question_hits(question, depths.candidates_k)
        [by_keywords] = yield Search([keywords], depths.candidates_k)
        [best] = yield Rank([keywords], union([by_question, by_keywords]), depths.top_k)
        found = yield from facet_hits(question, list(plan.facets), depths)
        # The question's own top passages stay in: never less evidence than plain RAG.
        sources = yield Number(union([by_question[: depths.top_k], best, *found]))
        task = Advised(
            role="answer:experience",
            prompt=EXPERIENCE_ANSWER,
            question=question,
            topic=plan.topic,
            sources=sources,
            lead=len(by_question[: depths.top_k]),
            facets=tuple(plan.facets),
        )
        written = yield Write(task, final=True)
        return StrategyOutput(answer=written.text, plan=plan)


def facet_hits(question: str, facets: list[str], depths: Depths) -> Flow[list[list[ScoredPassage]]]:
    """Each facet's best passages: its search (the facet's query and the question's words), the ones on the
    question's topic, ranked by the facet, `aspect_k` of them; none without facets (offline plans have none)."""
    if not facets:
        return []
    queries = [retrieval_query(facet, question) for facet in facets]
    found = yield Search(queries, depths.aspect_search)
    relevant = {hit.passage_id for hit in (yield from on_topic(question, union(found)))}
    ranked = yield Rank(queries, [hit for hit in union(found) if hit.passage_id in relevant])
    mine = [{hit.passage_id for hit in hits} for hits in found]
    return [[hit for hit in hits if hit.passage_id in own][: depths.aspect_k] for hits, own in zip(ranked, mine)]
