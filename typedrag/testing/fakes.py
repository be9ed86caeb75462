"""In-process fakes for fast unit tests of routing and fallbacks (the HTTP stub covers the protocol)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from typedrag.reader import Bars, Piece, Reading

from typedrag.llm.base import Completion, LLMCall, Message, StructuredOutcome
from typedrag.llm.structured import parse_structured
from typedrag.text import word_pieces


@dataclass
class ScriptedCall:
    """What the fake model was asked: the messages, the trace role and the schema (if any)."""

    messages: list[Message]
    role: str
    schema: type[BaseModel] | None

    @property
    def user(self) -> str:
        return self.messages[-1]["content"]

    def as_request(self):
        """The call as the loopback stub server would receive it, so a stub's responder scripts it too."""
        from typedrag.testing.openai_stub import ChatRequest

        body: dict = {"messages": self.messages}
        if self.schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": self.schema.__name__}}
        return ChatRequest(body=body, headers={})


Script = Callable[[ScriptedCall], str]


def _default_script(call: ScriptedCall) -> str:
    if call.schema is not None:
        from typedrag.testing.openai_stub import plan_for

        return plan_for(call.schema.__name__, call.user)
    return "A scripted answer [1]."


@dataclass
class ScriptedChatModel:
    """A `ChatModel` whose replies come from `script(call)`; every call is kept in `calls`.

    Replies to schema requests are parsed like a real model's; an unparsable one is a FAILED
    structured outcome, so repair and fallback paths can be tested without HTTP.

    >>> import asyncio
    >>> model = ScriptedChatModel(lambda call: "Hello [1].")
    >>> asyncio.run(model.complete([{"role": "user", "content": "Hi"}], role="answer")).text
    'Hello [1].'
    """

    script: Script = _default_script
    name: str = "scripted"
    calls: list[ScriptedCall] = field(default_factory=list)

    async def complete(
        self,
        messages: list[Message],
        *,
        role: str,
        schema: type[BaseModel] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        accept: Callable[[str], bool] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        started = time.perf_counter()
        call = ScriptedCall(messages, role, schema)
        self.calls.append(call)
        text = self.script(call)
        if on_text is not None and schema is None:
            for piece in word_pieces(text):
                on_text(piece)
        record = LLMCall(
            role=role,
            engine=self.name,
            prompt_tokens=sum(len(m["content"].split()) for m in messages),
            completion_tokens=len(text.split()),
        )
        parsed = None
        if schema is not None:
            try:
                parsed = parse_structured(text, schema)
                record.structured = StructuredOutcome.OK
            except ValueError as error:
                record.structured, record.error = StructuredOutcome.FAILED, str(error)[:300]
        record.latency_ms = round((time.perf_counter() - started) * 1000, 3)
        return Completion(text=text, parsed=parsed, call=record)


@dataclass
class ScriptedReader:
    """A reader whose readings come from `script(question, title, sentence)`, for tests of how the offline
    engine composes answers from readings (the shipped model's own readings are tested apart).

    >>> from typedrag.reader import Reading, Role
    >>> reader = ScriptedReader(lambda q, title, s: Reading(0.9, 0.9, Role.CAUSE) if "because" in s else Reading(0.0, 0.0, Role.NONE))
    >>> reader.read("Why?", [("t", "It fell because it was old.")])[0].role
    <Role.CAUSE: 'cause'>
    """

    script: Callable[[str, str, str], Reading]
    bars: Bars = Bars(answers=0.5, on_topic=0.5)
    name: str = "scripted-reader"

    def read(self, question: str, sentences: Sequence[Piece | tuple[str, str]], asked: object = None) -> list[Reading]:
        pairs = [(s.title, s.text) if isinstance(s, Piece) else s for s in sentences]
        return [self.script(question, title, text) for title, text in pairs]
