"""What the answer routes share: the request body, and the Server-Sent Events stream of one answer (the native
/v1/answer/stream, in a collection, or in a saved conversation, which adds a `saved` event once it is kept)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

from fastapi import HTTPException, Request
from pydantic import BaseModel, Field

from typedrag.history import Turn
from typedrag.pipeline import Pipeline
from typedrag.result import AnswerResult
from typedrag.server.service import Service, SlotStream, errors_log, request_id_var

# After the result: what else to send (e.g. the saved messages' ids), as (event, data) pairs.
Finish = Callable[[AnswerResult], Awaitable[list[tuple[str, Any]]]]


class AnswerRequest(BaseModel):
    """The body of /v1/answer: the question, the method, and optionally a forced type."""

    question: str = Field(examples=["What is the difference between a crocodile and an alligator?"])
    method: Literal["typed", "rag", "llm"] = Field(
        "typed", description="typed (Typed-RAG), rag (plain RAG) or llm (LLM only)"
    )
    type: str | None = Field(None, description="Force the question type, e.g. comparison; default: classify it")
    history: list[Turn] = Field(
        [],
        description="The conversation before this question, oldest first: user and assistant turns (a follow-up is "
        "read with them) and system turns (instructions for the answer's writing: language, tone, length)",
    )
    knowledge: Literal["documents", "labelled"] | None = Field(
        None,
        description="documents: only what the documents support; labelled: where they do not cover the question, the model "
        "may add what it knows, apart (the result's `unsourced`, an `unsourced` event when streaming); default: the server's setting",
    )
    collection: str | None = Field(
        None, description="The collection to answer in (GET /v1/collections); default: the --index one, or the only one"
    )


def sse(event: str, data: Any) -> str:
    payload = data.model_dump_json() if isinstance(data, BaseModel) else json.dumps(data, ensure_ascii=False)
    return f"event: {event}\ndata: {payload}\n\n"


def answer_stream(service: Service, question: str, method: str, forced: str | None, history: list[Turn],
                  pipeline: Pipeline, finish: Finish | None = None, knowledge: str | None = None) -> SlotStream:
    """The answer's events as they happen, then `answer` and `result`, then what `finish` adds; `error` last on a
    failure. Takes one of the service's answer slots (503 when none is free), given back however the stream ends."""
    service.slots.take()

    async def stream() -> AsyncIterator[str]:
        try:
            async for name, data in service.events(question, method, forced, history, knowledge=knowledge, pipeline=pipeline):
                if name == "ping":
                    yield ": ping\n\n"
                elif name == "result":
                    yield sse("answer", {"text": data.answer})
                    yield sse("result", data)
                    for event, extra in await finish(data) if finish is not None else []:
                        yield sse(event, extra)
                else:
                    yield sse(name, data)
        except HTTPException as error:
            yield sse("error", {"status": error.status_code, "message": error.detail})
        except Exception:
            errors_log.exception("stream failed")
            yield sse("error", {"status": 500, "message": f"internal error; request id {request_id_var.get()}"})

    return SlotStream(stream(), service.slots)


async def answer_once(service: Service, request: Request, question: str, method: str, forced: str | None,
                      history: list[Turn], pipeline: Pipeline, knowledge: str | None = None) -> AnswerResult | None:
    """The whole answer (None: the client left first), within one of the service's answer slots."""
    service.slots.take()
    try:
        return await service.answer_unless_gone(request, question, method, forced, history, knowledge=knowledge, pipeline=pipeline)
    finally:
        service.slots.give()
