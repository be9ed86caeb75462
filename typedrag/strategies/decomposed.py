"""The shared shape of Reason, Instruction and Debate: aspects answered concurrently, then combined.

Each aspect retrieves and generates on its own, all at once (under the LLM layer's cap), so the
critical path is plan -> one aspect round trip -> combine, whatever the number of aspects. An aspect
that fails is dropped and recorded; if all fail the pipeline falls back to plain RAG.
"""

from __future__ import annotations

import asyncio

from typedrag.engines.base import AnswerRequest, AnswerStyle, PartialAnswer
from typedrag.llm.base import LLMError
from typedrag.nfq import NFQType
from typedrag.result import Aspect
from typedrag.strategies.base import AspectsFailed, StrategyContext


async def answer_aspect(question: str, aspect: Aspect, style: AnswerStyle, ctx: StrategyContext) -> Aspect:
    try:
        hits = await ctx.retrieve(aspect.query, ctx.aspect_k)
        sources = ctx.book.add(hits)
        aspect.source_numbers = [s.number for s in sources]
        request = AnswerRequest(question=question, sources=sources, style=style, focus=aspect.label)
        aspect.answer = await ctx.engine.answer(request, ctx.trace, role=f"answer:{style.value}")
    except LLMError as error:
        aspect.error = str(error)
        ctx.trace.fallback(f"aspect:{aspect.label}", f"dropped, generation failed: {error}")
    ctx.emit("aspect", aspect=aspect.model_dump())
    return aspect


async def answer_and_combine(
    question: str, kind: NFQType, aspects: list[Aspect], style: AnswerStyle, ctx: StrategyContext, topic: str = ""
) -> str:
    done = await asyncio.gather(*(answer_aspect(question, a, style, ctx) for a in aspects))
    parts = [PartialAnswer(label=a.label, text=a.answer) for a in done if a.error is None]
    if not parts:
        raise AspectsFailed(f"all {len(aspects)} aspects failed")
    return await ctx.engine.combine(question, kind, parts, ctx.trace, topic=topic)
