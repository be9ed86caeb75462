"""Debate: topic and perspectives, one biased sub-query each, answered concurrently, then mediated."""

from __future__ import annotations

from typedrag.engines.base import AnswerStyle
from typedrag.nfq import NFQType
from typedrag.plans import DebatePlan
from typedrag.result import Aspect
from typedrag.strategies.base import StrategyContext, StrategyOutput
from typedrag.strategies.decomposed import answer_and_combine


class DebateStrategy:
    name = "debate"

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        plan = await ctx.engine.plan(question, NFQType.DEBATE, DebatePlan, ctx.trace)
        ctx.emit("plan", plan=plan.model_dump())
        aspects = [Aspect(label=p.name, query=p.sub_query) for p in plan.perspectives]
        answer = await answer_and_combine(
            question, NFQType.DEBATE, aspects, AnswerStyle.PERSPECTIVE, ctx, topic=plan.topic
        )
        return StrategyOutput(answer=answer, plan=plan, aspects=aspects)
