"""The `ChatModel` scaffold of the framework adapters: call records, token counts, streaming and typedrag's own
structured-output step (`typedrag.llm.structured.validated`: validate, one repair round, recorded fallback)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from typedrag import telemetry
from typedrag.errors import LLMError
from typedrag.llm.base import Completion, LLMCall, Message
from typedrag.llm.openai_chat import response_format
from typedrag.llm.structured import Checked, validated, validator
from typedrag.redact import redact_text


@dataclass
class Reply:
    """One reply from a framework chat model, with what it said about itself (zeros/None when it says nothing)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None


_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "response format", "grammar")


class FrameworkChatModel:
    """A typedrag `ChatModel` over a framework's chat model. A subclass sends one request (`_send`); this
    class keeps the call record (requests, latency, tokens, finish reason), streams plain replies to
    `on_text`, and runs typedrag's structured-output step: the tolerant parser and pydantic validation, ONE
    repair round, and a recorded FAILED outcome the strategy falls back on.

    The framework's own structured output is used only where it is exact: its OpenAI client, which sends the
    schema as `response_format` (the server then decodes only schema-valid JSON). If the server refuses it,
    the adapter asks in plain text from then on. The framework model's own settings (temperature, token limit)
    are left as you configured them."""

    name: str

    def __init__(self, *, structured_output: bool) -> None:
        self.structured_output = structured_output

    async def _send(
        self,
        messages: list[Message],
        *,
        role: str,
        schema_format: dict[str, Any] | None,
        on_text: Callable[[str], None] | None,
    ) -> Reply:
        raise NotImplementedError

    def _strict_schemas(self) -> bool:
        """Whether the endpoint is OpenAI itself, which enforces a schema only in strict mode."""
        return False

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
        """One completion; `accept` only matters to a cache, and these adapters keep none."""
        call = LLMCall(role=role, engine=self.name, requests=0)
        framework, _, model = self.name.partition(":")
        with telemetry.llm_call(
            call,
            model=model or self.name,
            provider=framework,
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            structured=schema is not None,
            streaming=on_text is not None,
        ) as traced:
            if schema is None:
                text = await self._request(call, messages, role, None, on_text)
                if not text.strip():
                    raise LLMError(f"{self.name} returned an empty reply")
                traced.reply(text)
                return Completion(text=text, call=call)
            check = validator(schema)

            async def ask(turns: list[Message]) -> tuple[str, Checked]:
                text = await self._request(call, turns, role, schema, None)
                return text, check(text)

            parsed, text = await validated(ask, messages, schema, max_tokens, call)
            traced.reply(text)
            return Completion(text=text, parsed=parsed, call=call)

    async def _request(
        self,
        call: LLMCall,
        messages: list[Message],
        role: str,
        schema: type[BaseModel] | None,
        on_text: Callable[[str], None] | None,
    ) -> str:
        schema_format = (
            response_format(schema, strict=self._strict_schemas())
            if schema is not None and self.structured_output
            else None
        )
        call.requests += 1
        started = time.perf_counter()
        try:
            reply = await self._send(messages, role=role, schema_format=schema_format, on_text=on_text)
        except LLMError:
            raise
        except Exception as error:
            if schema_format is not None and any(word in str(error).lower() for word in _FORMAT_WORDS):
                self.structured_output = False  # the endpoint takes no response_format: plain text from now on
                return await self._request(call, messages, role, schema, on_text)
            raise LLMError(f"{self.name} failed: {type(error).__name__}: {redact_text(str(error))[:300]}") from error
        finally:
            call.latency_ms = round(call.latency_ms + (time.perf_counter() - started) * 1000, 1)
        call.prompt_tokens += reply.prompt_tokens
        call.completion_tokens += reply.completion_tokens
        call.finish_reason = reply.finish_reason
        return reply.text


def is_openai_endpoint(base_url: str | None) -> bool:
    """True for OpenAI's own API (no base URL set means it too)."""
    if not base_url:
        return True
    try:
        return urlsplit(base_url).hostname == "api.openai.com"
    except ValueError:
        return False


def count(value: Any) -> int:
    """A token count a framework reported, or 0 for none or nonsense."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
