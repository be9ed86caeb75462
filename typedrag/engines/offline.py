"""The built-in engine for machines with no LLM: heuristic plans and extractive, attributed answers.

Answers are made of sentences taken verbatim from the retrieved passages, chosen by MiniLM
similarity to the question (or aspect) with maximal-marginal-relevance to avoid repeating
itself, each followed by the number of the passage it came from. Nothing is invented, and
every result names this engine so nobody mistakes it for a generative model.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable

import numpy as np

from typedrag.embed import Embedder, default_embedder
from typedrag.engines import heuristics
from typedrag.engines.base import AnswerRequest, AnswerStyle, PartialAnswer, PlanFailed, PlanT, Trace
from typedrag.llm.base import LLMCall, StructuredOutcome
from typedrag.nfq import NFQType
from typedrag.result import Source, split_sentences

ENGINE_NAME = "offline-extractive"

_PLANNERS: dict[NFQType, Callable] = {
    NFQType.COMPARISON: heuristics.comparison_plan,
    NFQType.EXPERIENCE: heuristics.experience_plan,
    NFQType.REASON: heuristics.reason_plan,
    NFQType.INSTRUCTION: heuristics.instruction_plan,
    NFQType.DEBATE: heuristics.debate_plan,
}

# A sentence ends at . ! ? before a capital, except after titles, "e.g."-style abbreviations and
# initials ("St. Clair", "J. R. R. Tolkien", "U.S. Army"), which would leave fragments.
_SENTENCE = re.compile(
    r"(?<!\b[A-Z]\.)(?<!\bSt\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bJr\.)(?<!\bSr\.)(?<!\bMrs\.)(?<!\bvs\.)"
    r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<=[.!?])\s+(?=[A-Z0-9\"'(])"
)
_SENTENCES_PER_STYLE = {
    AnswerStyle.DIRECT: 4,
    AnswerStyle.EXPERIENCE: 4,
    AnswerStyle.ASPECT: 2,
    AnswerStyle.PERSPECTIVE: 2,
}
_NEAR_DUPLICATE = 0.9
# Below this cosine to the question a sentence is off topic (MiniLM: unrelated text scores ~0-0.2);
# better to say less than to quote a passage that only shares a word with the query.
_MIN_RELEVANCE = 0.25
_MAX_SENTENCE_WORDS = 70


def mmr(query: np.ndarray, candidates: np.ndarray, count: int, diversity: float = 0.3, exclude: set[int] = frozenset()) -> list[int]:
    """Indices of up to `count` candidates relevant to `query` and unlike each other."""
    relevance = candidates @ query
    chosen: list[int] = []
    while len(chosen) < min(count, len(candidates)):
        best, best_score = -1, -np.inf
        for i in range(len(candidates)):
            if i in chosen or i in exclude:
                continue
            redundancy = max((float(candidates[i] @ candidates[j]) for j in chosen), default=0.0)
            if redundancy > _NEAR_DUPLICATE or relevance[i] < _MIN_RELEVANCE:
                continue
            score = (1 - diversity) * relevance[i] - diversity * redundancy
            if score > best_score:
                best, best_score = i, score
        if best < 0:
            break
        chosen.append(best)
    return chosen


class OfflineEngine:
    name = ENGINE_NAME

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def _record(self, trace: Trace, role: str, started: float, **extra) -> None:
        latency = round((time.perf_counter() - started) * 1000, 1)
        trace.calls.append(LLMCall(role=role, engine=self.name, latency_ms=latency, requests=0, **extra))

    async def plan(self, question: str, kind: NFQType, schema: type[PlanT], trace: Trace) -> PlanT:
        started = time.perf_counter()
        role = f"plan:{kind.value.lower()}"
        try:
            plan = _PLANNERS[kind](question)
        except ValueError as error:  # includes pydantic.ValidationError
            self._record(trace, role, started, structured=StructuredOutcome.FAILED, error=str(error)[:300])
            raise PlanFailed(f"offline planner: {error}") from error
        self._record(trace, role, started, structured=StructuredOutcome.OK)
        return schema.model_validate(plan.model_dump())

    async def answer(self, request: AnswerRequest, trace: Trace, *, role: str = "answer") -> str:
        started = time.perf_counter()
        text = await asyncio.to_thread(self._answer, request)
        self._record(trace, role, started)
        return text

    async def answer_closed_book(self, question: str, trace: Trace) -> str:
        started = time.perf_counter()
        self._record(trace, "answer:closed-book", started)
        return (
            "The offline engine answers only from retrieved passages, so it has no closed-book answer; "
            "configure an LLM endpoint (--llm) for the LLM-only baseline."
        )

    async def combine(
        self, question: str, kind: NFQType, parts: list[PartialAnswer], trace: Trace, *, topic: str = ""
    ) -> str:
        started = time.perf_counter()
        text = await asyncio.to_thread(self._combine, question, kind, parts, topic)
        self._record(trace, "mediate" if kind is NFQType.DEBATE else "aggregate", started)
        return text

    # -- extractive answering -------------------------------------------------------------

    def _sentences(self, sources: list[Source]) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        for source in sources:
            for sentence in _SENTENCE.split(source.text):
                words = sentence.split()
                if 5 <= len(words) <= _MAX_SENTENCE_WORDS:  # fragments and run-ons read badly out of context
                    found.append((" ".join(words), source.number))
        return found

    def _pick(self, query: str, sentences: list[tuple[str, int]], count: int, exclude: set[int] = frozenset()) -> list[int]:
        vectors = self.embedder.embed([query] + [s for s, _ in sentences])
        return mmr(vectors[0], vectors[1:], count, exclude=exclude)

    def _answer(self, request: AnswerRequest) -> str:
        sentences = self._sentences(request.sources)
        if not sentences:
            return "The index has no passage that speaks to this question."
        if request.style is AnswerStyle.COMPARISON:
            return self._compare(request, sentences)
        query = request.question
        if request.style in (AnswerStyle.ASPECT, AnswerStyle.PERSPECTIVE):
            query = f"{request.query or request.focus} {request.question}"
        chosen = self._pick(query, sentences, _SENTENCES_PER_STYLE[request.style])
        if not chosen:
            return "The retrieved passages do not speak to this."
        return " ".join(f"{sentences[i][0]} [{sentences[i][1]}]" for i in chosen)

    def _compare(self, request: AnswerRequest, sentences: list[tuple[str, int]]) -> str:
        lines = [f"Comparing {', '.join(request.items)} ({request.purpose}):"]
        used: set[int] = set()
        for item in request.items:
            chosen = self._pick(item, sentences, 2, exclude=used)  # the item alone: sentences about it, not about both
            used.update(chosen)
            if chosen:
                lines.append(f"- {item}: " + " ".join(f"{sentences[i][0]} [{sentences[i][1]}]" for i in chosen))
            else:
                lines.append(f"- {item}: the retrieved passages say nothing specific.")
        return "\n".join(lines)

    def _combine(self, question: str, kind: NFQType, parts: list[PartialAnswer], topic: str) -> str:
        grouped: dict[str, str] = {}  # aspect label -> its chosen sentences
        seen = np.zeros((0, self.embedder.dim), dtype=np.float32)
        for part in parts:
            candidates = [s for s in split_sentences(part.text) if re.search(r"\[\d+\]", s)]
            if not candidates:
                continue
            vectors = self.embedder.embed([question] + candidates)
            chosen: list[str] = []
            for index in np.argsort(-(vectors[1:] @ vectors[0])):
                vector = vectors[1 + index]
                if len(seen) and float((seen @ vector).max()) > _NEAR_DUPLICATE:
                    continue  # another aspect already said this
                seen = np.vstack([seen, vector])
                chosen.append(candidates[index])
                if len(chosen) == 2:
                    break
            if chosen:
                grouped[part.label] = " ".join(chosen)
        if not grouped:
            return "None of the aspects found supporting passages in the index."
        if kind is NFQType.INSTRUCTION:
            return "Steps:\n" + "\n".join(f"{i}. {text}" for i, text in enumerate(grouped.values(), 1))
        if kind is NFQType.DEBATE:
            body = "\n".join(f"- {label.capitalize()}: {text}" for label, text in grouped.items())
            return f"Views on {topic or question} differ.\n{body}\nWhich view prevails turns on how these points are weighed."
        body = "\n".join(f"- {label}: {text}" for label, text in grouped.items())
        return f"Several factors bear on this:\n{body}"
