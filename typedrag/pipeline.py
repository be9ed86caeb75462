"""The Typed-RAG pipeline, top to bottom as in the paper's Figure 2:

question -> type (classifier, or forced) -> the strategy for that type -> answer + trace.

The two baselines run through the same object so every method yields the same result shape:
`llm` (question -> answer) and `rag` (question -> top-k passages -> answer).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from typedrag.classify.base import TypeClassifier, TypePrediction, needs_fallback
from typedrag.engines.base import Engine, PlanFailed, Trace
from typedrag.index.base import Retriever
from typedrag.llm.base import LLMError
from typedrag.nfq import NON_FACTOID_TYPES, NFQType
from typedrag.prompts import PROMPT_VERSION
from typedrag.questions import DEFAULT_MAX_CHARS, clean_question
from typedrag.rerank import EmbeddingReranker
from typedrag.result import AnswerResult, Engines, TypeDecision, Usage, extract_citations
from typedrag.strategies import STRATEGIES, AspectsFailed, StrategyContext, StrategyOutput
from typedrag.strategies.base import SourceBook
from typedrag.strategies.evidence import EvidenceStrategy


class Method(StrEnum):
    LLM = "llm"  # LLM-only baseline
    RAG = "rag"  # plain RAG baseline
    TYPED = "typed"  # Typed-RAG


@dataclass
class PipelineSettings:
    top_k: int = 5
    aspect_k: int = 3
    candidates_k: int = 12
    max_question_chars: int = DEFAULT_MAX_CHARS
    # For data known to be non-factoid (Wiki-NFQA): route every question to the likeliest of the six
    # non-factoid types, as the paper's labelling did, instead of sending FACTOID/NOT-A-QUESTION or
    # low-confidence questions to plain RAG.
    assume_non_factoid: bool = False


class Pipeline:
    def __init__(
        self,
        engine: Engine,
        retriever: Retriever | None,
        classifier: TypeClassifier | None = None,
        reranker: EmbeddingReranker | None = None,
        settings: PipelineSettings | None = None,
    ) -> None:
        self.engine = engine
        self.retriever = retriever
        self.classifier = classifier
        self.reranker = reranker or EmbeddingReranker()
        self.settings = settings or PipelineSettings()

    async def answer(
        self,
        question: str,
        method: Method | str = Method.TYPED,
        forced_type: NFQType | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        decision: TypePrediction | None = None,
    ) -> AnswerResult:
        """Answer `question`; `on_event(name, data)` hears progress: type, plan, aspect (each), sources.

        `decision` is a type already decided by `decide_type` (batch evaluation decides once per question).
        """
        started = time.perf_counter()
        question = clean_question(question, self.settings.max_question_chars)
        method = Method(method)
        trace = Trace()
        timings: dict[str, float] = {}
        ctx = self._context(trace)
        ctx.on_event = on_event
        strategy_name = method.value
        if method is not Method.TYPED:
            decision = None  # baselines do not route by type

        if method is Method.LLM:
            output = StrategyOutput(answer=await self.engine.answer_closed_book(question, trace))
        elif method is Method.RAG:
            output = await EvidenceStrategy().run(question, ctx)
        else:
            decision = decision or await self.decide_type(question, forced_type, trace)
            timings["classify"] = _ms(started)
            ctx.emit("type", **_type_decision(decision).model_dump())
            strategy_name, output = await self._run_typed(question, decision, ctx)

        timings["total"] = _ms(started)
        sources = ctx.book.sources
        ctx.emit("sources", count=len(sources))
        return AnswerResult(
            question=question,
            method=method.value,
            answer=output.answer,
            strategy=strategy_name,
            type=_type_decision(decision),
            plan=output.plan.model_dump() if output.plan is not None else None,
            aspects=output.aspects,
            sources=sources,
            citations=extract_citations(output.answer, sources),
            fallbacks=trace.fallbacks,
            llm_calls=trace.calls,
            usage=Usage.of(trace.calls),
            timings_ms=timings,
            engines=Engines(
                generator=self.engine.name,
                retriever=self.retriever.name if self.retriever is not None and method is not Method.LLM else None,
                classifier=decision.source if decision is not None else None,
                reranker=self.reranker.name if method is Method.TYPED else None,
            ),
            prompt_version=PROMPT_VERSION,
        )

    def _context(self, trace: Trace) -> StrategyContext:
        s = self.settings
        return StrategyContext(
            engine=self.engine,
            retriever=self.retriever,  # type: ignore[arg-type]  # None only for the LLM-only method
            reranker=self.reranker,
            trace=trace,
            top_k=s.top_k,
            aspect_k=s.aspect_k,
            candidates_k=s.candidates_k,
        )

    async def decide_type(
        self, question: str, forced_type: NFQType | None = None, trace: Trace | None = None
    ) -> TypePrediction:
        """The type Typed-RAG routes on: forced, or the classifier's (restricted to non-factoid types if set)."""
        if forced_type is not None:
            return TypePrediction(label=forced_type, confidence=1.0, probabilities={forced_type: 1.0}, source="forced")
        if self.classifier is None:
            raise ValueError("method 'typed' needs a type classifier or a forced type")
        if hasattr(self.classifier, "aclassify"):  # LLM-backed classifiers are async and record their call
            prediction = await self.classifier.aclassify(question, trace)
        else:
            prediction = self.classifier.classify(question)
        if self.settings.assume_non_factoid:
            prediction = _most_likely_non_factoid(prediction)
        return prediction

    async def _run_typed(
        self, question: str, decision: TypePrediction, ctx: StrategyContext
    ) -> tuple[str, StrategyOutput]:
        label = decision.label
        if label not in NON_FACTOID_TYPES:
            ctx.trace.fallback("route", f"classified {label.value}: no typed plan applies, answered with plain RAG")
            return "rag", await EvidenceStrategy().run(question, ctx)
        if decision.source != "forced" and not self.settings.assume_non_factoid and needs_fallback(decision):
            ctx.trace.fallback(
                "route", f"type {label.value} confidence {decision.confidence:.2f} below threshold: plain RAG"
            )
            return "rag", await EvidenceStrategy().run(question, ctx)
        strategy = STRATEGIES[label]
        try:
            return strategy.name, await strategy.run(question, ctx)
        except (PlanFailed, AspectsFailed, LLMError) as error:
            ctx.trace.fallback(strategy.name, f"{type(error).__name__}: {error}; answered with plain RAG")
            ctx.book = SourceBook()  # cite only what the fallback answer was given
            return "rag", await EvidenceStrategy().run(question, ctx)


def _most_likely_non_factoid(prediction: TypePrediction) -> TypePrediction:
    """Renormalise over the six non-factoid types; an LLM label without probabilities becomes evidence-based."""
    weights = {t: prediction.probabilities.get(t, 0.0) for t in NON_FACTOID_TYPES}
    total = sum(weights.values())
    if total <= 0:
        return TypePrediction(NFQType.EVIDENCE_BASED, 1.0, {NFQType.EVIDENCE_BASED: 1.0}, prediction.source + " (non-factoid only)")
    probabilities = {t: w / total for t, w in weights.items()}
    label = max(probabilities, key=probabilities.get)
    return TypePrediction(label, probabilities[label], probabilities, prediction.source + " (non-factoid only)")


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _type_decision(decision: TypePrediction | None) -> TypeDecision | None:
    if decision is None:
        return None
    return TypeDecision(
        type=decision.label.value,
        confidence=round(decision.confidence, 4),
        source=decision.source,
        probabilities={k.value: round(v, 4) for k, v in decision.probabilities.items()},
    )
