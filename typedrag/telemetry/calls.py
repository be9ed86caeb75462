"""The span of every model call, as the OpenTelemetry GenAI semantic conventions name it (`chat <model>`,
`gen_ai.*`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from typedrag.telemetry.base import _clean, content_recorded, recording, span, tracing
from typedrag.telemetry.events import _tell

try:
    from opentelemetry.trace import SpanKind
except ImportError:  # opentelemetry-api is absent: span() is a no-op and never reads the kind
    pass

# ---------------------------------------------------------------- model calls (GenAI semantic conventions)


class ModelCall:
    """What `llm_call` hands its caller: `responded(id, model)` as each response arrives (the completion's id
    and the model that wrote it, as the endpoint names them), `reply(text)` once the model's text is in."""

    __slots__ = ("span", "text", "response_id", "response_model")

    def __init__(self, span_: Any) -> None:
        self.span, self.text = span_, None
        self.response_id: str | None = None
        self.response_model: str | None = None

    def responded(self, response_id: Any, model: Any) -> None:
        """The last response's id and model (a repair round's reply is the one the call ends with)."""
        self.response_id = response_id if isinstance(response_id, str) and response_id else self.response_id
        self.response_model = model if isinstance(model, str) and model else self.response_model

    def reply(self, text: str) -> None:
        self.text = text


@contextmanager
def llm_call(
    call: Any,
    *,
    model: str,
    provider: str,
    messages: Sequence[dict[str, str]],
    max_tokens: int,
    temperature: float,
    structured: bool,
    streaming: bool = False,
    server_url: str | None = None,
) -> Iterator[ModelCall]:
    """One model call: a `chat <model>` client span with the GenAI semantic conventions, filled from `call`
    (typedrag's LLMCall record: tokens, finish reason, requests, time queued) when it ends, and the service's
    metrics told about it (calls, tokens, errors, queue wait by role and model)."""
    error: BaseException | None = None
    try:
        if not tracing():
            yield ModelCall(None)
            return
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": max_tokens,
            "gen_ai.request.temperature": temperature,
            "gen_ai.request.stream": streaming,
            "gen_ai.output.type": "json" if structured else "text",
            "typedrag.role": call.role,
            **_server(server_url),
        }
        if content_recorded():
            attributes["gen_ai.input.messages"] = json.dumps(
                [{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in messages],
                ensure_ascii=False,
            )
        with span(f"chat {model}", attributes, kind=SpanKind.CLIENT) as span_:
            model_call = ModelCall(span_)
            try:
                yield model_call
            except BaseException as raised:
                error = raised
                if recording(span_):
                    span_.set_attribute("error.type", type(raised).__name__)
                raise
            finally:
                _describe_call(span_, call, model_call)
    except BaseException as raised:
        error = error or raised
        raise
    finally:
        _tell("llm_call", role=call.role, model=model, call=call, error=_error_type(error, call))


def _describe_call(span_: Any, call: Any, model_call: ModelCall) -> None:
    if not recording(span_):
        return
    text = model_call.text
    attributes = {
        "gen_ai.usage.input_tokens": call.prompt_tokens,
        "gen_ai.usage.output_tokens": call.completion_tokens,
        "gen_ai.response.finish_reasons": [call.finish_reason] if call.finish_reason else None,
        "gen_ai.response.id": _short(model_call.response_id),
        "gen_ai.response.model": _short(model_call.response_model),
        "typedrag.llm.cached": call.cached,
        "typedrag.llm.requests": call.requests,
        "typedrag.llm.queued_ms": call.queued_ms,
        "typedrag.llm.structured": str(call.structured) if call.structured is not None else None,
    }
    if call.error and not span_.attributes.get("error.type"):
        attributes["error.type"] = "invalid_reply"  # a structured reply that stayed invalid after the repair round
    if text is not None and content_recorded():
        attributes["gen_ai.output.messages"] = json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": text}],
                    "finish_reason": call.finish_reason or "stop",
                }
            ],
            ensure_ascii=False,
        )
    span_.set_attributes(_clean(attributes))


def _short(value: str | None, limit: int = 256) -> str | None:
    """An identifier an endpoint sent, bounded: it is the endpoint's to choose."""
    return value[:limit] if value else None


def _error_type(error: BaseException | None, call: Any) -> str | None:
    """What the metrics count as the call's error; a call cancelled (the client left) did not fail."""
    if error is not None:
        return None if isinstance(error, (GeneratorExit, asyncio.CancelledError)) else type(error).__name__
    return "invalid_reply" if call.error else None


def _server(url: str | None) -> dict[str, Any]:
    if not url:
        return {}
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return {}
    return {"server.address": parts.hostname, "server.port": port} if parts.hostname else {}
