"""OpenAI-compatible `/v1/models` and `/v1/chat/completions`, so Open WebUI, the OpenAI SDKs and any chat client can
use typedrag as a "model": a model name is the one field every chat client lets a user choose, so it picks the
method, a forced type or a collection (typedrag.server.openai_format, which also writes the answer as OpenAI's
clients read it). While streaming, the answer's text arrives as content deltas as it is written. `knowledge` in the
request body ("documents" or "labelled"; the OpenAI SDKs send it with `extra_body`) sets what the answer may hold for
this request: with "labelled", what the model adds from its own knowledge where the documents do not cover the
question follows the answer as a paragraph of its own, "Not from your documents: ...", with no citation.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from typedrag.library import Caller, CollectionError
from typedrag.questions import QuestionError
from typedrag.server.answering import Asking, client_closed
from typedrag.server.auth import require_caller
from typedrag.server.error_bodies import api_error
from typedrag.server.logs import request_id_var
from typedrag.server.openai_format import (
    ChatCompletionRequest,
    Chunks,
    completion,
    conversation_of,
    knowledge_of,
    method_of,
    model_entry,
    model_names,
)
from typedrag.server.service import service_of

STARTED = int(time.time())

router = APIRouter(prefix="/v1", tags=["openai-compatible"])


@router.get("/models")
async def models(request: Request, caller: Caller = Depends(require_caller)) -> dict[str, Any]:
    """typedrag-typed (Typed-RAG), typedrag-rag (plain RAG), typedrag-llm (LLM only), and
    typedrag-typed:<type> for each question type (Typed-RAG with that type forced); typedrag:<c> and
    typedrag-rag:<c> for each collection the caller may read."""
    return {"object": "list", "data": list(_models(request, caller).values())}


@router.get("/models/{model_id}")
async def model(model_id: str, request: Request, caller: Caller = Depends(require_caller)) -> dict[str, Any]:
    """One model of the list, as OpenAI's `models.retrieve` reads it; 404 for a name that is not ours."""
    found = _models(request, caller).get(model_id)
    if found is None:
        raise api_error(404, f"unknown model {model_id!r}; GET /v1/models lists them")
    return found


def _models(request: Request, caller: Caller) -> dict[str, dict[str, Any]]:
    """The models the caller may use; the default collection's (the plain names) only when they may read it."""
    service = service_of(request)
    library = service.library
    try:
        library.get(None, caller)
        default_readable = True
    except CollectionError as error:  # 422: no default (several collections); asking without one says so
        default_readable = error.status == 422
    names = model_names(list(service.pipeline.routes), library.names(caller), default_readable)
    return {name: model_entry(name, STARTED) for name in names}


@router.post("/chat/completions", response_model=None)
async def chat_completions(
    body: ChatCompletionRequest, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any] | StreamingResponse | JSONResponse:
    """Chat completion, streamed as `data:` chunks ending in `data: [DONE]` when `stream` is true. The model
    `typedrag:<collection>` (or `typedrag-rag:<collection>`) answers in that collection."""
    asking = _asking(body, request, caller)
    base = {"id": f"chatcmpl-{request_id_var.get()}", "created": int(time.time()), "model": body.model}
    if body.stream:
        return asking.stream(Chunks(base, asked_for_usage=bool((body.stream_options or {}).get("include_usage"))))
    result = await asking.once(request)
    return client_closed() if result is None else completion(base, result)


def _asking(body: ChatCompletionRequest, request: Request, caller: Caller) -> Asking:
    """The request checked, 400 or 404 naming what is wrong: an unknown model (a type that is not routed, a
    collection the caller may not read), what typedrag cannot honour, no question."""
    service = service_of(request)
    method, type_, collection = method_of(body.model)
    knowledge = knowledge_of(body.model_extra or {})
    forced = None
    if type_ is not None:  # a type in the model name that is not routed means an unknown model
        try:
            forced = service.pipeline.route_label(type_)
        except QuestionError as error:
            raise api_error(404, f"unknown model {body.model!r}: {error}") from error
    asked, conversation = conversation_of(body.messages)
    question, _ = service.check(asked, None, status=400)
    history = service.check_history(conversation, status=400)
    try:
        pipeline = service.library.pipeline(collection, caller) if method != "llm" else service.pipeline
    except CollectionError as error:  # an unknown collection is an unknown model, as OpenAI clients read it
        raise api_error(
            404 if error.status == 404 else error.status, f"model {body.model!r}: {error.message}"
        ) from error
    return Asking(service, question, method, forced, history, pipeline, knowledge)
