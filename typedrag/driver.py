"""The one place typedrag's steps are performed: a strategy's flow says what to do (typedrag.steps), the
driver does it and sends the outcome back.

For each step the driver awaits the engine, the retriever or the reranker (blocking ones in a worker
thread) inside the step's span, named by the step's type (typedrag.telemetry). Besides, it:
- asks the engine's model for more queries when the pipeline expands them (Expand), to weigh a debate's cases
  (Weigh) and to rewrite a follow-up (RewriteFollowUp); never offline;
- searches a follow-up as what it was read to stand alone as, wherever a flow searches its question, the
  rankings fused (`drive(searches=...)`);
- numbers the passages of a run, so [n] means the same passage in every step of it;
- writes every step with the reader's own instructions (a chat's system messages), and a final step with
  knowledge = "labelled" (a generative engine may add what its model knows, apart: `Written.unsourced`), having
  first searched the documents for what the model would add (`_searched_gap`);
- applies the abstention policy (typedrag.abstain) to every writing step: when the sources of a final step
  do not answer, the run's answer is an abstention (the flow is sent the step declined, and what it returns
  is set aside but for its sources); any other comes back declined, with the reason, for the flow to drop;
- checks the citation markers of a model's partial answers against their passages (typedrag.attribution);
- streams the final step's text to a listening client, with a citation event per finished cited sentence;
- runs Together's flows at once, cancelling the others when one fails;
- records Notes as fallbacks and Tells as events; fallbacks and engine steps are listed in the flow's order
  (Together's flows in theirs), whatever order concurrent steps end in;
- falls back: a typed run that fails (StrategyError, LLMError) is recorded, and a fresh run of plain RAG
  answers, with sources of its own;
- cites the answer of a run that answers (Cite).

One driver serves one answer, from reading the question (typedrag.reading) to citing it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel

from typedrag import telemetry
from typedrag.abstain import Policy, Support, Verdict, support, unmentioned_names
from typedrag.attribution import settle
from typedrag.engines.base import ClosedBook, Combined, Engine, Grounded, PlanT, PlanTask, Trace, WriteTask, Written
from typedrag.errors import LLMError, PlanFailed, StrategyError
from typedrag.followup import offline_standalone
from typedrag.index.fusion import fuse_searches
from typedrag.gate import after, before
from typedrag.index.base import DUPLICATE_ROOM, Retriever, distinct
from typedrag.prompts import GAP_ANSWER
from typedrag.records import ScoredPassage
from typedrag.rerank import Reranker
from typedrag.result import (
    Abstention,
    Aspect,
    Citation,
    EngineStep,
    Fallback,
    Knowledge,
    Source,
    Unsourced,
    extract_citations,
)
from typedrag.steps import (
    Check,
    Cite,
    Classify,
    Cited,
    Depths,
    Expand,
    FillGap,
    Flow,
    Mentioned,
    Note,
    Number,
    Plan,
    Planned,
    Rank,
    ReadFollowUp,
    RewriteFollowUp,
    Rewritten,
    Search,
    Step,
    Strategy,
    StrategyOutput,
    Tell,
    Together,
    Weigh,
    Write,
)
from typedrag.text import split_sentences

Listener = Callable[[str, dict[str, Any]], None]  # hears progress events: name, data
# knowledge = "labelled": passages searched for what a final step's model would add from its own knowledge
GAP_K = 5


@dataclass(frozen=True)
class Record:
    """Where the fallbacks and engine steps of the flow being performed are recorded."""

    fallbacks: list[Fallback]
    steps: list[EngineStep]


# A flow run by Together records into a record of its own, added to its parent's in the order of Together's
# flows once they are all done: a trace lists what happened in the flow's order, whatever order concurrent
# steps ended in, so the same question gives the same trace every time (but for whether a step stopped by a
# failing sibling had reached its engine: that is timing).
_branch: ContextVar[Record | None] = ContextVar("typedrag_branch", default=None)


@dataclass(frozen=True)
class Services:
    """What performs the steps: the engine, the retriever (None for the LLM-only baseline) and the reranker.
    `checker`, an extractive engine beside a model, checks the model's "not in the sources" for a partial
    answer against what its reader finds in the passages (None: the model's word is taken). `classify` types a
    question (its text, a forced type, the trace): the pipeline's `decide_type`."""

    engine: Engine
    retriever: Retriever | None
    reranker: Reranker
    checker: Engine | None = None
    expand: bool = False  # Expand steps ask the engine's model for more queries (off: the question alone)
    # "labelled": a generative engine's final step may add what its model knows, apart from the cited answer
    knowledge: Knowledge = "documents"
    classify: Callable[[str, str | None, Trace], Awaitable[Any]] | None = None


class SourceBook:
    """Numbers passages the first time any step sees them, so [n] means the same passage everywhere."""

    def __init__(self) -> None:
        self._by_id: dict[str, Source] = {}

    def add(self, hits: tuple[ScoredPassage, ...] | list[ScoredPassage]) -> list[Source]:
        """The sources for `hits`, numbering the ones not seen before."""
        sources = []
        for hit in hits:
            source = self._by_id.get(hit.passage_id)
            if source is None:
                source = Source.of(len(self._by_id) + 1, hit)
                self._by_id[hit.passage_id] = source
            sources.append(source)
        return sources

    def holds(self, passage_id: str) -> bool:
        """Whether a step of the run has seen the passage."""
        return passage_id in self._by_id

    @property
    def sources(self) -> list[Source]:
        """Every source numbered so far, in number order."""
        return list(self._by_id.values())


class AnswerStream:
    """The final answer as it is written: a `token` event for each piece, and a `citation` event for
    each finished sentence that cites passages (resolved to their ids), so a client can link it at once."""

    def __init__(self, emit: Callable[[str, dict[str, Any]], None], sources: list[Source]) -> None:
        self.emit, self.sources = emit, sources
        self.pending = ""  # text of the sentence not known to be finished yet
        self.sent = 0  # characters streamed

    def __call__(self, piece: str) -> None:
        self.emit("token", {"text": piece})
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
                self.emit("citation", citation.model_dump())


@dataclass
class Run:
    """One strategy's run: the numbers of its sources, characters streamed, and its abstention, if any."""

    book: SourceBook = field(default_factory=SourceBook)
    streamed: int = 0
    abstention: Abstention | None = None
    unsourced: Unsourced | None = None  # what the final step's model added from its own knowledge


@dataclass(frozen=True)
class Drive:
    """What driving a question's strategy gave: the answer (empty when it abstained) and the strategy that
    wrote it, its numbered sources, the plan and aspects to show (`plan_used` False when the answer did not
    draw on them: its run fell back, or abstained), and what the pipeline reports about the run."""

    strategy: str
    answer: str
    sources: list[Source]
    plan: BaseModel | None = None
    aspects: list[Aspect] = field(default_factory=list)
    plan_used: bool = True
    abstention: Abstention | None = None
    reranked: bool = False  # some step reranked: the result names the reranker
    streamed: int = 0  # characters of the final run's text a client heard
    unsourced: Unsourced | None = None  # knowledge = labelled: the model's own part, kept beside an abstention too
    citations: list[Citation] = field(default_factory=list)  # the answer's, settled (none when it abstained)


class Driver:
    """Performs the steps of a question's flows with `services`, recording into `trace`.

    >>> from typedrag import OfflineEngine, ListRetriever, EmbeddingReranker
    >>> from typedrag.steps import Number, Search
    >>> def flow():
    ...     hits, = yield Search(["cats"], 1)
    ...     sources = yield Number(hits)
    ...     return [s.number for s in sources]
    >>> driver = Driver(Services(OfflineEngine(), ListRetriever(["Cats purr."]), EmbeddingReranker()), Trace())
    >>> asyncio.run(driver.follow(flow(), Run()))
    [1]
    """

    def __init__(
        self,
        services: Services,
        trace: Trace,
        *,
        policy: Policy | None = None,
        instructions: str = "",
        on_event: Listener | None = None,
    ) -> None:
        self.services, self.trace = services, trace
        self.policy = policy or Policy()
        self.searched_as: Mapping[str, tuple[str, ...]] = {}  # a follow-up: the searches fused for its question
        self.instructions = instructions
        self.on_event = on_event
        self.reranked = False
        self.planned: Planned | None = None  # the typed work last told: kept in the result if its run falls back

    def emit(self, event: str, data: Mapping[str, Any]) -> None:
        """Tell a listening client about progress."""
        if self.on_event is not None:
            self.on_event(event, dict(data))

    async def drive(
        self,
        strategy: Strategy,
        question: str,
        depths: Depths,
        fallback: Strategy | None = None,
        *,
        policy: Policy | None = None,
        searches: tuple[str, ...] = (),
    ) -> Drive:
        """`strategy`'s answer to `question`; with a `fallback`, a run that fails is recorded and the
        fallback answers in a fresh run (a streaming client is told to start its text over). `policy`, the
        abstention policy for the question (the driver's own if None); `searches`, what a follow-up read to
        stand alone is searched as wherever its question is, the rankings fused (none: the question)."""
        if policy is not None:
            self.policy = policy
        self.searched_as = {question: searches} if len(searches) > 1 else {}
        run = Run()
        try:
            output = await self.follow(strategy.flow(question, depths), run)
            name = strategy.name
        except (StrategyError, LLMError) as error:
            if fallback is None:
                raise
            reason = f"{type(error).__name__}: {error}; answered with plain RAG"
            self._note(strategy.name, reason)
            if run.streamed:  # part of the typed answer went out
                self.emit("restart", {"reason": reason})
            run = Run()  # cite only what the fallback answer was given
            output = await self.follow(fallback.flow(question, depths), run)
            name = fallback.name
        drove = self._drove(name, output, run)
        if drove.abstention is not None:
            return drove
        cited = await self._perform(Cite(drove.answer), run)
        return replace(drove, answer=cited.text, citations=cited.citations)

    def _drove(self, name: str, output: StrategyOutput, run: Run) -> Drive:
        """The drive's result: the plan and aspects shown are the answer's own, or, when the answer does not
        draw on them, the typed work last planned (aspects marked unused, their passage numbers dropped)."""
        if run.abstention is not None:
            output = StrategyOutput(answer="")
        if output.plan is not None or self.planned is None:
            plan, aspects, used = output.plan, output.aspects, run.abstention is None
        else:
            plan, used = self.planned.plan, False
            aspects = [a.model_copy(update={"used": False, "source_numbers": []}) for a in self.planned.aspects]
        return Drive(
            strategy=name,
            answer=output.answer,
            sources=run.book.sources,
            plan=plan,
            aspects=aspects,
            plan_used=used,
            abstention=run.abstention,
            reranked=self.reranked,
            streamed=run.streamed,
            unsourced=run.unsourced,
        )

    async def follow(self, flow: Flow[Any], run: Run) -> Any:
        """Perform `flow`'s steps until it returns; a step's error is thrown into the flow, which may live
        with it (an aspect dropped) or let it end the run."""
        sent: Any = None
        thrown: Exception | None = None
        try:
            while True:
                try:
                    step = flow.throw(thrown) if thrown is not None else flow.send(sent)
                except StopIteration as done:
                    return done.value
                sent, thrown = None, None
                try:
                    sent = await self._perform(step, run)
                except Exception as error:
                    thrown = error
        finally:
            flow.close()

    async def _perform(self, step: Step, run: Run) -> Any:
        """Bookkeeping steps at once; any other inside the span it names (Haystack's `_run_component`), which
        its outcome then describes: this is the one place a step's span is opened."""
        match step:
            case Number():
                return run.book.add(step.hits)
            case Together():
                return await self._together(step, run)
            case Planned():
                self.planned = step
                self.emit("plan", {"plan": step.plan.model_dump()})
                return None
            case Note():
                self._note(step.step, step.reason)
                return None
            case Tell():
                self.emit(step.event, step.data)
                return None
            case Expand() if not self.services.expand or not self.services.engine.generative:
                return []  # the question is searched alone: nothing is asked, no span
            case Weigh() | RewriteFollowUp() if not self.services.engine.generative:
                return None  # an extractive engine weighs and rewrites nothing, no span
            case (
                Plan()
                | Expand()
                | Weigh()
                | RewriteFollowUp()
                | ReadFollowUp()
                | Classify()
                | Mentioned()
                | Search()
                | Rank()
                | Write()
                | Check()
                | Cite()
            ):
                with telemetry.performing(step, self._by(step)) as span:
                    outcome = await self._work(step, run)
                    telemetry.performed(span, step, outcome)
                    return outcome
        raise TypeError(f"a flow yielded {step!r}, which is not a step (typedrag.steps)")

    async def perform(self, step: Step) -> Any:
        """One step outside a flow, in its span (the pipeline asks the classification and the unknown-name check this way)."""
        return await self._perform(step, Run())

    def _by(self, step: Step) -> str:
        """The name of what performs `step`, for its span."""
        services = self.services
        if isinstance(step, Rank):
            return services.reranker.name
        if isinstance(step, Search | Mentioned):
            return services.retriever.name if services.retriever is not None else ""
        if isinstance(step, Check) and services.checker is not None:
            return services.checker.name
        return services.engine.name

    async def _work(
        self,
        step: Plan[Any]
        | Expand
        | Weigh
        | RewriteFollowUp
        | ReadFollowUp
        | Classify
        | Mentioned
        | Search
        | Rank
        | Write
        | Check
        | Cite,
        run: Run,
    ) -> Any:
        match step:
            case Plan() | Weigh():
                return await self.plan(step.task, step.question)
            case RewriteFollowUp():
                rewritten = await self.plan(step.task, step.question)
                return Rewritten(rewritten.question, self.services.engine.name)
            case ReadFollowUp():  # the index is asked whether it leans on the conversation (its searches: a worker thread)
                return await asyncio.to_thread(
                    offline_standalone,
                    step.question,
                    list(step.dialogue),
                    self.services.retriever,
                    max_chars=step.max_chars,
                )
            case Expand():
                return await self._expand(step)
            case Search():
                return await self._search(step)
            case Rank():
                return await self._rank(step)
            case FillGap():  # before Write: it is one
                with self._step("write", step.task.role):
                    return await self.services.engine.write(step.task, self.trace)
            case Write():
                return await self._write(step, run)
            case Cite():
                return await self._cite(step, run)
            case Check():
                return await self._check(step)
            case Classify():
                if step.decided is not None:  # decided before (batch evaluation): told in the span, not asked again
                    return step.decided
                if self.services.classify is None:
                    raise TypeError("a Classify step, but this driver has no classifier")
                return await self.services.classify(step.question, step.forced_type, self.trace)
            case Mentioned():  # the retriever is asked for each name (in a worker thread)
                return await asyncio.to_thread(unmentioned_names, step.question, self.services.retriever)

    async def plan(self, task: PlanTask[PlanT], question: str) -> PlanT:
        """The engine's plan for `task` (the pipeline's rewrite of a follow-up asks here too, inside its own span)."""
        with self._step("plan", task.role):
            return await self.services.engine.plan(task, question, self.trace)

    @contextmanager
    def _step(self, kind: Literal["plan", "write"], role: str, engine: str | None = None) -> Iterator[None]:
        """Record an engine step (of the services' engine, unless another is named) in the trace, with its
        time and, if it failed or was stopped, why."""
        started, error = time.perf_counter(), None
        try:
            yield
        except asyncio.CancelledError:
            error = "cancelled: a step run together with it failed, or the client left"
            raise
        except Exception as raised:
            error = f"{type(raised).__name__}: {raised}"[:300]
            raise
        finally:
            latency = round((time.perf_counter() - started) * 1000, 1)
            name = engine or self.services.engine.name
            self._record().steps.append(EngineStep(step=kind, role=role, engine=name, latency_ms=latency, error=error))

    def _said(self, role: str, said: tuple[str, ...]) -> None:
        """What an engine says of how it wrote a step by its design, kept on that step in the trace (not a fallback)."""
        for engine_step in reversed(self._record().steps):
            if engine_step.step == "write" and engine_step.role == role:
                engine_step.notes.extend(said)
                return

    def _record(self) -> Record:
        return _branch.get() or Record(self.trace.fallbacks, self.trace.steps)

    def _note(self, step: str, reason: str) -> None:
        """Record a fallback: an event on the span it happened in at once, in the trace in the flow's order."""
        telemetry.fallback(step, reason)
        self._record().fallbacks.append(Fallback(step=step, reason=reason))

    async def _expand(self, step: Expand) -> list[str]:
        """The queries the engine's model adds to the question's search, each new; none, recorded, when the
        model fails."""
        try:
            expansion = await self.plan(step.task, step.question)
        except (PlanFailed, LLMError) as error:
            self._note(step.task.role, f"{type(error).__name__}: {error}; searched with the question alone")
            return []
        seen = {" ".join(step.question.split()).casefold()}
        queries = []
        for query in expansion.queries():
            key = " ".join(query.split()).casefold()
            if key and key not in seen:
                seen.add(key)
                queries.append(" ".join(query.split()))
        return queries

    async def _search(self, step: Search) -> list[list[ScoredPassage]]:
        retriever = self.services.retriever
        if retriever is None:
            raise TypeError("a flow searched, but this pipeline has no retriever")
        # Near-duplicates are set aside (typedrag.index.base.distinct). A model reads the passages that take their
        # places and picks from them; the extractive engine would quote them as noise (docs/lab/2026-12-03-near-duplicates.md).
        queries = list(step.queries)
        deeper = step.k + (DUPLICATE_ROOM if self.services.engine.generative else 0)
        asked = [self.searched_as.get(query, (query,)) for query in queries]  # a follow-up's searches, fused below
        flat = [query for group in asked for query in group]
        if len(flat) == 1:
            found = [await asyncio.to_thread(retriever.search, flat[0], deeper)]
        else:  # in one call, so the retriever can run them in parallel
            found = await asyncio.to_thread(retriever.search_many, flat, deeper)
        rankings = iter(found)
        fused = []
        for group in asked:
            ranked = [next(rankings) for _ in group]
            fused.append(ranked[0] if len(ranked) == 1 else fuse_searches(ranked, deeper))
        return [distinct(hits, step.k) for hits in fused]

    async def _rank(self, step: Rank) -> list[list[ScoredPassage]]:
        self.reranked = True
        reranker, hits = self.services.reranker, list(step.hits)
        k = len(hits) if step.k is None else step.k
        return await asyncio.to_thread(lambda: [reranker.rerank(query, hits, k) for query in step.queries])

    async def _write(self, step: Write, run: Run) -> Written:
        """The step written with the reader's instructions, through the abstention gate (typedrag.gate): before
        (its passages) and after (what the engine reports); a model's partial answer has its markers checked."""
        task = replace(step.task, instructions=self.instructions)
        if (
            step.final
            and self.services.knowledge == "labelled"
            and self.services.engine.generative
            and not isinstance(task, ClosedBook)
        ):
            task = replace(task, knowledge="labelled")
        judged = await self._support(task, step.final) if self.policy.unknown_names() is None else None
        cleared = before(self.policy, judged, numbered=bool(run.book.sources), combined=isinstance(task, Combined))
        if isinstance(cleared, Verdict):
            return self._declined(cleared, step, run)
        if cleared.filed_under is not None:  # its entry is the first candidate
            task = replace(task, filed_under=cleared.filed_under)

        def judge(written: Written) -> Verdict | None:
            return after(
                self.policy,
                cleared,
                written,
                engine=self.services.engine.name,
                final=step.final,
                numbered=bool(run.book.sources),
            )

        written = await self._written(step, task, run, judge)
        if step.final and written.unsourced is not None and written.text:
            written = await self._searched_gap(task, written, run)
        if step.final:
            run.unsourced = written.unsourced
        if written.not_in_sources is not None and not step.final:
            written = await self._checked(step, task, written)
        verdict = judge(written)
        if verdict is not None:
            return self._declined(verdict, step, run)
        if step.final and (stood := self.policy.stood_despite_names(written.best)) is not None:
            self._said(task.role, (stood,))
        for note in written.notes:
            self._note(task.role, note)
        if written.said:
            self._said(task.role, written.said)
        if not step.final and self.services.engine.generative and task.sources:
            written = await self._settled(step, written)
        return written

    async def _searched_gap(self, task: WriteTask, written: Written, run: Run) -> Written:
        """knowledge = "labelled": before what the model knows is shown as not from the documents, the documents are
        searched for it, with what it says the sources leave uncovered (`Unsourced.covers`) and with each of its
        sentences (an exact command or setting it names finds the page that has it), the rankings fused; passages no
        step of the run has read are given to the model for that part alone, as a labelled step again: what they say
        is added to the answer, cited, and only what they leave uncovered stays the model's own. Retrieval misses a
        part the documents hold more often than the documents lack it (docs/lab/2026-12-06-labelled-gaps.md). One
        search step, and one call when it finds anything."""
        unsourced = written.unsourced
        gap = " ".join((unsourced.covers or " ".join(unsourced.sentences)).split())
        queries = list(dict.fromkeys([gap, *unsourced.sentences]))
        found = await self._perform(Search(queries, 2 * GAP_K), run)
        unread = [[hit for hit in hits if not run.book.holds(hit.passage_id)] for hits in found]
        fresh = fuse_searches(unread, GAP_K) if len(unread) > 1 else unread[0][:GAP_K]
        if not fresh:
            self._said(
                task.role, (f"knowledge = labelled: the documents searched for {gap!r}: no passage not read already",)
            )
            return written
        sources = run.book.add(fresh)
        ask = FillGap(
            Grounded(
                role="answer:gap",
                prompt=GAP_ANSWER,
                question=task.question,
                sources=sources,
                extra={"gap": gap},
                instructions=task.instructions,
                knowledge="labelled",
            )
        )
        try:
            answered = await self._perform(ask, run)
        except LLMError as error:  # the answer stands as written: the model's part stays labelled
            self._note(
                ask.task.role, f"knowledge = labelled: the gap's step failed ({error}); the model's own part kept"
            )
            return written
        if not answered.text:  # they do not cover it either: the model's own part stands, as it first wrote it
            self._said(ask.task.role, (f"the {len(fresh)} passages found for {gap!r} do not cover it",))
            return written
        settled = await asyncio.to_thread(settle, answered.text, sources)
        for note in settled.notes("the gap's answer"):
            self._note(ask.task.role, note)
        if self.on_event is not None and run.streamed:  # the answer streamed so far goes on
            stream = AnswerStream(self.emit, run.book.sources)
            stream(" " + settled.text)
            stream.close()
            run.streamed += stream.sent
        kept = len(answered.unsourced.sentences) if answered.unsourced is not None else 0
        self._said(
            ask.task.role,
            (
                f"the documents cover part of what the model would have added ({gap!r}): answered from "
                f"{len(fresh)} passages not read before; {len(unsourced.sentences)} sentences of its own -> {kept}",
            ),
        )
        return replace(written, text=f"{written.text} {settled.text}", unsourced=answered.unsourced)

    async def _support(self, task: WriteTask, final: bool) -> Support | None:
        """The step's passages judged against the policy's relevance bar (None: no bar), on what the answer can
        quote: an extractive engine may say it is fewer (`quotes_from`)."""
        bar = self.policy.bar(final=final)
        if bar is None:
            return None
        quoted = self.services.engine.quotes_from(task)
        texts, top = [source.text for source in quoted], quoted[0].section if quoted else ""
        return await asyncio.to_thread(support, task.question, texts, bar=bar, top_section=top)

    async def _checked(self, step: Write, task: WriteTask, written: Written) -> Written:
        """A model's "not in the sources" for a partial answer (an aspect, the overview), checked by the
        checker's reader over the step's own passages: when it finds a sentence that answers the question
        above its bar, the step is answered with the sentences it quotes, and the override is recorded; else
        the model's word stands. Small models say "not in the sources" of passages that do answer."""
        checker = self.services.checker
        if checker is None or not task.sources:
            return written
        grounded = Grounded(role=f"check:{task.role}", prompt=task.prompt, question=task.question, sources=task.sources)
        checked = await self._perform(Check(grounded), Run())
        if not checked.supported:
            return written
        where = f"aspect:{step.aspect}" if step.aspect else task.role
        chance = f" (chance {checked.best:.2f})" if checked.best is not None else ""
        self._note(
            where,
            f"the model said its passages do not answer it ({written.not_in_sources}), but the reader finds a "
            f"sentence of them that does{chance}: answered with the sentences {checker.name} quotes from them",
        )
        return replace(checked, notes=())

    def _declined(self, verdict: Verdict, step: Write, run: Run) -> Written:
        if step.final:
            run.abstention = verdict.abstention
        return Written("", supported=False, declined=verdict.dropped)

    async def _written(self, step: Write, task: Any, run: Run, judge: Callable[[Written], Verdict | None]) -> Written:
        """The engine's text; the final step's streams to a listening client (once the policy has judged it,
        `judge`, when it may still be turned down)."""
        engine = self.services.engine
        if not step.final or self.on_event is None:
            with self._step("write", task.role):
                return await engine.write(task, self.trace)
        stream = AnswerStream(self.emit, run.book.sources)
        held: list[str] = []
        try:
            sink = held.append if self.policy.holds_back else stream
            with self._step("write", task.role):
                written = await engine.write(task, self.trace, on_text=sink)
        finally:
            run.streamed += stream.sent
        if held and judge(written) is None:
            for piece in held:
                stream(piece)
            run.streamed += stream.sent
        stream.close()
        return written

    async def _check(self, step: Check) -> Written:
        """The checker's reading of a step's passages, recorded as an engine step of the checker's."""
        checker = self.services.checker
        if checker is None:
            raise TypeError("a Check step, but this pipeline has no checker")
        with self._step("write", step.task.role, engine=checker.name):
            return await checker.write(step.task, self.trace)

    async def _cite(self, step: Cite, run: Run) -> Cited:
        """The answer with a generative engine's citation markers settled against the run's sources (an
        extractive engine quotes passages with their own numbers), the repairs recorded, and its citations."""
        sources, answer, notes = run.book.sources, step.answer, list[str]()
        if sources and self.services.engine.generative:
            settled = await asyncio.to_thread(settle, answer, sources)
            notes = settled.notes("the answer")
            for note in notes:
                self._note("citations", note)
            answer = settled.text
        return Cited(answer, extract_citations(answer, sources), notes)

    async def _settled(self, step: Write, written: Written) -> Written:
        """A model's partial answer with only markers of its passages, attributed if it cited none; declined
        when no passage supports it."""
        sources = step.task.sources
        settled = await asyncio.to_thread(settle, written.text, sources)
        where, what = (
            (f"aspect:{step.aspect}", f"aspect {step.aspect!r}") if step.aspect else (step.task.role, step.task.role)
        )
        for note in settled.notes(what):
            self._note(where, note)
        declined = None if settled.supported else "no sentence of its answer is supported by its passages"
        return replace(written, text=settled.text, declined=declined)

    async def _together(self, step: Together, run: Run) -> tuple[Any, ...]:
        records = [Record([], []) for _ in step.flows]

        async def branch(flow: Flow[Any], record: Record) -> Any:
            _branch.set(record)  # in this task's own context
            return await self.follow(flow, run)

        tasks = [asyncio.ensure_future(branch(flow, record)) for flow, record in zip(step.flows, records)]
        try:
            return tuple(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks)
            for task in tasks:  # taken, so none is logged as lost: only the first error is news
                if not task.cancelled():
                    task.exception()
            raise
        finally:
            parent = self._record()
            for record in records:
                parent.fallbacks.extend(record.fallbacks)
                parent.steps.extend(record.steps)
