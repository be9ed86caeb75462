"""A conversation with a pipeline: each question is answered with the turns before it.

>>> from typedrag import Conversation, ListRetriever, OfflineEngine, Pipeline
>>> chat = Conversation(Pipeline(OfflineEngine(), ListRetriever(["Cats purr when content."])), system="Be brief.")
>>> [turn.role for turn in chat.history]
['system']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from typedrag.history import Turn
from typedrag.pipeline import Method, Pipeline
from typedrag.result import AnswerResult


class Conversation:
    """Questions asked one after another, each read with the ones before it and the answers given to them
    (`Pipeline.answer(question, history=...)` with the history kept for you). `system` holds instructions
    for every answer's writing (language, tone, length); an LLM follows them, the offline engine cannot."""

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        method: Method | str = Method.TYPED,
        forced_type: str | None = None,
        system: str | None = None,
    ) -> None:
        self.pipeline, self.method, self.forced_type = pipeline, method, forced_type
        self.system = system
        self.history: list[Turn] = []
        self.last: AnswerResult | None = None
        self.reset()

    async def ask(self, question: str, on_event: Callable[[str, dict[str, Any]], None] | None = None) -> AnswerResult:
        """The answer to `question` in this conversation; the question and its answer join the history."""
        result = await self.pipeline.answer(
            question, self.method, self.forced_type, on_event=on_event, history=self.history
        )
        self.history += [Turn(role="user", content=result.question), Turn(role="assistant", content=result.answer)]
        self.last = result
        return result

    def reset(self) -> None:
        """Start over: no earlier turns (the system instructions stay)."""
        self.history = [Turn(role="system", content=self.system)] if self.system else []
        self.last = None
