"""Experience: extract topic and keywords, retrieve, rerank by similarity to the keywords, advise."""

from __future__ import annotations

from typedrag.engines.base import AnswerRequest, AnswerStyle
from typedrag.nfq import NFQType
from typedrag.plans import ExperiencePlan
from typedrag.strategies.base import StrategyContext, StrategyOutput


class ExperienceStrategy:
    name = "experience"

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        plan = await ctx.engine.plan(question, NFQType.EXPERIENCE, ExperiencePlan, ctx.trace)
        ctx.emit("plan", plan=plan.model_dump())
        keywords = " ".join(plan.keywords)
        by_question, by_keywords = await ctx.retrieve_many([question, keywords], ctx.candidates_k)
        union = list({hit.passage_id: hit for hit in by_question + by_keywords}.values())
        best = await ctx.rerank(keywords, union, ctx.top_k)
        sources = ctx.book.add(best)
        request = AnswerRequest(question=question, sources=sources, style=AnswerStyle.EXPERIENCE, focus=plan.topic)
        answer = await ctx.engine.answer(request, ctx.trace)
        return StrategyOutput(answer=answer, plan=plan)
