"""The Typed-RAG pipeline, top to bottom as in the paper's Figure 2:

question -> type (classifier, or forced) -> the strategy routed to that type -> answer + trace.

Routes are data: a mapping from type label to strategy, plus the fallback (plain RAG) for types
with no route, unsure classifications and strategies that fail. The two baselines run through the
same object so every method yields the same result shape: `llm` (question -> answer) and `rag`
(question -> top-k passages -> answer).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from typedrag import telemetry
from typedrag.abstain import NotInSources, ReaderUnsupported, Unsupported, bar_for, readable
from typedrag.attribution import settle
from typedrag.classify.base import TypeClassifier, TypePrediction, needs_fallback
from typedrag.engines.base import Engine, PlanTask, Trace
from typedrag.errors import LLMError, PlanFailed, QuestionError, StrategyError
from typedrag.followup import FusingRetriever, Standalone, StandaloneQuestion, conversation_text, offline_standalone
from typedrag.history import Turn, clean_history, dialogue_of, instructions_of
from typedrag.index.base import Retriever
from typedrag.prompts import PROMPT_VERSION, REWRITE_QUESTION
from typedrag.questions import DEFAULT_MAX_CHARS, clean_question
from typedrag.rerank import EmbeddingReranker, Reranker
from typedrag.result import Abstention, AnswerResult, Citation, Engines, Rewrite, Source, TypeDecision, Usage, extract_citations
from typedrag.strategies import ClosedBookStrategy, EvidenceStrategy, Strategy, default_routes
from typedrag.strategies.base import SourceBook, StrategyContext, StrategyOutput


class Method(StrEnum):
    """How to answer: Typed-RAG, or one of the paper's two baselines."""

    LLM = "llm"  # LLM-only baseline
    RAG = "rag"  # plain RAG baseline
    TYPED = "typed"  # Typed-RAG


@dataclass
class PipelineSettings:
    """Retrieval depths and question limits; the defaults are the ones the benchmarks were measured with."""

    top_k: int = 5
    aspect_k: int = 3
    candidates_k: int = 12
    max_question_chars: int = DEFAULT_MAX_CHARS
    # For data known to be non-factoid (Wiki-NFQA): route every question to the likeliest routed
    # type, as the paper's labelling did, instead of sending FACTOID/NOT-A-QUESTION or
    # low-confidence questions to plain RAG.
    assume_non_factoid: bool = False
    # Offline, say "the documents do not answer" when no passage sentence comes near the question
    # (typedrag.abstain's relevance bar). An LLM's own "not in the sources" is always honoured.
    abstain_offline: bool = True


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
        self.retriever = retriever
        self.classifier = classifier
        self.reranker = reranker or EmbeddingReranker()
        self.settings = settings or PipelineSettings()
        self.routes: dict[str, Strategy] = {str(k): v for k, v in (routes if routes is not None else default_routes()).items()}
        self.fallback = fallback or EvidenceStrategy("rag")
        self.baselines: dict[Method, Strategy] = {Method.LLM: ClosedBookStrategy(), Method.RAG: EvidenceStrategy("rag")}

    async def answer(
        self,
        question: str,
        method: Method | str = Method.TYPED,
        forced_type: str | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        decision: TypePrediction | None = None,
        history: Iterable[Turn | Mapping[str, Any]] | None = None,
    ) -> AnswerResult:
        """Answer `question`; `on_event(name, data)` hears progress: type, plan, aspect (each), then the
        final step's text as `token` events (with a `citation` event per finished cited sentence; a
        `restart` event if a failing strategy hands over to plain RAG mid-answer), then sources.

        `forced_type` skips the classifier (any route label, e.g. "comparison"); `decision` is a type
        already decided by `decide_type` (batch evaluation decides once per question).

        `history` is the conversation before `question`: `{"role": "user" | "assistant" | "system",
        "content": ...}` turns. A follow-up is first read to stand alone (a `rewrite` event says how), then
        classified and answered as usual; system turns are instructions for the writing steps. When the
        passages do not answer, the result says so (`abstained`) and keeps them as the nearest passages.
        """
        with telemetry.answering(question, str(method)) as span:
            result = await self._answer(question, method, forced_type, on_event, decision, history)
            telemetry.answered(span, result)
            return result

    async def _answer(
        self,
        question: str,
        method: Method | str,
        forced_type: str | None,
        on_event: Callable[[str, dict[str, Any]], None] | None,
        decision: TypePrediction | None,
        history: Iterable[Turn | Mapping[str, Any]] | None,
    ) -> AnswerResult:
        started = time.perf_counter()
        question = clean_question(question, self.settings.max_question_chars)
        turns = clean_history(history)
        method = Method(method)
        trace = Trace()
        instructions = instructions_of(turns)
        standalone, rewrite = await self._standalone(question, dialogue_of(turns), trace)
        asked = standalone.question
        ctx = self._context(trace, on_event, standalone)
        ctx.instructions = instructions
        if rewrite is not None:
            ctx.emit("rewrite", question=question, standalone_question=asked, **rewrite.model_dump())
        if instructions and not self.engine.generative:
            trace.fallback("instructions", "the offline engine quotes passages and cannot follow the conversation's instructions; configure an LLM (--llm) for that")
        timings: dict[str, float] = {}
        if method is Method.TYPED:
            with telemetry.step("classify") as span:
                decision = decision or await self.decide_type(asked, forced_type, ctx.trace)
                telemetry.classified(span, decision)
            timings["classify"] = _ms(started)
            ctx.emit("type", **_type_decision(decision).model_dump())
        else:
            decision = None  # baselines do not route by type
        if self.settings.abstain_offline and not self.engine.generative and method is not Method.LLM and readable(asked):
            ctx.relevance_bar = bar_for(decision.label if decision is not None else None)
        if method is Method.TYPED:
            strategy_name, output = await self._run_typed(asked, decision, ctx)
        else:
            strategy_name, output = method.value, await self._run(self.baselines[method], asked, ctx)
        abstention = output.abstention
        sources = ctx.book.sources
        answer = output.answer
        if abstention is not None:
            telemetry.abstained(abstention.by, str(decision.label) if decision is not None else None)
            answer, citations = abstention_text(abstention, sources), []
            ctx.emit("abstained", **abstention.model_dump())
            if not ctx.streamed:
                ctx.emit("token", text=answer)
        else:
            answer, citations = await self._cite(answer, sources, ctx.trace)
        timings["total"] = _ms(started)
        ctx.emit("sources", count=len(sources))
        typed = output if output.plan is not None or ctx.attempt is None else ctx.attempt
        return AnswerResult(
            question=question,
            method=method.value,
            answer=answer,
            standalone_question=asked if turns else None,
            searched=list(standalone.searches) if method is not Method.LLM else [],
            rewrite=rewrite,
            abstained=abstention is not None,
            abstention=abstention,
            instructions=instructions or None,
            strategy=strategy_name,
            type=_type_decision(decision),
            plan=typed.plan.model_dump() if typed.plan is not None else None,
            plan_used=typed is output and abstention is None,
            # unused aspects keep their answers; their passage numbers belonged to sources the fallback dropped
            aspects=typed.aspects if typed is output else [a.model_copy(update={"used": False, "source_numbers": []}) for a in typed.aspects],
            sources=sources,
            citations=citations,
            fallbacks=ctx.trace.fallbacks,
            llm_calls=ctx.trace.calls,
            usage=Usage.of(ctx.trace.calls),
            timings_ms=timings,
            engines=Engines(
                generator=self.engine.name,
                retriever=self.retriever.name if self.retriever is not None and method is not Method.LLM else None,
                classifier=decision.source if decision is not None else None,
                reranker=self.reranker.name if ctx.reranked else None,
            ),
            prompt_version=PROMPT_VERSION,
        )

    async def _cite(self, answer: str, sources: list[Source], trace: Trace) -> tuple[str, list[Citation]]:
        """The answer with its citation markers settled against its sources (a generative engine's), and its citations."""
        with telemetry.citing() as span:
            notes: list[str] = []
            if sources and self.engine.generative:  # an extractive engine quotes passages with their own numbers
                settled = await asyncio.to_thread(settle, answer, sources)
                notes = settled.notes("the answer")
                for note in notes:
                    trace.fallback("citations", note)
                answer = settled.text
            citations = extract_citations(answer, sources)
            telemetry.cited(span, citations, len(notes))
            return answer, citations

    async def _standalone(self, question: str, dialogue: list[Turn], trace: Trace) -> tuple[Standalone, Rewrite | None]:
        """The question read alone, and how (None without earlier questions), inside the rewrite step's span."""
        if not any(turn.role == "user" for turn in dialogue):
            return Standalone(question=question, searches=(question,)), None
        with telemetry.rewriting(len(dialogue)) as span:
            standalone, rewrite = await self._rewrite(question, dialogue, trace)
            telemetry.rewritten(span, standalone.question, by=rewrite.by, changed=rewrite.rewritten)
            return standalone, rewrite

    async def _rewrite(self, question: str, dialogue: list[Turn], trace: Trace) -> tuple[Standalone, Rewrite]:
        """The follow-up rewritten by the LLM engine's model, or offline from the conversation's own words
        (also when the model's rewrite fails)."""
        if self.engine.generative:
            task = PlanTask(role="rewrite", prompt=REWRITE_QUESTION.filled(conversation=conversation_text(dialogue)), schema=StandaloneQuestion)
            try:
                rewritten = (await self.engine.plan(task, question, trace)).question
            except (PlanFailed, LLMError) as error:
                trace.fallback("rewrite", f"{type(error).__name__}: {error}; the follow-up was read offline from the conversation's own words")
            else:
                changed = rewritten.casefold() != question.casefold()
                standalone = Standalone(question=rewritten if changed else question, searches=(rewritten if changed else question,), rewritten=changed)
                return standalone, Rewrite(by=self.engine.name, rewritten=changed, history_turns=len(dialogue))
        # offline: the index is asked whether the follow-up leans on the conversation (searches: a worker thread)
        standalone = await asyncio.to_thread(
            offline_standalone, question, dialogue, self.retriever, max_chars=self.settings.max_question_chars
        )
        return standalone, Rewrite(by="offline", rewritten=standalone.rewritten, carried=list(standalone.carried), history_turns=len(dialogue))

    async def _run(self, strategy: Strategy, question: str, ctx: StrategyContext) -> StrategyOutput:
        """The strategy's output; when its passages do not answer (the model says so, or offline they fall
        below the relevance bar) an empty one that says why, its passages kept as the nearest ones."""
        try:
            return await strategy.run(question, ctx)
        except NotInSources as said:
            why = f"the model said its sources do not answer: {said.missing}"
            return StrategyOutput(answer="", abstention=Abstention(looked_for=question, reason=why, by=self.engine.name))
        except Unsupported as below:
            judged = below.judged
            why = "no passage found" if not ctx.book.sources else "no sentence of the passages comes close enough to the question to answer it"
            abstention = Abstention(looked_for=question, reason=why, by="relevance bar", score=judged.score, bar=judged.bar)
            return StrategyOutput(answer="", abstention=abstention)
        except ReaderUnsupported as unread:
            why = "the reader model reads no sentence of the passages as an answer to the question"
            return StrategyOutput(answer="", abstention=Abstention(looked_for=question, reason=why, by="reader", score=unread.best, bar=unread.bar))

    def _context(
        self, trace: Trace, on_event: Callable[[str, dict[str, Any]], None] | None, standalone: Standalone | None = None
    ) -> StrategyContext:
        s = self.settings
        retriever = self.retriever
        if retriever is not None and standalone is not None and len(standalone.searches) > 1:
            retriever = FusingRetriever(retriever, {standalone.question: standalone.searches})
        return StrategyContext(
            engine=self.engine,
            retriever=retriever,  # type: ignore[arg-type]  # None only for the LLM-only method
            reranker=self.reranker,
            trace=trace,
            top_k=s.top_k,
            aspect_k=s.aspect_k,
            candidates_k=s.candidates_k,
            on_event=on_event,
        )

    def route_label(self, name: str) -> str:
        """The route a user-given type name means ("debate", "Evidence based", "my-type"); QuestionError if none."""
        key = name.strip().upper().replace("_", "-").replace(" ", "-")
        for label in self.routes:
            if label.upper() == key:
                return label
        choices = ", ".join(label.lower() for label in self.routes)
        raise QuestionError(f"unknown question type {name!r}; choose one of: {choices}")

    async def decide_type(self, question: str, forced_type: str | None = None, trace: Trace | None = None) -> TypePrediction:
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

    async def _run_typed(self, question: str, decision: TypePrediction, ctx: StrategyContext) -> tuple[str, StrategyOutput]:
        label = decision.label
        strategy = self.routes.get(label)
        if strategy is None:
            ctx.trace.fallback("route", f"classified {label}: no typed plan applies, answered with plain RAG")
            return self.fallback.name, await self._run(self.fallback, question, ctx)
        if decision.source != "forced" and not self.settings.assume_non_factoid and needs_fallback(decision):
            ctx.trace.fallback("route", f"type {label} confidence {decision.confidence:.2f} below threshold: plain RAG")
            return self.fallback.name, await self._run(self.fallback, question, ctx)
        try:
            return strategy.name, await self._run(strategy, question, ctx)
        except (StrategyError, LLMError) as error:
            reason = f"{type(error).__name__}: {error}; answered with plain RAG"
            ctx.trace.fallback(strategy.name, reason)
            if ctx.streamed:  # part of the typed answer went out: a streaming client starts its text over
                ctx.emit("restart", reason=reason)
                ctx.streamed = 0
            ctx.book = SourceBook()  # cite only what the fallback answer was given
            return self.fallback.name, await self._run(self.fallback, question, ctx)

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
    return f"The documents do not answer this. I looked for: \u201c{abstention.looked_for}\u201d.{nearest}"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _type_decision(decision: TypePrediction | None) -> TypeDecision | None:
    if decision is None:
        return None
    return TypeDecision(
        type=str(decision.label),
        confidence=round(decision.confidence, 4),
        source=decision.source,
        probabilities={str(k): round(v, 4) for k, v in decision.probabilities.items()},
    )
