"""The one interface every question-type strategy implements, the context it runs in, and shared steps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from typedrag import telemetry
from typedrag.abstain import READER_BAR, Unsupported, support
from typedrag.engines.base import Engine, Trace, WriteTask, Written
from typedrag.index.base import Retriever
from typedrag.records import ScoredPassage
from typedrag.rerank import Reranker
from typedrag.result import Abstention, Aspect, Source, extract_citations
from typedrag.text import split_sentences

# A pooled passage counts as on topic when the reranker scores it against the question at least this
# high, or within OFF_TOPIC_MARGIN of the best passage (MiniLM cosines; unrelated text scores ~0-0.2).
ON_TOPIC = 0.35
OFF_TOPIC_MARGIN = 0.25


class SourceBook:
    """Numbers passages the first time any step sees them, so [n] means the same passage everywhere."""

    def __init__(self) -> None:
        self._by_id: dict[str, Source] = {}

    def add(self, hits: list[ScoredPassage]) -> list[Source]:
        """The sources for `hits`, numbering the ones not seen before."""
        sources = []
        for hit in hits:
            source = self._by_id.get(hit.passage_id)
            if source is None:
                source = Source.of(len(self._by_id) + 1, hit)
                self._by_id[hit.passage_id] = source
            sources.append(source)
        return sources

    @property
    def sources(self) -> list[Source]:
        """Every source numbered so far, in number order."""
        return list(self._by_id.values())


class AnswerStream:
    """The final answer as it is written: a `token` event for each piece, and a `citation` event for
    each finished sentence that cites passages (resolved to their ids), so a client can link it at once."""

    def __init__(self, emit: Callable[..., None], sources: list[Source]) -> None:
        self.emit, self.sources = emit, sources
        self.pending = ""  # text of the sentence not known to be finished yet
        self.sent = 0  # characters streamed

    def __call__(self, piece: str) -> None:
        self.emit("token", text=piece)
        self.sent += len(piece)
        self.pending += piece
        sentences = split_sentences(self.pending)
        if len(sentences) > 1:  # all but the last are finished: the next one has begun
            self._cite(sentences[:-1])
            self.pending = self.pending[self.pending.rfind(sentences[-1]) :]

    def close(self) -> None:
        self._cite(split_sentences(self.pending))
        self.pending = ""

    def _cite(self, sentences: list[str]) -> None:
        for sentence in sentences:
            for citation in extract_citations(sentence, self.sources):
                self.emit("citation", **citation.model_dump())


@dataclass
class StrategyContext:
    """What a strategy works with: the engine, retrieval, the trace and the numbers of its sources."""

    engine: Engine
    retriever: Retriever
    reranker: Reranker
    trace: Trace
    top_k: int = 5  # passages given to a single generation
    aspect_k: int = 3  # passages per aspect of a decomposed question
    candidates_k: int = 12  # retrieval depth before reranking
    book: SourceBook = field(default_factory=SourceBook)
    on_event: Callable[[str, dict[str, Any]], None] | None = None  # progress for streaming clients
    reranked: bool = False  # set once a step reranks, so the result names the reranker only then
    streamed: int = 0  # characters of answer text streamed to the client so far
    # The typed work done so far (plan, aspects): kept in the result, marked unused, if the strategy falls back.
    attempt: "StrategyOutput | None" = None
    instructions: str = ""  # the reader's instructions for every writing step (a chat's system messages)
    # Offline (typedrag.abstain): an answer whose passages fall below this bar is not written (the pipeline
    # abstains), an aspect's is dropped below it less ASPECT_MARGIN. None: the engine says so itself.
    relevance_bar: float | None = None

    def emit(self, event: str, **data: Any) -> None:
        """Tell a streaming client about progress (type, plan, each aspect, tokens, sources)."""
        if self.on_event is not None:
            self.on_event(event, data)

    async def write_answer(self, task: WriteTask) -> Written:
        """The final generation step of a strategy; a listening client gets its text as it is written."""
        reader_bar = READER_BAR if self.relevance_bar is not None else None  # offline abstention is on
        task = replace(task, instructions=self.instructions, reader_bar=reader_bar)
        if self.relevance_bar is not None:
            await self.check_support(task, self.relevance_bar)
        if self.on_event is None:
            return await telemetry.written(task, self.engine.name, self.engine.write(task, self.trace))
        stream = AnswerStream(self.emit, self.book.sources)
        try:
            written = await telemetry.written(task, self.engine.name, self.engine.write(task, self.trace, on_text=stream))
        finally:
            self.streamed += stream.sent
        stream.close()
        return written

    async def check_support(self, task: WriteTask, bar: float) -> None:
        """Raise Unsupported unless some sentence of the task's passages comes within `bar` of its question."""
        texts = [source.text for source in task.sources]
        judged = await asyncio.to_thread(support, task.question, texts, bar=bar)
        if not judged.answered:
            raise Unsupported(judged)

    async def retrieve(self, query: str, k: int) -> list[ScoredPassage]:
        """Top-k passages for one query, searched in a worker thread."""
        with telemetry.retrieving([query], k) as span:
            hits = await asyncio.to_thread(self.retriever.search, query, k)
            telemetry.found(span, [hits])
            return hits

    async def retrieve_many(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        """Top-k passages for each query, in one call so the retriever can run them in parallel."""
        with telemetry.retrieving(queries, k) as span:
            hit_lists = await asyncio.to_thread(self.retriever.search_many, queries, k)
            telemetry.found(span, hit_lists)
            return hit_lists

    async def rerank(self, query: str, hits: list[ScoredPassage], k: int) -> list[ScoredPassage]:
        """The k hits most relevant to `query` by the reranker."""
        self.reranked = True
        with telemetry.reranking(self.reranker.name, 1, len(hits), k) as span:
            best = await asyncio.to_thread(self.reranker.rerank, query, hits, k)
            telemetry.kept(span, [best])
            return best

    async def rerank_each(self, queries: list[str], hits: list[ScoredPassage]) -> list[list[ScoredPassage]]:
        """All of `hits` ranked for each query, in one worker-thread hop (it sits on the critical path)."""
        self.reranked = True
        with telemetry.reranking(self.reranker.name, len(queries), len(hits), len(hits)):
            return await asyncio.to_thread(lambda: [self.reranker.rerank(q, hits, len(hits)) for q in queries])


@dataclass
class StrategyOutput:
    """What a strategy returns to the pipeline: the answer, the plan it followed and its aspects."""

    answer: str
    plan: BaseModel | None = None
    aspects: list[Aspect] = field(default_factory=list)
    abstention: Abstention | None = None  # set (and `answer` empty) when its passages do not answer the question


@runtime_checkable
class Strategy(Protocol):
    """Answers questions of one type. `name` appears in results as `strategy`."""

    name: str

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        """The answer with its plan and aspects; raise StrategyError to fall back to plain RAG."""
        ...


def union(hit_lists: Iterable[list[ScoredPassage]]) -> list[ScoredPassage]:
    """Every passage once, in the order first seen."""
    seen: dict[str, ScoredPassage] = {}
    for hits in hit_lists:
        for hit in hits:
            seen.setdefault(hit.passage_id, hit)
    return list(seen.values())


async def on_topic(question: str, pool: list[ScoredPassage], ctx: StrategyContext) -> list[ScoredPassage]:
    """The pooled passages that speak to the question, best first.

    Sub-queries carry cue words ("causes", "risks") that can pull in passages about the cue alone
    (a plumbing "sink" for "Why did the Titanic sink?"); scoring every pooled passage against the
    question itself keeps them out.
    """
    ranked = await ctx.rerank(question, pool, len(pool))
    if not ranked:
        return []
    floor = min(ON_TOPIC, ranked[0].score - OFF_TOPIC_MARGIN)
    return [hit for hit in ranked if hit.score >= floor]


async def assign(
    queries: list[str], own_hits: list[list[ScoredPassage]], pool: list[ScoredPassage], k: int, ctx: StrategyContext
) -> list[list[ScoredPassage]]:
    """Give each aspect up to k pooled passages that no other aspect has, taking turns, best match first.

    An aspect prefers its own search results, then any pooled passage, each ranked by the reranker
    against the aspect's query; an aspect left with no passage gets none (the caller drops it).
    """
    if not pool:
        return [[] for _ in queries]
    preferences = []
    for ranked, own in zip(await ctx.rerank_each(queries, pool), own_hits):
        mine = {hit.passage_id for hit in own}
        preferences.append(sorted(ranked, key=lambda h: (h.passage_id not in mine, -h.score)))
    taken: set[str] = set()
    assigned: list[list[ScoredPassage]] = [[] for _ in queries]
    for _ in range(k):
        for index, ranked in enumerate(preferences):
            hit = next((h for h in ranked if h.passage_id not in taken), None)
            if hit is not None:
                taken.add(hit.passage_id)
                assigned[index].append(hit)
    return assigned
