"""The built-in engine for machines with no LLM: plans read from the question, answers quoted from passages.

It plans with the planner each plan names (`PlanTask.offline`: every strategy reads its plan from the
question's phrasing, typedrag.phrasing) and writes each step by its kind (typedrag/engines/offline/answers.py):
the reader model (typedrag/reader) reads every quotable sentence against the question, and an answer quotes
those it says answer, by the role each plays. Every result names this engine, and nothing is invented: each
sentence is quoted with the number of the passage it came from. A route added from outside typedrag works
too: with its own `PlanTask.offline` planner, and its writing step answered as plain RAG answers.
"""

from __future__ import annotations

import asyncio
from pydantic import BaseModel

from typedrag.engines.base import (
    AspectAnswer,
    ClosedBook,
    Combined,
    PlanT,
    PlanTask,
    TextSink,
    Trace,
    WriteTask,
    Written,
    sentence_pieces,
)
from typedrag.engines.offline.answers import NO_PASSAGES, answer, quoted_from
from typedrag.engines.offline.settings import DEFAULT, OfflineSettings
from typedrag.errors import PlanFailed
from typedrag.reader import Reader, default_reader
from typedrag.result import Source

__all__ = ["OfflineEngine", "OfflineSettings"]

ENGINE_NAME = "offline-extractive"
CLOSED_BOOK = (
    "The offline engine answers only from retrieved passages, so it has no closed-book answer; "
    "configure an LLM endpoint (--llm) for the LLM-only baseline."
)


class OfflineEngine:
    """Extractive answers chosen by the reader model, and plans read from the question; no LLM needed.

    >>> OfflineEngine().name
    'offline-extractive'
    """

    name = ENGINE_NAME
    generative = False

    def __init__(self, reader: Reader | None = None, settings: OfflineSettings = DEFAULT) -> None:
        """`settings` holds every tuned number; a benchmark passes its own to sweep them."""
        self._reader = reader
        self.settings = settings

    @property
    def reader(self) -> Reader:
        if self._reader is None:
            self._reader = default_reader()
        return self._reader

    def quotes_from(self, task: WriteTask) -> list[Source]:
        """The sources `task`'s answer can quote, which the relevance bar judges before it is written."""
        return quoted_from(task, self.settings)

    async def plan(self, task: PlanTask[PlanT], question: str, trace: Trace) -> PlanT:
        """The plan the task's offline planner reads from the question (no model is called, so none is
        recorded among the LLM calls: the driver records the step)."""
        try:
            if task.offline is None:
                raise ValueError(
                    f"no offline planner for {task.role}; give the PlanTask an offline planner, or use an LLM"
                )
            planned = task.offline(question)
            return task.schema.model_validate(planned.model_dump() if isinstance(planned, BaseModel) else planned)
        except ValueError as error:  # includes pydantic.ValidationError
            raise PlanFailed(f"offline planner: {error}") from error

    async def write(self, task: WriteTask, trace: Trace, on_text: TextSink | None = None) -> Written:
        """The quoted answer; `on_text` hears it a sentence (or line) at a time once it is chosen."""
        written = await asyncio.to_thread(self._write, task)
        if on_text is not None:
            for piece in sentence_pieces(written.text):
                on_text(piece)
        return written

    def _write(self, task: WriteTask) -> Written:
        """The answer with the reader's best chance (which the abstention policy reads) and notes on what
        it left out (which the trace records if the answer is used)."""
        if isinstance(task, ClosedBook):
            return Written(CLOSED_BOOK, supported=False)
        if not task.sources and not (isinstance(task, Combined) and task.parts):
            return Written(NO_PASSAGES, supported=False)
        written = answer(task, self.reader, self.settings)
        # What it left out is what the offline engine does by design (it quotes only what its reader reads as
        # answering): said on the step in the trace, never a fallback (issue 55).
        said = [
            f"left out: {reason_left_out} (the reader found none in the passages)"
            for reason_left_out in written.dropped
        ]
        if written.held_back is not None:
            said.append(f"not added: {written.held_back}")
        if (
            not written.supported and written.lead and not isinstance(task, AspectAnswer | Combined)
        ):  # said of the parts
            said.append("the reader found no sentence that answers; the nearest on-topic ones are quoted")
        # An answer that quotes nothing answers nothing, whatever the reader's best chance among sentences it
        # could not quote (none on topic): the final step is then abstained on, not "do not speak to this".
        best = written.best if written.lead or written.groups else 0.0
        return Written(
            written.text(),
            written.quotes(),
            written.supported,
            best=best,
            said=tuple(said),
            filed_under=written.filed_under,
        )
