"""The shared shape of Reason, Instruction and Debate: aspects answered together, then combined.

1. The overview aspect is plain RAG itself: the question's top passages and the plain-RAG prompt, so
   the combined answer never has less than plain RAG's. It needs no plan, so once its passages are found
   its answer is written beside the plan and the planned aspects (`Together`).
2. Retrieve at once for every planned aspect (its sub-query plus the question's own words, so the
   subject outweighs cue words like "causes" or "risks"). Pool the passages beyond the overview's,
   keep those on the question's topic, and give each planned aspect passages of its own.
3. Number the passages in aspect order, the overview's first (prompts, citations and cache keys are the
   same every run), then answer every planned aspect together under the LLM layer's cap: the critical
   path is plan -> one aspect round trip -> combine, whatever the number of aspects.
4. Drop, and record, an aspect that found no passage of its own, failed, or repeats another.
5. Combine what is left (aggregate or mediate); if nothing is left, the pipeline falls back.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, field_validator

from typedrag.abstain import NOT_ANSWERED
from typedrag.engines.base import AspectAnswer, Combined, Facet, Mediated, Part, PlanTask, Weighing, WriteTask
from typedrag.errors import AspectsFailed, LLMError, PlanFailed
from typedrag.prompts import CITE, GROUNDED, Prompt, format_parts
from typedrag.records import ScoredPassage
from typedrag.result import Aspect, Source
from typedrag.steps import (
    Depths,
    Flow,
    Note,
    Number,
    Plan,
    Planned,
    Search,
    StrategyOutput,
    Tell,
    Together,
    Weigh,
    Write,
)
from typedrag.strategies.base import assign, on_topic, union
from typedrag.strategies.evidence import grounded_answer, question_hits
from typedrag.strategies.plans import MAX_ASPECTS, Query, aspect_list, clean_phrases, keep_at_most
from typedrag.phrasing.questions import bare_question
from typedrag.text import content_words

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
    (`facet`), and how the merging step merges ("aggregate" or "mediate"), which names it in traces."""

    aspect_prompt: Prompt
    prompt: Prompt
    facet: Facet
    combine: Literal["aggregate", "mediate"] = "aggregate"
    # A mediation's weighing: the task that fills `Weighing`, and the prompt's stance when the sources favour
    # one side (with {side} and {reason}) and when they are balanced.
    weigh: tuple[PlanTask[Weighing], str, str] | None = None


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


# What planning a decomposed question gives: the plan, its aspects (still to be answered), and the topic a
# mediator names (empty for aggregated types).
Planning = tuple[BaseModel, list[Aspect], str]


def answer_and_combine(
    question: str, depths: Depths, name: str, how: Combination, planning: Flow[Planning]
) -> Flow[StrategyOutput]:
    """The combined answer of the overview and the planned aspects.

    The overview answers the question itself exactly as plain RAG does, so the typed answer never has less
    than plain RAG's; it is written beside the plan and the planned aspects, which add what its passages
    lack, each from passages of its own. A plan that fails stops the overview too.
    """
    hits = yield from question_hits(question, depths.top_k)
    flows: list[Flow[Any]] = [plan_and_answer(question, hits, depths, name, how, planning)]
    overview, sources = None, []
    if hits:
        overview = Aspect(label=OVERVIEW, query=question)
        sources = yield Number(hits)  # numbered first: the plan, and so every other aspect, is still to come
        overview.source_numbers = [s.number for s in sources]
        flows.insert(0, write_aspect(overview, grounded_answer(question, sources, f"overview:{name}")))
    *first, (plan, aspects, topic, working) = yield Together(*flows)
    answered = [part for _, _, part in working]
    if overview is not None:  # put first among the aspects, and told after the plan, whenever it was written
        aspects.insert(0, overview)
        answered.insert(0, first[0])
        yield Tell("aspect", {"aspect": overview.model_dump()})
    parts = yield from useful_parts(answered, aspects)
    if not parts:
        raise AspectsFailed(why_none(aspects))
    unanswered = None  # what the question's own passages lack, when they did not answer it ("": not said)
    if overview is not None and first[0] is None and (overview.error or "").startswith(NOT_ANSWERED):
        unanswered = overview.error.removeprefix(NOT_ANSWERED).partition(": ")[2].strip()
    written_from = {OVERVIEW: sources, **{aspect.label: aspect_sources for aspect, aspect_sources, _ in working}}
    numbered = {s.number: s for part in parts for s in written_from[part.label]}
    combining = dict(
        role=f"{how.combine}:{name}",
        prompt=how.prompt,
        question=question,
        parts=tuple(parts),
        facet=how.facet,
        combine=how.combine,
        topic=topic,
        unanswered=unanswered,
        sources=[
            numbered[n] for n in sorted(numbered)
        ],  # what the parts were written from; the prompt does not show them
        max_tokens=600,
    )
    if how.weigh is not None:
        stance = yield from weighed(question, topic, tuple(parts), str(combining["role"]), how.weigh)
        task: Combined = Mediated(**combining, stance=stance)
    else:
        task = Combined(**combining)
    written = yield Write(task, final=True)
    return StrategyOutput(answer=written.text, plan=plan, aspects=aspects)


def weighed(
    question: str, topic: str, parts: tuple[Part, ...], role: str, how: tuple[PlanTask[Weighing], str, str]
) -> Flow[str]:
    """The mediator's stance: the sources weighed from the perspectives' cases (with a model; nothing is
    weighed offline), then `conclude` for the side they favour, or `balance`; a weighing that fails is
    recorded on the mediating step (`role`) and the answer balanced."""
    weigh, conclude, balance = how
    task = PlanTask(weigh.role, weigh.prompt.filled(topic=topic, parts=format_parts(parts)), weigh.schema)
    try:
        weighing = yield Weigh(task, question)
    except (PlanFailed, LLMError) as error:
        yield Note(role, f"weighing the perspectives failed ({type(error).__name__}: {error}); mediated as balanced")
        return balance
    if weighing is not None and weighing.concludes:
        return conclude.format(side=" ".join(weighing.side.split()), reason=" ".join(weighing.reason.split()))
    return balance


def plan_and_answer(
    question: str, rag_hits: list[ScoredPassage], depths: Depths, name: str, how: Combination, planning: Flow[Planning]
) -> Flow[tuple[BaseModel, list[Aspect], str, list[tuple[Aspect, list[Source], Part | None]]]]:
    """Plan, give each planned aspect passages of its own, and answer them together: the plan, its aspects
    (each with its answer, or why it was dropped), the topic, and each answered aspect with its sources and part."""
    plan, aspects, topic = yield from planning
    working = yield from gather_evidence(question, rag_hits, aspects, depths)
    parts = yield Together(*(answer_aspect(question, aspect, sources, name, how) for aspect, sources in working))
    return plan, aspects, topic, [(aspect, sources, part) for (aspect, sources), part in zip(working, parts)]


def gather_evidence(
    question: str, rag_hits: list[ScoredPassage], aspects: list[Aspect], depths: Depths
) -> Flow[list[tuple[Aspect, list[Source]]]]:
    """Each planned aspect with the numbered sources it answers from; aspects with none are dropped.

    Retrieval for every aspect at once; passages beyond plain RAG's (`rag_hits`, the overview's) must be
    on the question's topic (cue words like "causes" can pull in a plumbing "sink" for "Why did the
    Titanic sink?", and BM25's lower ranks often share one word only); each aspect gets pooled passages
    no other has.
    """
    queries = [retrieval_query(a.query, question) for a in aspects]
    own = yield Search(queries, depths.aspect_search)
    seen, distinct_ids = {hit.passage_id for hit in rag_hits}, {hit.passage_id for hit in union([rag_hits, *own])}
    fresh = [[hit for hit in hits if hit.passage_id in distinct_ids and hit.passage_id not in seen] for hits in own]
    # Plain RAG's passages are scored too: they set the bar, so a pool that is all off topic is not kept for
    # want of anything better.
    relevant = {hit.passage_id for hit in (yield from on_topic(question, union([rag_hits, *fresh])))}
    pool = [hit for hit in union(fresh) if hit.passage_id in relevant]
    assigned = yield from assign(queries, fresh, pool, depths.aspect_k)
    working = []
    for aspect, hits in zip(aspects, assigned):
        if not hits:
            yield from drop(
                aspect, "no on-topic passage beyond the question's own and the other aspects'", announce=True
            )
            continue
        sources = yield Number(hits)
        aspect.source_numbers = [s.number for s in sources]
        working.append((aspect, sources))
    return working


def answer_aspect(
    question: str, aspect: Aspect, sources: list[Source], name: str, how: Combination
) -> Flow[Part | None]:
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
    part = yield from write_aspect(aspect, task)
    yield Tell("aspect", {"aspect": aspect.model_dump()})
    return part


def write_aspect(aspect: Aspect, task: WriteTask) -> Flow[Part | None]:
    """Fill in `aspect.answer`; the part it gives the combining step, or None when it is dropped, and
    recorded: generation failed, the driver declined it (its passages do not answer it, by the abstention
    policy; no passage supports what a model wrote), or an extractive engine found no sentence of its kind."""
    try:
        written = yield Write(task, aspect=aspect.label)
    except LLMError as error:
        yield from drop(aspect, f"generation failed: {error}")
        return None
    aspect.answer = written.text
    if written.declined:
        yield from drop(aspect, written.declined)
    elif not written.supported and isinstance(task, AspectAnswer):
        if written.said:  # an extractive engine quoted nothing by its design, and said why on the step: no failure
            aspect.answer = ""
            return None
        yield from drop(aspect, "no sentence of its kind in its passages answers the question")
    if aspect.error is not None:
        return None
    return Part(
        label=aspect.label,
        text=aspect.answer,
        quotes=written.quotes,
        lead=not isinstance(task, AspectAnswer),
        best=written.best,
        filed_under=written.filed_under,
    )


def drop(aspect: Aspect, reason: str, *, announce: bool = False) -> Flow[None]:
    """Record why an aspect is left out; `announce` tells streaming clients about one never answered."""
    aspect.error = reason
    yield Note(f"aspect:{aspect.label}", f"dropped, {reason}")
    if announce:
        yield Tell("aspect", {"aspect": aspect.model_dump()})


def useful_parts(answered: list[Part | None], aspects: list[Aspect]) -> Flow[list[Part]]:
    """The aspects' answers worth combining: each one supported by its passages and not a repeat of another."""
    parts: list[Part] = []
    by_label = {aspect.label: aspect for aspect in aspects}
    for part in answered:
        if part is None:
            continue
        if any(repeats(part.text, p.text) for p in parts):
            yield from drop(by_label[part.label], "its answer repeats another aspect's")
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

    def flow(self, question: str, depths: Depths) -> Flow[StrategyOutput]:
        return answer_and_combine(question, depths, self.name, self.combination, self.planning(question))

    def planning(self, question: str) -> Flow[Planning]:
        """The plan, and an aspect for each of its sub-queries (at most MAX_ASPECTS, the drop recorded)."""
        plan = yield Plan(self.plan, question)
        queries = yield from keep_at_most(plan.sub_queries, MAX_ASPECTS, "sub-queries", self.plan.role)
        aspects = [Aspect(label=q, query=q) for q in queries]
        yield Planned(plan, aspects)
        return plan, aspects, ""
