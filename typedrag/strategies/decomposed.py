"""The shared shape of Reason, Instruction and Debate: aspects answered concurrently, then combined.

1. Retrieve at once for the question and for every aspect (its sub-query plus the question's
   own words, so the subject outweighs cue words like "causes" or "risks").
2. Pool the passages, keep those on the question's topic, and give each aspect its own: the
   question's top passages are always in the pool, so no aspect sees less than plain RAG would.
3. Number the passages in aspect order (prompts, citations and cache keys are the same every run),
   then answer every aspect at once under the LLM layer's cap: the critical path is plan -> one
   aspect round trip -> combine, whatever the number of aspects.
4. Drop, and record, an aspect that found no passage of its own, failed, or repeats another.
5. Combine what is left (aggregate or mediate); if nothing is left, the pipeline falls back.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, field_validator

from typedrag.attribution import settle
from typedrag.engines.base import Extract, Part, PlanTask, Section, WriteTask
from typedrag.engines.heuristics import normalise
from typedrag.errors import AspectsFailed, LLMError
from typedrag.prompts import CITE, GROUNDED, Prompt
from typedrag.result import Aspect
from typedrag.strategies.base import QUESTION_DEPTH, StrategyContext, StrategyOutput, assign, on_topic, union
from typedrag.strategies.plans import MAX_ASPECTS, Query, aspect_list, clean_phrases, keep_at_most
from typedrag.text import content_words

# Two sub-answers that share this much of the shorter one's words (and at least REPEAT_MIN_WORDS of them)
# say the same thing.
REPEAT_OVERLAP = 0.5
REPEAT_MIN_WORDS = 4
ANSWER_SENTENCES = 6  # the offline combined answer, before labels: 1.5x plain RAG's four sentences
OVERVIEW = "overview"  # the aspect that answers the question itself from its top passages
OVERVIEW_SENTENCES = 4  # as many as plain RAG quotes: the combined answer draws its lead from them
ASPECT_MAX_WORDS = 30  # an aspect adds one short point to the combined answer, not a run-on sentence
ASPECT_TOKENS = 200  # an aspect's answer is at most three sentences: a model that runs on is cut here


class SubQueryPlan(BaseModel):
    """Single-aspect sub-queries for Reason (causes) and Instruction (steps) questions."""

    sub_queries: list[Query] = aspect_list("two to five short search queries, one aspect each, each understandable on its own")

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
    """How a decomposing type writes its aspects and merges them.

    `extract(question, parts)` is the offline engine's recipe for the merged answer.
    """

    aspect_prompt: Prompt
    aspect_role: str
    aspect_cue: Callable[[str], re.Pattern[str] | None]  # by aspect label: the shape its sentences should have
    prompt: Prompt
    role: str
    extract: Callable[[str, list[Part]], Extract]


def retrieval_query(aspect_query: str, question: str) -> str:
    """The aspect's query plus the question's content words: the subject outweighs the cue words in BM25."""
    return f"{aspect_query} {' '.join(content_words(normalise(question)))}".strip()


def repeats(text: str, earlier: str) -> bool:
    """True when `text` is `earlier` again, or shares at least half the words of the shorter of the two."""
    words, other = set(content_words(text.lower())), set(content_words(earlier.lower()))
    shared = len(words & other)
    if text.strip() == earlier.strip():
        return True
    return shared >= REPEAT_MIN_WORDS and shared / min(len(words), len(other)) >= REPEAT_OVERLAP


def budget(parts: list[Part]) -> list[int]:
    """Sentences per part of the offline combined answer: the overview's four (what plain RAG quotes), then
    one from each of the first two other aspects (two when there is only one) — about 1.5x plain RAG in
    all; the other aspects' answers stay in the trace."""
    others = [p for p in parts if p.label != OVERVIEW]
    if len(others) == len(parts):  # no overview: spread the whole answer over the aspects
        return [max(1, ANSWER_SENTENCES // len(parts))] * len(parts)
    extra = iter([2] if len(others) == 1 else [1, 1])
    return [OVERVIEW_SENTENCES if p.label == OVERVIEW else next(extra, 0) for p in parts]


def part_sections(
    question: str, parts: list[Part], cue_for: Callable[[str], re.Pattern[str] | None], *, in_order: bool = False
) -> tuple[Section, ...]:
    """The offline recipe for a combined answer: the overview's best sentences for the question first
    (unlabelled, picked as plain RAG picks), then each aspect's own, labelled, as many as `budget` gives
    each. An aspect quotes a sentence of its shape (a cause, a step, a stance) when it has one, so a point
    shows under a label it fits."""
    sections = []
    for index, (part, count) in enumerate(zip(parts, budget(parts))):
        if not count:
            continue
        overview = part.label == OVERVIEW
        sections.append(
            Section(
                query=question if overview else f"{part.query} {question}",
                label="" if overview else part.label,
                sentences=count,
                cue=None if overview else cue_for(part.label),  # the overview picks as plain RAG does
                cue_first=not overview,
                groups=frozenset({index}),
                in_order=in_order,
                optional=not overview,
                max_words=None if overview else ASPECT_MAX_WORDS,
            )
        )
    return tuple(sections)


async def answer_aspect(
    question: str, aspect: Aspect, sources, how: Combination, ctx: StrategyContext, sentences: int
) -> None:
    if aspect.label == OVERVIEW:  # the question's own passages, read as plain RAG reads them
        section = Section(query=question, sentences=sentences)
    else:
        section = Section(
            query=f"{aspect.query} {question}",
            sentences=sentences,
            cue=how.aspect_cue(aspect.label),
            cue_first=True,
            max_words=ASPECT_MAX_WORDS,
        )
    task = WriteTask(
        role=how.aspect_role,
        prompt=how.aspect_prompt,
        values={"question": question, "focus": aspect.label},
        sources=sources,
        extract=Extract((section,)),
        max_tokens=ASPECT_TOKENS,
    )
    try:
        aspect.answer = await ctx.engine.write(task, ctx.trace)
    except LLMError as error:
        drop(aspect, f"generation failed: {error}", ctx)
        return
    if not ctx.engine.generative:  # an extractive engine quotes its passages with their own numbers
        ctx.emit("aspect", aspect=aspect.model_dump())
        return
    settled = await asyncio.to_thread(settle, aspect.answer, sources)
    for note in settled.notes(f"aspect {aspect.label!r}"):
        ctx.trace.fallback(f"aspect:{aspect.label}", note)
    aspect.answer = settled.text
    if not settled.supported:
        drop(aspect, "no sentence of its answer is supported by its passages", ctx)
    ctx.emit("aspect", aspect=aspect.model_dump())


def drop(aspect: Aspect, reason: str, ctx: StrategyContext, *, announce: bool = False) -> None:
    """Record why an aspect is left out; `announce` tells streaming clients about one never answered."""
    aspect.error = reason
    ctx.trace.fallback(f"aspect:{aspect.label}", f"dropped, {reason}")
    if announce:
        ctx.emit("aspect", aspect=aspect.model_dump())


async def answer_and_combine(
    question: str, aspects: list[Aspect], how: Combination, ctx: StrategyContext, **values: str
) -> str:
    """The combined answer of `aspects` (filled in place: passages, answers, or why each was dropped).

    An overview aspect answers the question itself from its top passages, plain RAG's and the next ones
    down, so the typed answer never has less evidence than plain RAG; the planned aspects add what those
    passages lack, each from passages of its own.
    """
    working = await gather_evidence(question, aspects, ctx)
    # Offline, each aspect quotes enough for the combined answer even when it is the only one left.
    sentences = max(2, -(-ANSWER_SENTENCES // max(len(working), 1)))
    await asyncio.gather(
        *(answer_aspect(question, a, s, how, ctx, OVERVIEW_SENTENCES if a.label == OVERVIEW else sentences) for a, s in working)
    )
    if working and working[0][0].label == OVERVIEW:
        aspects.insert(0, working[0][0])
    parts = useful_parts([aspect for aspect, _ in working], ctx)
    if not parts:
        raise AspectsFailed(why_none(aspects))
    task = WriteTask(
        role=how.role,
        prompt=how.prompt,
        values={"question": question, **values},
        parts=parts,
        sources=ctx.book.sources,  # the prompt does not show them; the offline engine reads their titles
        extract=how.extract(question, parts),
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
    question_depth = max(QUESTION_DEPTH, ctx.top_k)
    by_question, *own = await ctx.retrieve_many([question, *queries], max(question_depth, aspect_depth))
    rag_hits, deeper = by_question[: ctx.top_k], by_question[ctx.top_k : question_depth]
    seen = {hit.passage_id for hit in rag_hits}
    fresh = [[hit for hit in hits[:aspect_depth] if hit.passage_id not in seen] for hits in own]
    # Plain RAG's passages are scored too: they set the bar, so a pool that is all off topic is not kept for
    # want of anything better.
    relevant = {hit.passage_id for hit in await on_topic(question, union([rag_hits, deeper, *fresh]), ctx)}
    pool = [hit for hit in union(fresh) if hit.passage_id in relevant]
    assigned = await assign(queries, fresh, pool, ctx.aspect_k, ctx)
    # The overview reads plain RAG's passages and the on-topic ones below them that no aspect took.
    taken = {hit.passage_id for hits in assigned for hit in hits}
    overview_hits = rag_hits + [hit for hit in deeper if hit.passage_id in relevant and hit.passage_id not in taken]
    working = [(Aspect(label=OVERVIEW, query=question), ctx.book.add(overview_hits))] if overview_hits else []
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
        answer = await answer_and_combine(question, aspects, self.combination, ctx)
        return StrategyOutput(answer=answer, plan=plan, aspects=aspects)
