"""Every role performed by a chat model through our prompts and validated structured outputs."""

from __future__ import annotations

from pydantic import BaseModel

from typedrag import prompts
from typedrag.engines.base import AnswerRequest, AnswerStyle, PartialAnswer, PlanFailed, PlanT, Trace
from typedrag.llm.base import ChatModel, Message
from typedrag.nfq import NFQType
from typedrag.result import Source

_PLAN_PROMPTS = {
    NFQType.COMPARISON: prompts.PLAN_COMPARISON,
    NFQType.EXPERIENCE: prompts.PLAN_EXPERIENCE,
    NFQType.REASON: prompts.PLAN_REASON,
    NFQType.INSTRUCTION: prompts.PLAN_INSTRUCTION,
    NFQType.DEBATE: prompts.PLAN_DEBATE,
}

_COMBINE_PROMPTS = {
    NFQType.REASON: prompts.AGGREGATE_REASON,
    NFQType.INSTRUCTION: prompts.AGGREGATE_INSTRUCTION,
    NFQType.DEBATE: prompts.MEDIATE_DEBATE,
}

SOURCE_CHARS = 1200  # per passage in a prompt: ~100-word passages fit whole; runaway ones are cut


def format_sources(sources: list[Source]) -> str:
    return "\n".join(f"[{s.number}] {s.title}: {s.text[:SOURCE_CHARS]}" for s in sources) or "(no sources found)"


class LLMEngine:
    def __init__(self, model: ChatModel, *, answer_tokens: int = 400, plan_tokens: int = 300) -> None:
        self.model = model
        self.name = model.name
        self.answer_tokens = answer_tokens
        self.plan_tokens = plan_tokens

    async def _text(self, messages: list[Message], trace: Trace, role: str, max_tokens: int) -> str:
        completion = await self.model.complete(messages, role=role, max_tokens=max_tokens)
        trace.calls.append(completion.call)
        return completion.text.strip()

    async def plan(self, question: str, kind: NFQType, schema: type[PlanT], trace: Trace) -> PlanT:
        messages = _PLAN_PROMPTS[kind].messages(question=question)
        completion = await self.model.complete(
            messages, role=f"plan:{kind.value.lower()}", schema=schema, max_tokens=self.plan_tokens
        )
        trace.calls.append(completion.call)
        if not isinstance(completion.parsed, BaseModel):
            raise PlanFailed(completion.call.error or "the model returned no valid plan")
        return completion.parsed

    async def answer(self, request: AnswerRequest, trace: Trace, *, role: str = "answer") -> str:
        sources = format_sources(request.sources)
        match request.style:
            case AnswerStyle.COMPARISON:
                messages = prompts.COMPARISON_ANSWER.messages(
                    sources=sources,
                    question=request.question,
                    purpose=request.purpose,
                    items="; ".join(request.items),
                    purpose_instruction=prompts.PURPOSE_INSTRUCTIONS[request.purpose],
                )
            case AnswerStyle.EXPERIENCE:
                messages = prompts.EXPERIENCE_ANSWER.messages(
                    sources=sources, question=request.question, topic=request.focus
                )
            case AnswerStyle.ASPECT:
                messages = prompts.ASPECT_ANSWER.messages(sources=sources, question=request.question, focus=request.focus)
            case AnswerStyle.PERSPECTIVE:
                messages = prompts.PERSPECTIVE_ANSWER.messages(
                    sources=sources, question=request.question, focus=request.focus
                )
            case _:
                messages = prompts.GROUNDED_ANSWER.messages(sources=sources, question=request.question)
        return await self._text(messages, trace, role, self.answer_tokens)

    async def answer_closed_book(self, question: str, trace: Trace) -> str:
        return await self._text(prompts.CLOSED_BOOK.messages(question=question), trace, "answer:closed-book", self.answer_tokens)

    async def combine(
        self, question: str, kind: NFQType, parts: list[PartialAnswer], trace: Trace, *, topic: str = ""
    ) -> str:
        prompt = _COMBINE_PROMPTS[kind]
        text = "\n\n".join(f"({i}) {p.label}:\n{p.text}" for i, p in enumerate(parts, 1))
        values = {"question": question, "parts": text}
        if "topic" in prompt.fields():
            values["topic"] = topic or question
        role = "mediate" if kind is NFQType.DEBATE else "aggregate"
        return await self._text(prompt.messages(**values), trace, role, self.answer_tokens + 200)
