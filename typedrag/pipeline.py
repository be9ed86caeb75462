"""The Typed-RAG pipeline, top to bottom as in the paper's Figure 2:

question -> type (classifier, or forced) -> the strategy routed to that type -> answer + trace.

`Pipeline._answer` is four calls: read the question (a follow-up read to stand alone, the conversation's
instructions), route it, drive its strategy (typedrag.driver performs the strategy's flow of steps),
assemble the result. Routes are data: a mapping from type label to strategy, plus the fallback (plain RAG) for types
with no route, unsure classifications and strategies that fail. The two baselines run through the
same object so every method yields the same result shape: `llm` (question -> answer) and `rag`
(question -> top-k passages -> answer).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from typedrag import telemetry
from typedrag.abstain import UNMENTIONED, Policy
from typedrag.classify.base import TypeClassifier, TypePrediction, needs_fallback
from typedrag.driver import Drive, Driver, Listener, Run, Services
from typedrag.engines.base import Engine, Trace
from typedrag.engines.offline import OfflineEngine
from typedrag.errors import QuestionError
from typedrag.followup import Standalone
from typedrag.history import Turn, clean_history, dialogue_of, instructions_of
from typedrag.index.base import Retriever, adapt
from typedrag.links import viewer_link
from typedrag.prompts import PROMPT_VERSION
from typedrag.reading import reading
from typedrag.questions import DEFAULT_MAX_CHARS, clean_question
from typedrag.rerank import EmbeddingReranker, Reranker
from typedrag.result import (
    KNOWLEDGE,
    Abstention,
    AnswerResult,
    Citation,
    Engines,
    Knowledge,
    Rewrite,
    Source,
    TypeDecision,
    Usage,
)
from typedrag.steps import Classify, Depths, Mentioned, Strategy
from typedrag.strategies import ClosedBookStrategy, EvidenceStrategy, default_routes


class Method(StrEnum):
    """How to answer: Typed-RAG, or one of the paper's two baselines."""

    LLM = "llm"  # LLM-only baseline
    RAG = "rag"  # plain RAG baseline
    TYPED = "typed"  # Typed-RAG


@dataclass
class PipelineSettings:
    """Retrieval depths and question limits; the defaults are the ones the benchmarks were measured with."""

    top_k: int = Depths.top_k
    aspect_k: int = Depths.aspect_k
    candidates_k: int = Depths.candidates_k
    max_question_chars: int = DEFAULT_MAX_CHARS
    # For data known to be non-factoid (Wiki-NFQA): route every question to the likeliest routed
    # type, as the paper's labelling did, instead of sending FACTOID/NOT-A-QUESTION or
    # low-confidence questions to plain RAG.
    assume_non_factoid: bool = False
    # Offline, say "the documents do not answer" when no passage sentence comes near the question
    # (typedrag.abstain's relevance bar). An LLM's own "not in the sources" is always honoured.
    abstain_offline: bool = True
    # With an LLM, a model's "not in the sources" for an aspect or the overview is checked against what the
    # offline reader finds in that step's passages before the step is dropped (the override recorded).
    check_not_in_sources: bool = True
    # With an LLM, the question's own search is widened by queries its model writes (a rewrite and a
    # hypothetical answer passage, fused by reciprocal rank): one more call a plain-RAG answer or overview, measured
    # to help with a capable model on two manuals (docs/lab/2026-12-03-demo-vectors.md). Offline nothing is asked.
    expand_queries: bool = True
    # What an answer may hold: "documents", only what the documents support (cited); "labelled", also, where they
    # do not cover the question or a part of it, what the model knows itself, kept apart and labelled
    # (`AnswerResult.unsourced`). Offline there is nothing to add: the offline engine knows nothing of its own.
    knowledge: Knowledge = "documents"
    # The collection this pipeline answers in (`serve --data`): each source then links to its original
    # (typedrag.links); None: no link.
    collection: str | None = None

    @property
    def depths(self) -> Depths:
        """The retrieval depths these settings ask for, built once per answer (they may be changed between answers)."""
        return Depths(self.top_k, self.aspect_k, self.candidates_k)


@dataclass(frozen=True)
class Asked:
    """A question read for answering: as asked, as it stands alone (with how it was read), the reader's
    instructions, and the trace and listener of its answer."""

    question: str  # as asked (cleaned)
    standalone: Standalone  # as classified, searched and answered
    rewrite: Rewrite | None  # how a follow-up was read (None without earlier questions)
    conversation: bool  # it came with history
    instructions: str
    trace: Trace
    on_event: Listener | None
    driver: Driver  # performs the answer's steps, from reading the question to citing the answer
    knowledge: Knowledge = "documents"

    def emit(self, event: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event(event, data)


@dataclass(frozen=True)
class Route:
    """Where a question goes: the strategy, the one it falls back to should it fail (None: none), the method,
    and the type decision it was routed on (None for the baselines)."""

    method: Method
    strategy: Strategy
    fallback: Strategy | None = None
    decision: TypePrediction | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)


class Pipeline:
    """Answers questions with Typed-RAG or a baseline, with the full trace.

    >>> from typedrag import OfflineEngine, Pipeline
    >>> from typedrag.testing import ListRetriever
    >>> pipeline = Pipeline(OfflineEngine(), ListRetriever(["Cats purr when content, and also when hurt."]))
    >>> pipeline.routes["REASON"].name
    'reason'
    """

    def __init__(
        self,
        engine: Engine,
        retriever: Retriever | None,
        classifier: TypeClassifier | None = None,  # None: the shipped NF-CATS classifier, loaded when first needed
        reranker: Reranker | None = None,
        settings: PipelineSettings | None = None,
        routes: Mapping[str, Strategy] | None = None,
        fallback: Strategy | None = None,
    ) -> None:
        self.engine = engine
        self._offline: OfflineEngine | None = None
        self.retriever = adapt(retriever)  # a user's retriever gets the optional members' defaults
        self.classifier = classifier
        self.reranker = reranker or EmbeddingReranker()
        self.settings = settings or PipelineSettings()
        self.routes: dict[str, Strategy] = {
            str(k): v for k, v in (routes if routes is not None else default_routes()).items()
        }
        self.fallback = fallback or EvidenceStrategy("rag")
        self.baselines: dict[Method, Strategy] = {Method.LLM: ClosedBookStrategy(), Method.RAG: EvidenceStrategy("rag")}
        for label, strategy in [*self.routes.items(), ("fallback", self.fallback)]:
            if not callable(getattr(strategy, "flow", None)):
                raise TypeError(
                    f"route {label!r}: a strategy is a `name` and a `flow(question, depths)` that yields steps "
                    "(typedrag.steps; docs/architecture.md), and this one has no flow"
                )

    async def answer(
        self,
        question: str,
        method: Method | str = Method.TYPED,
        forced_type: str | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        decision: TypePrediction | None = None,
        history: Iterable[Turn | Mapping[str, Any]] | None = None,
        knowledge: Knowledge | None = None,
    ) -> AnswerResult:
        """Answer `question`; `on_event(name, data)` hears progress: type, plan, aspect (each), then the
        final step's text as `token` events (with a `citation` event per finished cited sentence; a
        `restart` event if a failing strategy hands over to plain RAG mid-answer), then `unsourced` (with
        knowledge = "labelled", what the model added from its own knowledge), then sources.

        `knowledge` ("documents" or "labelled") overrides the settings' for this answer.

        `forced_type` skips the classifier (any route label, e.g. "comparison"); `decision` is a type
        already decided by `decide_type` (batch evaluation decides once per question).

        `history` is the conversation before `question`: `{"role": "user" | "assistant" | "system",
        "content": ...}` turns. A follow-up is first read to stand alone (a `rewrite` event says how), then
        classified and answered as usual; system turns are instructions for the writing steps. When the
        passages do not answer, the result says so (`abstained`) and keeps them as the nearest passages.
        """
        if knowledge is not None and knowledge not in KNOWLEDGE:
            raise QuestionError(f"unknown knowledge setting {knowledge!r}; choose one of: {', '.join(KNOWLEDGE)}")
        with telemetry.answering(question, str(method)) as span:
            result = await self._answer(
                question, method, forced_type, on_event, decision, history, knowledge or self.settings.knowledge
            )
            telemetry.answered(span, result)
            return result

    async def _answer(
        self,
        question: str,
        method: Method | str,
        forced_type: str | None,
        on_event: Listener | None,
        decision: TypePrediction | None,
        history: Iterable[Turn | Mapping[str, Any]] | None,
        knowledge: Knowledge = "documents",
    ) -> AnswerResult:
        """Read the question, route it, drive its strategy, assemble the result."""
        started = time.perf_counter()
        asked = await self._read(question, history, on_event, knowledge)
        route = await self._route(asked, Method(method), forced_type, decision, started)
        drove = await self._drive(asked, route)
        return await self._assemble(asked, route, drove, started)

    async def _read(
        self,
        question: str,
        history: Iterable[Turn | Mapping[str, Any]] | None,
        on_event: Listener | None,
        knowledge: Knowledge = "documents",
    ) -> Asked:
        """The question checked, a follow-up read to stand alone (said in a `rewrite` event), and the
        conversation's instructions (recorded as not followed by an engine that cannot), as is knowledge =
        "labelled" offline (the offline engine has no knowledge of its own to add)."""
        question = clean_question(question, self.settings.max_question_chars)
        turns = clean_history(history)
        trace = Trace()
        services = Services(
            self.engine,
            self.retriever,
            self.reranker,
            checker=self._checker(),
            expand=self.settings.expand_queries,
            knowledge=knowledge,
            classify=self.decide_type,
        )
        driver = Driver(services, trace, instructions=instructions_of(turns), on_event=on_event)
        standalone, rewrite = await driver.follow(
            reading(question, dialogue_of(turns), self.settings.max_question_chars), Run()
        )
        asked = Asked(
            question, standalone, rewrite, bool(turns), driver.instructions, trace, on_event, driver, knowledge
        )
        if rewrite is not None:
            asked.emit("rewrite", question=question, standalone_question=standalone.question, **rewrite.model_dump())
        if asked.instructions and not self.engine.generative:
            trace.fallback(
                "instructions",
                "the offline engine quotes passages and cannot follow the conversation's instructions; configure an LLM (--llm) for that",
            )
        if knowledge == "labelled" and not self.engine.generative:
            trace.fallback(
                "knowledge",
                'knowledge = "labelled" adds nothing here: the offline engine quotes the documents and has no knowledge of its own; configure an LLM (--llm) for that',
            )
        return asked

    async def _route(
        self, asked: Asked, method: Method, forced_type: str | None, decision: TypePrediction | None, started: float
    ) -> Route:
        """A baseline, or the strategy of the question's type (classified, told in a `type` event); plain RAG,
        recorded, for a type with no route or a classification below its threshold."""
        if method is not Method.TYPED:
            return Route(method, self.baselines[method])
        decision = await asked.driver.perform(Classify(asked.standalone.question, forced_type, decided=decision))
        timings = {"classify": _ms(started)}
        asked.emit("type", **_decided(decision).model_dump())
        strategy = self.routes.get(decision.label)
        if strategy is None:
            asked.trace.fallback(
                "route", f"classified {decision.label}: no typed plan applies, answered with plain RAG"
            )
            return Route(method, self.fallback, None, decision, timings)
        if decision.source != "forced" and not self.settings.assume_non_factoid and needs_fallback(decision):
            asked.trace.fallback(
                "route", f"type {decision.label} confidence {decision.confidence:.2f} below threshold: plain RAG"
            )
            return Route(method, self.fallback, None, decision, timings)
        return Route(method, strategy, self.fallback, decision, timings)

    async def _drive(self, asked: Asked, route: Route) -> Drive:
        """The routed strategy driven by the answer's driver, with its depths, the abstention policy for the
        question and what a follow-up is searched as."""
        return await asked.driver.drive(
            route.strategy,
            asked.standalone.question,
            self.settings.depths,
            route.fallback,
            policy=await self._policy(asked, route),
            searches=asked.standalone.searches,
        )

    def _checker(self) -> Engine | None:
        """The extractive engine that checks a model's "not in the sources" (None offline, or when the
        settings say not to check); one per pipeline, its reader loaded when first needed."""
        if not self.engine.generative or not self.settings.check_not_in_sources:
            return None
        if self._offline is None:
            self._offline = OfflineEngine()
        return self._offline

    async def _policy(self, asked: Asked, route: Route) -> Policy:
        """Offline, passages are judged before an answer quotes them (unless the settings say not to), and a
        question about names no passage holds is turned down (the driver asks the retriever, `Mentioned`); an
        LLM's own "not in the sources" is always honoured."""
        looked_for = asked.standalone.question
        if self.settings.abstain_offline and not self.engine.generative and route.method is not Method.LLM:
            unmentioned = await asked.driver.perform(
                Mentioned(asked.question)
            )  # the asker's own words, not what a rewrite added
            return Policy.offline(looked_for, unmentioned)
        return Policy(looked_for)

    async def _assemble(self, asked: Asked, route: Route, drove: Drive, started: float) -> AnswerResult:
        """The result: the answer with its citations settled, or what an abstention says, and the whole trace."""
        decision, sources, abstention = route.decision, drove.sources, drove.abstention
        if abstention is not None:
            answer, citations = abstention_text(abstention, sources), list[Citation]()
            asked.emit("abstained", **abstention.model_dump())
            if drove.streamed:  # a client heard text that turned out not to answer: it starts over
                asked.emit("restart", reason=f"not an answer: {abstention.reason}")
            asked.emit("token", text=answer)
        else:
            answer, citations = drove.answer, drove.citations
        if drove.unsourced is not None:  # after the answer's own text, apart from it
            asked.emit("unsourced", **drove.unsourced.model_dump(), text=drove.unsourced.text)
        timings = {**route.timings_ms, "total": _ms(started)}
        if self.settings.collection is not None:
            sources = [
                s.model_copy(update={"link": viewer_link(self.settings.collection, s.passage_id)}) for s in sources
            ]
        asked.emit("sources", count=len(sources))
        return AnswerResult(
            question=asked.question,
            method=route.method.value,
            answer=answer,
            standalone_question=asked.standalone.question if asked.conversation else None,
            searched=list(asked.standalone.searches) if route.method is not Method.LLM else [],
            rewrite=asked.rewrite,
            abstained=abstention is not None,
            abstention=abstention,
            instructions=asked.instructions or None,
            strategy=drove.strategy,
            type=_type_decision(decision),
            plan=drove.plan.model_dump() if drove.plan is not None else None,
            plan_used=drove.plan_used,
            aspects=drove.aspects,
            sources=sources,
            citations=citations,
            fallbacks=asked.trace.fallbacks,
            llm_calls=asked.trace.calls,
            usage=Usage.of(asked.trace.calls),
            steps=asked.trace.steps,
            timings_ms=timings,
            engines=Engines(
                generator=self.engine.name,
                retriever=self.retriever.name
                if self.retriever is not None and route.method is not Method.LLM
                else None,
                classifier=decision.source if decision is not None else None,
                reranker=self.reranker.name if drove.reranked else None,
            ),
            prompt_version=PROMPT_VERSION,
            knowledge=asked.knowledge,
            unsourced=drove.unsourced,
            collection=self.settings.collection,
        )

    def route_label(self, name: str) -> str:
        """The route a user-given type name means ("debate", "Evidence based", "my-type"); QuestionError if none."""
        key = name.strip().upper().replace("_", "-").replace(" ", "-")
        for label in self.routes:
            if label.upper() == key:
                return label
        choices = ", ".join(label.lower() for label in self.routes)
        raise QuestionError(f"unknown question type {name!r}; choose one of: {choices}")

    async def decide_type(
        self, question: str, forced_type: str | None = None, trace: Trace | None = None
    ) -> TypePrediction:
        """The type Typed-RAG routes on: forced, or the classifier's (restricted to routed types if set)."""
        if forced_type is not None:
            label = self.route_label(str(forced_type))
            return TypePrediction(label=label, confidence=1.0, probabilities={label: 1.0}, source="forced")
        if self.classifier is None:  # the shipped classifier, loaded only when a question needs typing
            from typedrag.classify.shipped import load_default_classifier

            self.classifier = load_default_classifier()
        prediction = await self.classifier.aclassify(question, trace)
        if self.settings.assume_non_factoid:
            prediction = self._most_likely_routed(prediction)
        return prediction

    def _most_likely_routed(self, prediction: TypePrediction) -> TypePrediction:
        """Renormalise over the routed types; a label without probabilities becomes the first route."""
        weights = {label: prediction.probabilities.get(label, 0.0) for label in self.routes}
        total = sum(weights.values())
        source = prediction.source + " (non-factoid only)"
        if total <= 0:
            first = next(iter(self.routes))
            return TypePrediction(first, 1.0, {first: 1.0}, source)
        probabilities = {label: w / total for label, w in weights.items()}
        label = max(probabilities, key=probabilities.get)
        return TypePrediction(label, probabilities[label], probabilities, source)


def abstention_text(abstention: Abstention, sources: list[Source]) -> str:
    """What an abstaining answer says: that the documents do not answer, what was looked for, and that the
    passages listed are the nearest ones, not an answer."""
    nearest = (
        " The passages below are the nearest ones found, not an answer." if sources else " No passage came near it."
    )
    if abstention.by == UNMENTIONED:  # the reason names what the documents lack
        return f"The documents do not answer this: {abstention.reason}.{nearest}"
    return f"The documents do not answer this. I looked for: \u201c{abstention.looked_for}\u201d.{nearest}"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _type_decision(decision: TypePrediction | None) -> TypeDecision | None:
    return _decided(decision) if decision is not None else None


def _decided(decision: TypePrediction) -> TypeDecision:
    return TypeDecision(
        type=str(decision.label),
        confidence=round(decision.confidence, 4),
        source=decision.source,
        probabilities={str(k): round(v, 4) for k, v in decision.probabilities.items()},
    )
