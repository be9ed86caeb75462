"""The shared shape of Reason, Instruction and Debate: aspects answered concurrently, then combined.

1. The overview aspect is plain RAG itself: the question's top passages and the plain-RAG prompt, so
   the combined answer never has less than plain RAG's. It needs no plan, so it begins with the plan:
   its passages are found and its answer written while the model plans.
2. Retrieve at once for every planned aspect (its sub-query plus the question's own words, so the
   subject outweighs cue words like "causes" or "risks"). Pool the passages beyond the overview's,
   keep those on the question's topic, and give each planned aspect passages of its own.
3. Number the passages in aspect order, the overview's first (prompts, citations and cache keys are the
   same every run), then answer every planned aspect at once under the LLM layer's cap: the critical
   path is plan -> one aspect round trip -> combine, whatever the number of aspects.
4. Drop, and record, an aspect that found no passage of its own, failed, or repeats another.
5. Combine what is left (aggregate or mediate); if nothing is left, the pipeline falls back.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, Field, field_validator

from typedrag import telemetry
from typedrag.abstain import ASPECT_MARGIN, NotInSources, Unsupported
from typedrag.attribution import settle
from typedrag.engines.base import AspectAnswer, Combined, Facet, Part, PlanT, PlanTask, WriteTask, Written
from typedrag.errors import AspectsFailed, LLMError
from typedrag.prompts import CITE, GROUNDED, Prompt
from typedrag.records import ScoredPassage
from typedrag.result import Aspect, Source
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
    """How a decomposing type answers its aspects and merges them: the prompts, what its aspects add
    (`facet`), and the merging step's name ("aggregate" or "mediate") for its role in traces."""

    aspect_prompt: Prompt
    prompt: Prompt
    facet: Facet
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


async def answer_aspect(question: str, aspect: Aspect, sources, name: str, how: Combination, ctx: StrategyContext) -> Part | None:
    """A planned aspect's answer from its own passages, told to streaming clients once written."""
    task = AspectAnswer(
        role=f"aspect:{name}",
        prompt=how.aspect_prompt,
        question=question,
        focus=aspect.label,
        facet=how.facet,
        sources=sources,
        max_tokens=ASPECT_TOKENS,
    )
    part = await write_aspect(aspect, task, ctx)
    ctx.emit("aspect", aspect=aspect.model_dump())
    return part


async def write_aspect(aspect: Aspect, task: WriteTask, ctx: StrategyContext) -> Part | None:
    """Fill in `aspect.answer`; the part it gives the combining step, or None when it is dropped, and
    recorded: generation failed, its passages do not answer it (the model says so, or offline they fall
    below the relevance bar or the reader finds no sentence of its kind) or no passage supports what it says."""
    task = replace(task, instructions=ctx.instructions)
    try:
        if ctx.relevance_bar is not None:
            await ctx.check_support(task, ctx.relevance_bar - ASPECT_MARGIN)
    except Unsupported as below:
        drop(aspect, f"its passages do not answer it ({below})", ctx)
        return None
    try:
        written = await telemetry.written(task, ctx.engine.name, ctx.engine.write(task, ctx.trace), aspect=aspect.label)
    except LLMError as error:
        drop(aspect, f"generation failed: {error}", ctx)
        return None
    except NotInSources as said:
        drop(aspect, f"its passages do not answer it: {said.missing}", ctx)
        return None
    aspect.answer = written.text
    if ctx.engine.generative:  # a model's markers are checked; an extractive engine quotes with the passages' own
        settled = await asyncio.to_thread(settle, aspect.answer, task.sources)
        for note in settled.notes(f"aspect {aspect.label!r}"):
            ctx.trace.fallback(f"aspect:{aspect.label}", note)
        aspect.answer = settled.text
        if not settled.supported:
            drop(aspect, "no sentence of its answer is supported by its passages", ctx)
    elif not written.supported and isinstance(task, AspectAnswer):
        drop(aspect, "no sentence of its kind in its passages answers the question", ctx)
    if aspect.error is not None:
        return None
    return Part(label=aspect.label, text=aspect.answer, quotes=written.quotes, lead=not isinstance(task, AspectAnswer))


@dataclass
class Overview:
    """Plain RAG's own step, begun before the plan because it needs none: its passages are searched and
    its answer written while the model plans, so after the plan only the planned aspects' requests remain."""

    passages: asyncio.Task[list[ScoredPassage]]
    answered: asyncio.Task[tuple[Aspect, Part | None] | None]  # None when the question found no passage

    @classmethod
    def begin(cls, question: str, name: str, ctx: StrategyContext) -> "Overview":
        passages = asyncio.create_task(ctx.retrieve(question, ctx.top_k))
        return cls(passages, asyncio.create_task(_answer_overview(question, passages, name, ctx)))

    async def cancel(self) -> None:
        """Stop both steps (the plan failed, or the client left) and wait until they have stopped."""
        steps = (self.answered, self.passages)
        for step in steps:
            step.cancel()
        await asyncio.wait(steps)
        for step in steps:  # a failure of its own is not news once the plan failed: taken, so none is logged as lost
            if not step.cancelled():
                step.exception()


async def _answer_overview(
    question: str, passages: Awaitable[list[ScoredPassage]], name: str, ctx: StrategyContext
) -> tuple[Aspect, Part | None] | None:
    hits = await passages
    if not hits:
        return None
    aspect = Aspect(label=OVERVIEW, query=question)
    sources = ctx.book.add(hits)  # numbered first: the plan, and so every other aspect, is still to come
    aspect.source_numbers = [s.number for s in sources]
    return aspect, await write_aspect(aspect, grounded_answer(question, sources, f"overview:{name}"), ctx)


async def plan_beside_overview(plan: Awaitable[PlanT], question: str, name: str, ctx: StrategyContext) -> tuple[PlanT, Overview]:
    """The plan, with the overview under way meanwhile; a plan that fails stops the overview too."""
    overview = Overview.begin(question, name, ctx)
    try:
        return await plan, overview
    except BaseException:
        await overview.cancel()
        raise


def drop(aspect: Aspect, reason: str, ctx: StrategyContext, *, announce: bool = False) -> None:
    """Record why an aspect is left out; `announce` tells streaming clients about one never answered."""
    aspect.error = reason
    ctx.trace.fallback(f"aspect:{aspect.label}", f"dropped, {reason}")
    if announce:
        ctx.emit("aspect", aspect=aspect.model_dump())


async def answer_and_combine(
    question: str, overview: Overview, aspects: list[Aspect], name: str, how: Combination, ctx: StrategyContext, topic: str = ""
) -> Written:
    """The combined answer of the overview and `aspects` (filled in place: passages, answers, or why each
    was dropped; the overview is put first among them).

    The overview answers the question itself exactly as plain RAG does, so the typed answer never
    has less than plain RAG's; the planned aspects add what those passages lack, each from passages of its own.
    """
    try:
        answered = await answer_aspects(question, overview, aspects, name, how, ctx)
    finally:
        await overview.cancel()  # a no-op once it is done; stops it if answering the aspects failed
    parts = useful_parts(answered, aspects, ctx)
    if not parts:
        raise AspectsFailed(why_none(aspects))
    task = Combined(
        role=f"{how.combine}:{name}",
        prompt=how.prompt,
        question=question,
        parts=tuple(parts),
        facet=how.facet,
        topic=topic,
        sources=ctx.book.sources,  # the prompt does not show them
        max_tokens=600,
    )
    return await ctx.write_answer(task)


async def answer_aspects(
    question: str, overview: Overview, aspects: list[Aspect], name: str, how: Combination, ctx: StrategyContext
) -> list[Part | None]:
    """The aspects given passages, answered, each as the part it gives the combining step (None when
    dropped): the overview first (put first in `aspects` too), then the planned ones in plan order."""
    working = await gather_evidence(question, await overview.passages, aspects, ctx)

    async def overview_answer() -> tuple[Aspect, Part | None] | None:
        answered = await overview.answered
        if answered is not None:  # told after the plan, whenever it was written
            ctx.emit("aspect", aspect=answered[0].model_dump())
        return answered

    first, *planned = await asyncio.gather(overview_answer(), *(answer_aspect(question, a, s, name, how, ctx) for a, s in working))
    if first is None:
        return planned
    aspects.insert(0, first[0])
    return [first[1], *planned]


async def gather_evidence(
    question: str, rag_hits: list[ScoredPassage], aspects: list[Aspect], ctx: StrategyContext
) -> list[tuple[Aspect, list[Source]]]:
    """Each planned aspect with the numbered sources it answers from; aspects with none are dropped.

    Retrieval for every aspect at once; passages beyond plain RAG's (`rag_hits`, the overview's) must be
    on the question's topic (cue words like "causes" can pull in a plumbing "sink" for "Why did the
    Titanic sink?", and BM25's lower ranks often share one word only); each aspect gets pooled passages
    no other has.
    """
    queries = [retrieval_query(a.query, question) for a in aspects]
    # An aspect searches deep enough to still have candidates once plain RAG's passages are set aside.
    own = await ctx.retrieve_many(queries, ctx.top_k + ctx.aspect_k + 2)
    seen = {hit.passage_id for hit in rag_hits}
    fresh = [[hit for hit in hits if hit.passage_id not in seen] for hits in own]
    # Plain RAG's passages are scored too: they set the bar, so a pool that is all off topic is not kept for
    # want of anything better.
    relevant = {hit.passage_id for hit in await on_topic(question, union([rag_hits, *fresh]), ctx)}
    pool = [hit for hit in union(fresh) if hit.passage_id in relevant]
    assigned = await assign(queries, fresh, pool, ctx.aspect_k, ctx)
    working = []
    for aspect, hits in zip(aspects, assigned):
        if not hits:
            drop(aspect, "no on-topic passage beyond the question's own and the other aspects'", ctx, announce=True)
            continue
        sources = ctx.book.add(hits)
        aspect.source_numbers = [s.number for s in sources]
        working.append((aspect, sources))
    return working


def useful_parts(answered: list[Part | None], aspects: list[Aspect], ctx: StrategyContext) -> list[Part]:
    """The aspects' answers worth combining: each one supported by its passages and not a repeat of another."""
    parts: list[Part] = []
    by_label = {aspect.label: aspect for aspect in aspects}
    for part in answered:
        if part is None:
            continue
        if any(repeats(part.text, p.text) for p in parts):
            drop(by_label[part.label], "its answer repeats another aspect's", ctx)
            continue
        parts.append(part)
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
        planned = telemetry.traced("plan", ctx.engine.plan(self.plan, question, ctx.trace), role=self.plan.role, engine=ctx.engine.name)
        plan, overview = await plan_beside_overview(planned, question, self.name, ctx)
        ctx.emit("plan", plan=plan.model_dump())
        queries = keep_at_most(plan.sub_queries, MAX_ASPECTS, "sub-queries", self.plan.role, ctx.trace)
        aspects = [Aspect(label=q, query=q) for q in queries]
        ctx.attempt = StrategyOutput(answer="", plan=plan, aspects=aspects)  # kept in the result if this falls back
        written = await answer_and_combine(question, overview, aspects, self.name, self.combination, ctx)
        return StrategyOutput(answer=written.text, plan=plan, aspects=aspects)
