"""Every LLM role performed by one chat model: fill the task's prompt, validate plans against their schema."""

from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel

from typedrag.abstain import NOT_SAID, HoldBack, said_not_in_sources
from typedrag.engines.base import (
    Combined,
    LabelledAnswer,
    PlanT,
    PlanTask,
    TextSink,
    Trace,
    WriteTask,
    Written,
    sentence_pieces,
    trimmed,
)
from typedrag.errors import PlanFailed
from typedrag.llm.base import ChatModel, Message
from typedrag.prompts import format_parts, format_sources, labelled, reply_format, unanswered
from typedrag.result import Source, Unsourced

# How a reader's own instructions reach the model: after typedrag's, which they cannot override.
# knowledge = "labelled": room beyond the step's own for the sentences a model adds and the JSON around them.
LABELLED_TOKENS = 300

READER_INSTRUCTIONS = (
    "\n\nThe reader gave these instructions on how to write the answer (language, tone, length). Follow them "
    "unless they contradict the rules above:\n{instructions}"
)


class LLMEngine:
    """The engine for any `ChatModel` (an OpenAI-compatible endpoint, a local llama.cpp server, a fake).

    >>> from typedrag.testing import ScriptedChatModel
    >>> LLMEngine(ScriptedChatModel()).name
    'scripted'
    """

    generative = True

    def __init__(self, model: ChatModel, *, plan_tokens: int = 800, answer_tokens: int | None = None) -> None:
        """`plan_tokens` caps plan replies: room for the longest plan the schemas allow (five items of their
        longest), so a grammar-bound reply always closes; `answer_tokens`, if given, caps every written reply."""
        self.model = model
        self.name = model.name
        self.plan_tokens = plan_tokens
        self.answer_tokens = answer_tokens

    def quotes_from(self, task: WriteTask) -> list[Source]:
        """Every source of the step: a model may draw on any of them."""
        return list(task.sources)

    async def plan(self, task: PlanTask[PlanT], question: str, trace: Trace) -> PlanT:
        values = {"question": question}
        if "reply_format" in task.prompt.fields():
            values["reply_format"] = reply_format(task.schema)
        completion = await self.model.complete(
            task.prompt.messages(**values), role=task.role, schema=task.schema, max_tokens=self.plan_tokens
        )
        trace.calls.append(completion.call)
        if not isinstance(completion.parsed, BaseModel):
            raise PlanFailed(completion.call.error or "the model returned no valid plan")
        return completion.parsed

    async def write(self, task: WriteTask, trace: Trace, on_text: TextSink | None = None) -> Written:
        values = task.values()
        fields = task.prompt.fields()
        if "sources" in fields:
            values["sources"] = format_sources(task.sources)
        if "parts" in fields:
            values["parts"] = format_parts(task.parts if isinstance(task, Combined) else ())
        notes: tuple[str, ...] = ()
        max_tokens = min(task.max_tokens, self.answer_tokens or task.max_tokens)
        messages = task.prompt.messages(**values)
        if isinstance(task, Combined) and task.unanswered is not None:
            messages[-1]["content"] += unanswered(task.unanswered)
        if task.instructions:
            messages[0]["content"] += READER_INSTRUCTIONS.format(instructions=task.instructions)
        if task.knowledge == "labelled":
            written, why = await self.labelled(task, messages, max_tokens, trace, on_text)
            if written is not None:
                return replace(written, notes=notes + written.notes)
            # recorded at once, not as a note of the text: it holds should the documents then not answer either
            trace.fallback(task.role, f"knowledge = labelled: {why}; answered from the documents alone")
        return await self.plain(task, messages, max_tokens, notes, trace, on_text)

    async def plain(
        self,
        task: WriteTask,
        messages: list[Message],
        max_tokens: int,
        notes: tuple[str, ...],
        trace: Trace,
        on_text: TextSink | None,
    ) -> Written:
        """The step's text as the model writes it, streamed; the not-in-sources reply read as the signal it is."""
        held = HoldBack(trimmed(on_text)) if on_text is not None else None  # the not-in-sources reply is never streamed
        streaming = {"on_text": held} if held is not None else {}
        completion = await self.model.complete(messages, role=task.role, max_tokens=max_tokens, **streaming)
        trace.calls.append(completion.call)
        missing = said_not_in_sources(completion.text)
        if missing is not None:  # the signal, not an answer: never streamed, and no text
            return Written("", supported=False, not_in_sources=missing)
        if held is not None:
            held.release()
        return Written(completion.text.strip(), notes=notes)

    async def labelled(
        self, task: WriteTask, messages: list[Message], max_tokens: int, trace: Trace, on_text: TextSink | None
    ) -> tuple[Written | None, str]:
        """knowledge = "labelled": the reply as a validated `LabelledAnswer` (one bounded repair), its cited part
        the step's text (streamed once validated) and its own-knowledge part `Written.unsourced`; an empty cited
        part is the not-in-sources signal, with the unsourced part beside it. (None, why) when no reply validated:
        the caller writes the step from the documents alone and records why."""
        completion = await self.model.complete(
            labelled(messages, reply_format(LabelledAnswer)),
            role=task.role,
            schema=LabelledAnswer,
            max_tokens=max_tokens + LABELLED_TOKENS,
        )
        trace.calls.append(completion.call)
        reply = completion.parsed
        if not isinstance(reply, LabelledAnswer):
            return None, completion.call.error or "the model gave no valid reply"
        covers = " ".join(reply.not_covered.split())
        unsourced = (
            Unsourced(sentences=reply.from_own_knowledge, covers=covers, by=self.name)
            if reply.from_own_knowledge
            else None
        )
        text = reply.from_sources.strip()
        missing = said_not_in_sources(text) if text else (covers or NOT_SAID)
        if missing is not None:
            return Written("", supported=False, not_in_sources=missing, unsourced=unsourced), ""
        if on_text is not None:
            sink = trimmed(on_text)
            for piece in sentence_pieces(text):
                sink(piece)
        return Written(text, unsourced=unsourced), ""
