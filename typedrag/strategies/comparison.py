"""Comparison: find the purpose and the items, retrieve per item, dedupe, rerank, answer by purpose."""

from __future__ import annotations

from typedrag.engines.base import AnswerRequest, AnswerStyle
from typedrag.nfq import NFQType
from typedrag.plans import ComparisonPlan
from typedrag.result import Aspect
from typedrag.strategies.base import StrategyContext, StrategyOutput


class ComparisonStrategy:
    name = "comparison"

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        plan = await ctx.engine.plan(question, NFQType.COMPARISON, ComparisonPlan, ctx.trace)
        ctx.emit("plan", plan=plan.model_dump())
        per_item = await ctx.retrieve_many(plan.items, ctx.candidates_k // 2)
        union = list({hit.passage_id: hit for hits in per_item for hit in hits}.values())
        best = await ctx.rerank(question, union, ctx.top_k)
        sources = ctx.book.add(best)
        kept = {s.passage_id: s.number for s in sources}
        aspects = [
            Aspect(label=item, query=item, source_numbers=[kept[h.passage_id] for h in hits if h.passage_id in kept])
            for item, hits in zip(plan.items, per_item)
        ]
        request = AnswerRequest(
            question=question, sources=sources, style=AnswerStyle.COMPARISON, items=plan.items, purpose=plan.purpose
        )
        answer = await ctx.engine.answer(request, ctx.trace)
        return StrategyOutput(answer=answer, plan=plan, aspects=aspects)
