"""The shared shape of Reason, Instruction and Debate: aspects answered concurrently, then combined.

All aspects retrieve at once, their passages are numbered in aspect order (so prompts, citations
and cache keys are the same on every run), then all aspects generate at once under the LLM
layer's cap: the critical path is plan -> one aspect round trip -> combine, whatever the number
of aspects. An aspect that fails is dropped and recorded; if all fail the pipeline falls back to
plain RAG.
"""

from __future__ import annotations

import asyncio

from typedrag.engines.base import AnswerRequest, AnswerStyle, PartialAnswer
from typedrag.llm.base import LLMError
from typedrag.nfq import NFQType
from typedrag.result import Aspect, Source
from typedrag.strategies.base import AspectsFailed, StrategyContext


async def answer_aspect(
    question: str, aspect: Aspect, sources: list[Source], style: AnswerStyle, ctx: StrategyContext
) -> Aspect:
    try:
        request = AnswerRequest(question=question, sources=sources, style=style, focus=aspect.label, query=aspect.query)
        aspect.answer = await ctx.engine.answer(request, ctx.trace, role=f"answer:{style.value}")
    except LLMError as error:
        aspect.error = str(error)
        ctx.trace.fallback(f"aspect:{aspect.label}", f"dropped, generation failed: {error}")
    ctx.emit("aspect", aspect=aspect.model_dump())
    return aspect


async def answer_and_combine(
    question: str, kind: NFQType, aspects: list[Aspect], style: AnswerStyle, ctx: StrategyContext, topic: str = ""
) -> str:
    hits_per_aspect = await ctx.retrieve_many([a.query for a in aspects], ctx.aspect_k)
    sources_per_aspect = [ctx.book.add(hits) for hits in hits_per_aspect]
    for aspect, sources in zip(aspects, sources_per_aspect):
        aspect.source_numbers = [s.number for s in sources]
    done = await asyncio.gather(
        *(answer_aspect(question, a, sources, style, ctx) for a, sources in zip(aspects, sources_per_aspect))
    )
    parts = [PartialAnswer(label=a.label, text=a.answer) for a in done if a.error is None]
    if not parts:
        raise AspectsFailed(f"all {len(aspects)} aspects failed")
    return await ctx.engine.combine(question, kind, parts, ctx.trace, topic=topic)
