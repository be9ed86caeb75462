"""Types shared by every chat model: messages, call records, completions."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, Protocol, TypedDict

from pydantic import BaseModel, Field

from typedrag.errors import LLMError

__all__ = ["ChatModel", "Completion", "LLMCall", "LLMError", "Message", "StructuredOutcome"]


class Message(TypedDict):
    """A chat message as the OpenAI protocol sends it."""

    role: str  # "system" | "user" | "assistant"
    content: str


class StructuredOutcome(StrEnum):
    """How a structured reply ended: valid, valid after repair, or failed."""

    OK = "ok"  # valid on the first reply
    REPAIRED = "repaired"  # valid after the tolerant parser or the one repair retry
    FAILED = "failed"  # still invalid; the caller falls back and records why


class LLMCall(BaseModel):
    """One model call as it appears in a trace."""

    role: str = Field(description="which step asked, e.g. plan:comparison, answer:aspect, aggregate")
    engine: str
    latency_ms: float = Field(0.0, description="time in flight at the endpoint (all requests of the call)")
    queued_ms: float = Field(0.0, description="time waiting for one of the endpoint's slots before that")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    requests: int = 1  # HTTP requests made (2 when a repair retry was needed); 0 for a cache hit
    structured: StructuredOutcome | None = None
    finish_reason: str | None = Field(
        None, description="why the last reply ended: stop, length (cut at max_tokens), ..."
    )
    reply: str | None = Field(
        None, description="a structured call's last raw reply when it did not validate first time (truncated)"
    )
    error: str | None = None


class Completion(BaseModel):
    """A model's reply: the text, the validated object when a schema was asked for, and the call record."""

    text: str
    parsed: Any = None  # the validated pydantic object when a schema was asked for
    call: LLMCall


class ChatModel(Protocol):
    """Any chat model every role can use; implementations must be safe to call concurrently."""

    name: str

    async def complete(
        self,
        messages: list[Message],
        *,
        role: str,
        schema: type[BaseModel] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        accept: Callable[[str], bool] | None = None,  # plain replies: cache only those it approves
        on_text: Callable[[str], None] | None = None,  # plain replies: hears the text piece by piece as it comes
    ) -> Completion: ...
