"""The shared shape of Reason, Instruction and Debate: aspects answered concurrently, then combined.

1. Retrieve at once for the question and for every aspect (its sub-query plus the question's
   own words, so the subject outweighs cue words like "causes" or "risks").
2. The overview aspect is plain RAG itself: the question's top passages and the plain-RAG prompt, so
   the combined answer never has less than plain RAG's. Pool the other passages, keep those on the
   question's topic, and give each planned aspect passages of its own.
3. Number the passages in aspect order (prompts, citations and cache keys are the same every run),
   then answer every aspect at once under the LLM layer's cap: the critical path is plan -> one
   aspect round trip -> combine, whatever the number of aspects.
4. Drop, and record, an aspect that found no passage of its own, failed, or repeats another.
5. Combine what is left (aggregate or mediate); if nothing is left, the pipeline falls back.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, field_validator

from typedrag.attribution import settle
from typedrag.citations import cited_numbers
from typedrag.engines.base import Part, PlanTask, WriteTask
from typedrag.errors import AspectsFailed, LLMError
from typedrag.prompts import CITE, GROUNDED, Prompt
from typedrag.result import Aspect
from typedrag.strategies.base import StrategyContext, StrategyOutput, assign, on_topic, union
from typedrag.strategies.evidence import grounded_answer
from typedrag.strategies.plans import MAX_ASPECTS, Query, aspect_list, clean_phrases, keep_at_most
from typedrag.text import bare_question, content_words

# Two sub-answers that share this much of the shorter one's words (and at least REPEAT_MIN_WORDS of them)
# say the same thing.
REPEAT_OVERLAP = 0.5
REPEAT_MIN_WORDS = 4
OVERVIEW = "overview"  # the aspect that answers the question itself, as plain RAG does
ASPECT_TOKENS = 200  # an aspect's answer is at most three sentences: a model that runs on is cut here


class SubQueryPlan(BaseModel):
    """Single-aspect sub-queries for Reason (causes) and Instruction (steps) questions."""

    # A small model often repeats one query; once duplicates go, a single aspect still adds to the overview.
    sub_queries: list[Query] = aspect_list(
        "two to five short search queries, one aspect each, each understandable on its own", accept=1
    )

    @field_validator("sub_queries", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return clean_phrases(value)


ASPECT_ANSWER = Prompt(
    "aspect_answer",
    GROUNDED,
    "Sources:\n{sources}\n\nThe reader's question is: {question}\n"
    "Answer only this part of it: {focus}\n\nAt most three sentences. " + CITE,
)


@dataclass(frozen=True)
class Combination:
    """How a decomposing type answers its aspects and merges them: the prompts, and the merging step's
    name ("aggregate" or "mediate"), which with the type's name makes each step's role."""

    aspect_prompt: Prompt
    prompt: Prompt
    combine: str = "aggregate"


def retrieval_query(aspect_query: str, question: str) -> str:
    """The aspect's query plus the question's content words: the subject outweighs the cue words in BM25."""
    return f"{aspect_query} {' '.join(content_words(bare_question(question)))}".strip()


def repeats(text: str, earlier: str) -> bool:
    """True when `text` is `earlier` again, or shares at least half the words of the shorter of the two."""
    words, other = set(content_words(text.lower())), set(content_words(earlier.lower()))
    shared = len(words & other)
    if text.strip() == earlier.strip():
        return True
    return shared >= REPEAT_MIN_WORDS and shared / min(len(words), len(other)) >= REPEAT_OVERLAP


async def answer_aspect(question: str, aspect: Aspect, sources, name: str, how: Combination, ctx: StrategyContext) -> None:
    """The aspect's answer from its own passages; dropped, and recorded, if it cites none of them."""
    if aspect.label == OVERVIEW:  # plain RAG's own step: the same prompt over the same passages
        task = grounded_answer(question, sources, f"overview:{name}")
    else:
        task = WriteTask(
            role=f"aspect:{name}",
            prompt=how.aspect_prompt,
            values={"question": question, "focus": aspect.label, "query": aspect.query},
            sources=sources,
            max_tokens=ASPECT_TOKENS,
        )
    try:
        aspect.answer = await ctx.engine.write(task, ctx.trace)
    except LLMError as error:
        drop(aspect, f"generation failed: {error}", ctx)
        return
    if ctx.engine.generative:  # a model's markers are checked; an extractive engine quotes with the passages' own
        settled = await asyncio.to_thread(settle, aspect.answer, sources)
        for note in settled.notes(f"aspect {aspect.label!r}"):
            ctx.trace.fallback(f"aspect:{aspect.label}", note)
        aspect.answer = settled.text
        if not settled.supported:
            drop(aspect, "no sentence of its answer is supported by its passages", ctx)
    elif not cited_numbers(aspect.answer):
        drop(aspect, "its passages hold no sentence of its kind", ctx)
    ctx.emit("aspect", aspect=aspect.model_dump())


def drop(aspect: Aspect, reason: str, ctx: StrategyContext, *, announce: bool = False) -> None:
    """Record why an aspect is left out; `announce` tells streaming clients about one never answered."""
    aspect.error = reason
    ctx.trace.fallback(f"aspect:{aspect.label}", f"dropped, {reason}")
    if announce:
        ctx.emit("aspect", aspect=aspect.model_dump())


async def answer_and_combine(
    question: str, aspects: list[Aspect], name: str, how: Combination, ctx: StrategyContext, **values: str
) -> str:
    """The combined answer of `aspects` (filled in place: passages, answers, or why each was dropped).

    An overview aspect answers the question itself exactly as plain RAG does, so the typed answer never
    has less than plain RAG's; the planned aspects add what those passages lack, each from passages of its own.
    """
    working = await gather_evidence(question, aspects, ctx)
    await asyncio.gather(*(answer_aspect(question, a, s, name, how, ctx) for a, s in working))
    if working and working[0][0].label == OVERVIEW:
        aspects.insert(0, working[0][0])
    parts = useful_parts([aspect for aspect, _ in working], ctx)
    if not parts:
        raise AspectsFailed(why_none(aspects))
    task = WriteTask(
        role=f"{how.combine}:{name}",
        prompt=how.prompt,
        values={"question": question, **values},
        parts=parts,
        sources=ctx.book.sources,  # the prompt does not show them; the offline engine reads their titles
        max_tokens=600,
    )
    return await ctx.write_answer(task)


async def gather_evidence(question: str, aspects: list[Aspect], ctx: StrategyContext) -> list[tuple[Aspect, list]]:
    """Each aspect with the numbered sources it answers from, the overview first; aspects with none are dropped.

    Retrieval for the question and every aspect at once; passages beyond plain RAG's must be on the
    question's topic (cue words like "causes" can pull in a plumbing "sink" for "Why did the Titanic
    sink?", and BM25's lower ranks often share one word only); each aspect gets pooled passages no other has.
    """
    queries = [retrieval_query(a.query, question) for a in aspects]
    # An aspect searches deep enough to still have candidates once plain RAG's passages are set aside.
    aspect_depth = ctx.top_k + ctx.aspect_k + 2
    by_question, *own = await ctx.retrieve_many([question, *queries], aspect_depth)
    rag_hits = by_question[: ctx.top_k]
    seen = {hit.passage_id for hit in rag_hits}
    fresh = [[hit for hit in hits if hit.passage_id not in seen] for hits in own]
    # Plain RAG's passages are scored too: they set the bar, so a pool that is all off topic is not kept for
    # want of anything better.
    relevant = {hit.passage_id for hit in await on_topic(question, union([rag_hits, *fresh]), ctx)}
    pool = [hit for hit in union(fresh) if hit.passage_id in relevant]
    assigned = await assign(queries, fresh, pool, ctx.aspect_k, ctx)
    working = [(Aspect(label=OVERVIEW, query=question), ctx.book.add(rag_hits))] if rag_hits else []
    for aspect, hits in zip(aspects, assigned):
        if not hits:
            drop(aspect, "no on-topic passage beyond the question's own and the other aspects'", ctx, announce=True)
            continue
        working.append((aspect, ctx.book.add(hits)))
    for aspect, sources in working:
        aspect.source_numbers = [s.number for s in sources]
    return working


def useful_parts(answered: list[Aspect], ctx: StrategyContext) -> list[Part]:
    """The aspects' answers worth combining: each one supported by its passages and not a repeat of another."""
    parts: list[Part] = []
    for aspect in answered:
        if aspect.error is not None:
            continue
        if any(repeats(aspect.answer, p.text) for p in parts):
            drop(aspect, "its answer repeats another aspect's", ctx)
            continue
        parts.append(Part(label=aspect.label, text=aspect.answer, query=aspect.query))
    return parts


def why_none(aspects: list[Aspect]) -> str:
    """Why no aspect is left, with the counts right: how many of each kind, and for what reason."""
    planned = sum(a.label != OVERVIEW for a in aspects)
    overview = " (the overview and" if len(aspects) > planned else " ("
    reasons = Counter(a.error or "no answer" for a in aspects)
    because = "; ".join(f"{count} {reason}" for reason, count in reasons.most_common())
    return f"all {len(aspects)} aspects{overview} {planned} planned) were dropped: {because}"


@dataclass(frozen=True)
class SubQueryStrategy:
    """Reason and Instruction: plan single-aspect sub-queries, answer each, combine.

    The two types differ only in data (their prompts, planner and cue), so each module builds one of these.
    """

    name: str
    plan: PlanTask[SubQueryPlan]
    combination: Combination

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        plan = await ctx.engine.plan(self.plan, question, ctx.trace)
        ctx.emit("plan", plan=plan.model_dump())
        queries = keep_at_most(plan.sub_queries, MAX_ASPECTS, "sub-queries", self.plan.role, ctx.trace)
        aspects = [Aspect(label=q, query=q) for q in queries]
        ctx.attempt = StrategyOutput(answer="", plan=plan, aspects=aspects)  # kept in the result if this falls back
        answer = await answer_and_combine(question, aspects, self.name, self.combination, ctx)
        return StrategyOutput(answer=answer, plan=plan, aspects=aspects)
