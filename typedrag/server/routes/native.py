"""typedrag's own answer API: /v1/answer (the whole AnswerResult as JSON) and /v1/answer/stream (Server-Sent
Events), each also in a named collection; and the web page that uses them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from typedrag.history import Turn
from typedrag.library import Caller
from typedrag.result import AnswerResult
from typedrag.server.answering import Asking, client_closed
from typedrag.server.auth import require_caller
from typedrag.server.service import service_of

STATIC = Path(__file__).resolve().parents[1] / "static"

router = APIRouter()


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


class ServerSentEvents:
    """The native stream's renderer (typedrag.server.answering.Renderer): each event as it is, then `answer` {text}
    and `result` (the AnswerResult); `error` {status, message} last on a failure."""

    def opening(self) -> list[str]:
        return []

    def event(self, name: str, data: Any) -> list[str]:
        return [sse(name, data)]

    def result(self, result: AnswerResult) -> list[str]:
        return [sse("answer", {"text": result.answer}), sse("result", result)]

    def error(self, status: int, message: Any) -> str:
        return sse("error", {"status": status, "message": message})

    def closing(self) -> list[str]:
        return []


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(STATIC / "index.html")


@router.post("/v1/answer", response_model=AnswerResult, tags=["answer"])
async def answer(
    body: AnswerRequest, request: Request, caller: Caller = Depends(require_caller)
) -> AnswerResult | JSONResponse:
    """Answer one question (in `collection`); the result carries the type, plan, aspects, sources (each linking to
    its original), citations and LLM calls."""
    result = await asking(body, request, caller, body.collection).once(request)
    return client_closed() if result is None else result


@router.post("/v1/collections/{collection}/answer", response_model=AnswerResult, tags=["collections"])
async def answer_in(
    collection: str, body: AnswerRequest, request: Request, caller: Caller = Depends(require_caller)
) -> AnswerResult | JSONResponse:
    """Answer one question in `collection` (the body's own `collection`, if any, is ignored)."""
    result = await asking(body, request, caller, collection).once(request)
    return client_closed() if result is None else result


_STREAM_RESPONSES = {
    200: {
        "content": {"text/event-stream": {}},
        "description": "rewrite, type, plan, aspect*, token* (citation*), abstained, unsourced, sources, answer, result (or error)",
    }
}


@router.post(
    "/v1/collections/{collection}/answer/stream",
    tags=["collections"],
    response_class=StreamingResponse,
    responses=_STREAM_RESPONSES,
)
async def answer_stream_in(
    collection: str, body: AnswerRequest, request: Request, caller: Caller = Depends(require_caller)
) -> StreamingResponse:
    """As /v1/answer/stream, in `collection`."""
    return asking(body, request, caller, collection).stream(ServerSentEvents())


@router.post("/v1/answer/stream", tags=["answer"], response_class=StreamingResponse, responses=_STREAM_RESPONSES)
async def answer_stream(
    body: AnswerRequest, request: Request, caller: Caller = Depends(require_caller)
) -> StreamingResponse:
    """Server-Sent Events, in order: `rewrite` (with history: the follow-up read alone), `type` (typed only),
    `plan` (decomposing types), `aspect` (each, as done),
    then the answer as it is written: `token` {text} pieces that concatenate to the answer, and `citation`
    {text, source_numbers, passage_ids} once each cited sentence is complete (`restart` {reason} means a
    failing typed plan handed over to plain RAG: drop the text so far; `abstained` {looked_for, reason, ...}
    when the documents do not answer); `unsourced` {sentences, covers, by, text} with knowledge = "labelled"
    when the model added what it knows, apart from the answer; then `sources`, `answer` {text}, `result` (the
    full AnswerResult).
    On failure the last event is `error` {status, message}."""
    return asking(body, request, caller, body.collection).stream(ServerSentEvents())


def asking(body: AnswerRequest, request: Request, caller: Caller, collection: str | None) -> Asking:
    """The request checked (422 naming what is wrong), in the pipeline of `collection` (4xx when the caller may not)."""
    service = service_of(request)
    question, forced = service.check(body.question, body.type)
    history = service.check_history(body.history)
    pipeline = service.pipeline_for(collection, caller) if body.method != "llm" or collection else service.pipeline
    return Asking(service, question, body.method, forced, history, pipeline, body.knowledge)
