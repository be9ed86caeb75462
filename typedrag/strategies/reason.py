"""Reason: sub-queries for distinct causes, answered concurrently, aggregated into one explanation."""

from __future__ import annotations

from typedrag.engines.base import AnswerStyle
from typedrag.nfq import NFQType
from typedrag.plans import SubQueryPlan
from typedrag.result import Aspect
from typedrag.strategies.base import StrategyContext, StrategyOutput
from typedrag.strategies.decomposed import answer_and_combine


class ReasonStrategy:
    name = "reason"
    kind = NFQType.REASON

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        plan = await ctx.engine.plan(question, self.kind, SubQueryPlan, ctx.trace)
        ctx.emit("plan", plan=plan.model_dump())
        aspects = [Aspect(label=q, query=q) for q in plan.sub_queries]
        answer = await answer_and_combine(question, self.kind, aspects, AnswerStyle.ASPECT, ctx)
        return StrategyOutput(answer=answer, plan=plan, aspects=aspects)
