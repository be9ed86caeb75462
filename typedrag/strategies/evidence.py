"""Evidence-based questions (and the plain-RAG baseline): retrieve with the question, generate."""

from __future__ import annotations

from typedrag.engines.base import AnswerRequest
from typedrag.strategies.base import StrategyContext, StrategyOutput


class EvidenceStrategy:
    name = "evidence-based"

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        hits = await ctx.retrieve(question, ctx.top_k)
        sources = ctx.book.add(hits)
        answer = await ctx.engine.answer(AnswerRequest(question=question, sources=sources), ctx.trace)
        return StrategyOutput(answer=answer)
