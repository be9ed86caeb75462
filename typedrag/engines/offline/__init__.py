"""The built-in engine for machines with no LLM: heuristic plans and extractive, attributed answers.

It performs each role the strategies hand it by looking the role up: a planner per question type
(`plan:<type>`), and a recipe per writing step (`answer:<type>`, `aspect:<type>`, `aggregate:<type>`,
`mediate:<type>`) that says which sentences of the passages (or of the aspects' answers) to quote and
how to lay them out. Every typed answer leads with what plain RAG would say from the question's own
passages, then adds only sentences of its type's shape: never less than plain RAG, by construction.
A route added from outside typedrag works too: with its own `PlanTask.offline` and `WriteTask.extract`,
or else the generic recipe. Every result names this engine, and nothing is invented: each sentence is
quoted with the number of the passage it came from.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from typedrag.embed import Embedder, default_embedder
from typedrag.engines.base import Extract, PlanT, PlanTask, Section, TextSink, Trace, WriteTask, sentence_pieces
from typedrag.engines.offline import comparison, debate, experience, instruction, reason
from typedrag.engines.offline.sentences import (
    NO_PASSAGES,
    NOTHING_RELEVANT,
    Candidate,
    LexicalOverlap,
    Picker,
    layout,
    sentences_of_parts,
    sentences_of_sources,
)
from typedrag.engines.offline.settings import DEFAULT, OfflineSettings
from typedrag.errors import PlanFailed
from typedrag.llm.base import LLMCall, StructuredOutcome

__all__ = ["Candidate", "LexicalOverlap", "OfflineEngine", "OfflineSettings", "layout"]

ENGINE_NAME = "offline-extractive"
CLOSED_BOOK = (
    "The offline engine answers only from retrieved passages, so it has no closed-book answer; "
    "configure an LLM endpoint (--llm) for the LLM-only baseline."
)
Recipe = Callable[[WriteTask, OfflineSettings], Extract]

PLANNERS: dict[str, Callable[[str], object]] = {
    "plan:comparison": comparison.plan,
    "plan:experience": experience.plan,
    "plan:reason": reason.plan,
    "plan:instruction": instruction.plan,
    "plan:debate": debate.plan,
}
RECIPES: dict[str, Recipe] = {
    "answer:comparison": comparison.answer,
    "answer:experience": experience.answer,
    "aspect:reason": reason.aspect_answer,
    "aggregate:reason": reason.aggregate,
    "aspect:instruction": instruction.aspect_answer,
    "aggregate:instruction": instruction.aggregate,
    "aspect:debate": debate.aspect_answer,
    "mediate:debate": debate.mediated,
}


def plain(task: WriteTask, settings: OfflineSettings) -> Extract:
    """Plain RAG's answer, and the recipe of any role nobody registered: the sentences nearest the question,
    from the passages; or, combining parts, each part's nearest one."""
    question = task.values.get("question", "")
    if task.parts:
        return Extract(tuple(Section(query=f"{p.query} {question}", groups=frozenset({i}), sentences=1) for i, p in enumerate(task.parts)))
    return rag_answer(question, settings)


def rag_answer(question: str, settings: OfflineSettings) -> Extract:
    """Plain RAG's recipe: the `answer_sentences` sentences nearest the question."""
    return Extract((Section(query=question, sentences=settings.answer_sentences),))


class OfflineEngine:
    """Extractive answers and heuristic plans, no model needed.

    >>> OfflineEngine().name
    'offline-extractive'
    """

    name = ENGINE_NAME
    generative = False

    def __init__(self, embedder: Embedder | None = None, settings: OfflineSettings = DEFAULT) -> None:
        """`settings` holds every tuned number; a benchmark passes its own to sweep them."""
        self._embedder = embedder
        self.settings = settings

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def _record(self, trace: Trace, role: str, started: float, **extra) -> None:
        latency = round((time.perf_counter() - started) * 1000, 1)
        trace.calls.append(LLMCall(role=role, engine=self.name, latency_ms=latency, requests=0, **extra))

    async def plan(self, task: PlanTask[PlanT], question: str, trace: Trace) -> PlanT:
        started = time.perf_counter()
        planner = task.offline or PLANNERS.get(task.role)
        try:
            if planner is None:
                raise ValueError(f"no offline planner for {task.role}; give the PlanTask an offline planner, or use an LLM")
            plan = task.schema.model_validate(planner(question).model_dump())
        except ValueError as error:  # includes pydantic.ValidationError
            self._record(trace, task.role, started, structured=StructuredOutcome.FAILED, error=str(error)[:300])
            raise PlanFailed(f"offline planner: {error}") from error
        self._record(trace, task.role, started, structured=StructuredOutcome.OK)
        return plan

    async def write(self, task: WriteTask, trace: Trace, on_text: TextSink | None = None) -> str:
        """The extracted text; `on_text` hears it a sentence (or line) at a time once it is chosen."""
        started = time.perf_counter()
        text = await asyncio.to_thread(self._write, task)
        self._record(trace, task.role, started)
        if on_text is not None:
            for piece in sentence_pieces(text):
                on_text(piece)
        return text

    def pick(self, extract: Extract, candidates: list[Candidate], titles: dict[int, str] | None = None) -> list[list[int]]:
        """Each section's sentences among `candidates` (passage number -> title in `titles`), as `write` picks them."""
        return Picker(candidates, self.embedder, self.settings, titles).pick(extract)

    def recipe(self, task: WriteTask) -> Extract:
        """How `task` is written: its own extract, the recipe of its role, or the generic one."""
        if task.extract is not None:
            return task.extract
        return RECIPES.get(task.role, plain)(task, self.settings)

    def _write(self, task: WriteTask) -> str:
        if not task.sources and not task.parts:
            return CLOSED_BOOK if "sources" not in task.prompt.fields() else NO_PASSAGES
        candidates = sentences_of_parts(task) if task.parts else sentences_of_sources(task.sources, self.settings)
        if not candidates:
            return NO_PASSAGES
        extract = self.recipe(task)
        picker = Picker(candidates, self.embedder, self.settings, {s.number: s.title for s in task.sources})
        if any(section.lead for section in extract.sections):
            picker.lead = self._lead(task, candidates)
        return layout(extract, picker.pick(extract), candidates) or NOTHING_RELEVANT

    def _lead(self, task: WriteTask, candidates: list[Candidate]) -> list[int]:
        """What plain RAG says from the question's own passages (the first `question_sources` sources), chosen
        exactly as plain RAG chooses it, as indices into `candidates`."""
        own = {source.number for source in task.sources[: task.question_sources or len(task.sources)]}
        mine = [c for c in candidates if c.group in own]
        if not mine:
            return []
        alone = Picker(mine, self.embedder, self.settings, {s.number: s.title for s in task.sources if s.number in own})
        chosen = alone.pick(rag_answer(task.values["question"], self.settings))[0]
        where = {id(c): i for i, c in enumerate(candidates)}
        return [where[id(mine[i])] for i in chosen]

