"""OpenAI-compatible `/v1/models` and `/v1/chat/completions`, so Open WebUI, the OpenAI SDKs and any
chat client can use typedrag as a "model".

The model name picks the method: `typedrag-typed`, `typedrag-rag`, `typedrag-llm`, or
`typedrag-typed:<type>` (e.g. `typedrag-typed:debate`, every routed type is listed in /v1/models) to
force the question type: a model name is the one field every chat client lets a user choose. The last
user message is the question and every message before it the conversation: a follow-up is read with
the earlier turns, and system (or developer) messages are instructions for the answer's writing.
The answer text ends with a plain "Sources:" list for clients that show only text (or "Nearest
passages, not an answer:" when the documents do not answer: `typedrag.abstained` is true). Such clients
often print to a terminal: the text's control characters and bidi overrides are shown as escapes,
`\\x1b`, as `typedrag ask` shows them. The full
AnswerResult (type, plan, aspects, sources, citations, LLM calls) travels in the extension field
`typedrag` of the response, or of the final chunk when streaming. While streaming, the answer's
text arrives as content deltas as it is written, and progress events travel as
`typedrag_event: {"event", "data"}` on chunks with an empty delta. `knowledge` in the request body ("documents" or
"labelled"; the OpenAI SDKs send it with `extra_body`) sets what the answer may hold for this request: with
"labelled", what the model adds from its own knowledge where the documents do not cover the question follows the
answer as a paragraph of its own, "Not from your documents: ...", with no citation (in the result's `unsourced`). A stream always carries the answer's
token usage, once: with `stream_options: {"include_usage": true}` in a last chunk with no choices, as
OpenAI sends it; without, on the chunk that says `finish_reason: "stop"` (LangChain's ChatOpenAI asks
only when `stream_usage=True`, yet reads usage from any chunk).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from typedrag.history import Turn
from typedrag.questions import QuestionError
from typedrag.result import KNOWLEDGE, AnswerResult
from typedrag.library import Caller, CollectionError
from typedrag.server.service import (
    CLIENT_CLOSED,
    SlotStream,
    api_error,
    error_body,
    errors_log,
    request_id_var,
    service_of,
)
from typedrag.server.auth import require_caller
from typedrag.text import for_terminal

MODELS = {"typedrag-typed": "typed", "typedrag-rag": "rag", "typedrag-llm": "llm"}
TYPED_PREFIX = "typedrag-typed:"  # + a route label forces the question type
# + a collection's name: Typed-RAG (typedrag:c) or plain RAG (typedrag-rag:c) in that collection
COLLECTION_MODELS = {"typedrag:": "typed", "typedrag-rag:": "rag"}
STARTED = int(time.time())

router = APIRouter(prefix="/v1", tags=["openai-compatible"])


class ChatMessage(BaseModel):
    """One chat message: the last user message is the question, the messages before it its conversation."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """An OpenAI chat-completions request; the model name picks the method (and may force a type)."""

    model_config = ConfigDict(extra="allow")  # temperature, max_tokens, ...: accepted and not used; see chat_completions

    model: str = Field(examples=["typedrag-typed"])
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None


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
    """The models the caller may use: those of the collections they may read, and the default collection's (the
    plain names) only when they may read it; typedrag-llm (no documents) always."""
    service = service_of(request)
    library = service.library
    try:
        library.get(None, caller)
        default_readable = True
    except CollectionError as error:  # 422: no default (several collections); asking without one says so
        default_readable = error.status == 422
    forced = [TYPED_PREFIX + label.lower() for label in service.pipeline.routes] if default_readable else []
    plain = list(MODELS) if default_readable else [name for name, method in MODELS.items() if method == "llm"]
    collections = [prefix + name for name in library.names(caller) for prefix in COLLECTION_MODELS]
    return {name: {"id": name, "object": "model", "created": STARTED, "owned_by": "typedrag"} for name in [*plain, *forced, *collections]}


def method_of(model: str) -> tuple[str, str | None, str | None]:
    """(method, forced type or None, collection or None) named by a model name; 404 for a name that is not ours."""
    if model.startswith(TYPED_PREFIX):
        return "typed", model[len(TYPED_PREFIX) :], None
    if model in MODELS:
        return MODELS[model], None, None
    for prefix, method in COLLECTION_MODELS.items():
        if model.startswith(prefix) and len(model) > len(prefix):
            return method, None, model[len(prefix) :]
    raise api_error(404, f"unknown model {model!r}; use one of: {', '.join(MODELS)}, {TYPED_PREFIX}<type>, "
                         f"or typedrag:<collection> / typedrag-rag:<collection>")


def brief_value(value: Any) -> str:
    """A client's value in an error message, short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def conversation_of(messages: list[ChatMessage]) -> tuple[str, list[Turn]]:
    """(the question: the last user message, the conversation before it). System and developer messages
    are instructions; other roles (tool results) and messages after the question are not part of it."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
    if last is None:
        raise api_error(400, "no user message: the last message with role 'user' is the question")
    roles = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
    history = [
        Turn(role=roles[m.role], content=text)
        for m in messages[:last]
        if m.role in roles and (text := _text_of(m))
    ]
    return _text_of(messages[last]), history


def _text_of(message: ChatMessage) -> str:
    if isinstance(message.content, list):
        texts = [part.get("text") for part in message.content if part.get("type") == "text"]
        if not all(isinstance(text, str) for text in texts):
            raise api_error(400, "a message part of type 'text' needs a string 'text'")
        return " ".join(texts)
    return message.content or ""


def with_sources(result: AnswerResult, show: int = 5) -> str:
    """The answer, what the model added from its own knowledge (labelled, apart), and the passages it cites (or
    the top few if it cites none), for text-only clients."""
    return for_terminal(result.reply) + sources_list(result, show)


def unsourced_text(unsourced: dict[str, Any]) -> str:
    """The labelled part as it follows the streamed answer: a paragraph of its own."""
    return "\n\n" + for_terminal(unsourced["text"])


def sources_list(result: AnswerResult, show: int = 5) -> str:
    """The "Sources:" list that ends the text ("Nearest passages, not an answer:" when it abstained), or nothing.
    Many chat clients print text to a terminal, and titles and passage ids come from file names: each source stays
    on one line, its controls and bidi overrides escaped."""
    cited = {n for c in result.citations for n in c.source_numbers}
    listed = [s for s in result.sources if s.number in cited] or result.sources[:show]
    if not listed:
        return ""
    lines = "\n".join(for_terminal(" ".join(f"- [{s.number}] {s.title} ({s.passage_id})".split())) for s in listed)
    heading = "Nearest passages, not an answer:" if result.abstained else "Sources:"
    return f"\n\n{heading}\n{lines}"


def usage(result: AnswerResult) -> dict[str, int]:
    """Tokens the pipeline spent on its own LLM calls for this answer."""
    u = result.usage
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    }


@router.post("/chat/completions", response_model=None)
async def chat_completions(
    body: ChatCompletionRequest, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any] | StreamingResponse | JSONResponse:
    """Chat completion, streamed as `data:` chunks ending in `data: [DONE]` when `stream` is true. The model
    `typedrag:<collection>` (or `typedrag-rag:<collection>`) answers in that collection."""
    service = service_of(request)
    method, type_, collection = method_of(body.model)
    extra = body.model_extra or {}
    n = extra.get("n")
    if n is not None and (type(n) is not int or n != 1):  # True == 1 == 1.0 in Python: only the integer 1 is 1
        raise api_error(400, "typedrag returns one choice per request: n must be 1")
    used_tools = [name for name in ("tools", "tool_choice", "functions", "function_call") if extra.get(name)]
    if used_tools:
        raise api_error(400, f"typedrag does not call tools: remove {', '.join(used_tools)} from the request")
    shape = extra.get("response_format")
    if shape is not None and shape != {"type": "text"}:
        kind = shape.get("type") if isinstance(shape, dict) else shape
        raise api_error(400, f"typedrag answers in text with its sources, so response_format {kind!r} cannot be honoured: "
                             "remove it (the structured result is the response's `typedrag` field)")
    knowledge = extra.get("knowledge")
    if knowledge is not None and knowledge not in KNOWLEDGE:
        raise api_error(400, f"knowledge must be one of {', '.join(KNOWLEDGE)} (got {brief_value(knowledge)})")
    forced = None
    if type_ is not None:  # a type in the model name that is not routed means an unknown model
        try:
            forced = service.pipeline.route_label(type_)
        except QuestionError as error:
            raise api_error(404, f"unknown model {body.model!r}: {error}") from error
    asked, conversation = conversation_of(body.messages)
    question, _ = service.check(asked, None, status=400)
    history = service.check_history(conversation, status=400)
    base = {"id": f"chatcmpl-{request_id_var.get()}", "created": int(time.time()), "model": body.model}
    try:
        pipeline = service.library.pipeline(collection, caller) if method != "llm" else service.pipeline
    except CollectionError as error:  # an unknown collection is an unknown model, as OpenAI clients read it
        raise api_error(404 if error.status == 404 else error.status, f"model {body.model!r}: {error.message}") from error
    service.slots.take()
    if not body.stream:
        try:
            result = await service.answer_unless_gone(request, question, method, forced, history, knowledge=knowledge, pipeline=pipeline)
        finally:
            service.slots.give()
        if result is None:
            return JSONResponse(error_body(CLIENT_CLOSED, "client closed the request"), CLIENT_CLOSED)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": with_sources(result)},
            "finish_reason": "stop",
        }
        return {
            **base,
            "object": "chat.completion",
            "choices": [choice],
            "usage": usage(result),
            "typedrag": result.model_dump(mode="json"),
        }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        data = {
            **base,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

    asked_for_usage = bool((body.stream_options or {}).get("include_usage"))

    async def stream() -> AsyncIterator[str]:
        yield chunk({"role": "assistant", "content": ""})
        streamed = False
        try:
            async for name, data in service.events(question, method, forced, history, knowledge=knowledge, pipeline=pipeline):
                if name == "ping":
                    yield ": ping\n\n"
                elif name == "token":
                    streamed = True
                    yield chunk({"content": for_terminal(data["text"])})
                elif name == "unsourced":  # the model's own part follows the answer in the text, labelled
                    streamed = True
                    yield chunk({"content": unsourced_text(data)}, typedrag_event={"event": name, "data": data})
                elif name == "restart":  # deltas cannot be taken back: say so in the text itself
                    yield chunk({"content": f"\n\n[{for_terminal(data['reason'])}]\n\n"}, typedrag_event={"event": name, "data": data})
                elif name != "result":
                    yield chunk({}, typedrag_event={"event": name, "data": data})
                else:
                    rest = sources_list(data) if streamed else with_sources(data)
                    if rest:
                        yield chunk({"content": rest})
                    if asked_for_usage:  # OpenAI's way: one more chunk, with no choices, holding the usage
                        yield chunk({}, "stop", typedrag=data.model_dump(mode="json"))
                        yield f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', 'choices': [], 'usage': usage(data)})}\n\n"
                    else:  # not asked (LangChain's ChatOpenAI asks only with stream_usage=True): on the last chunk
                        yield chunk({}, "stop", typedrag=data.model_dump(mode="json"), usage=usage(data))
        except HTTPException as error:
            yield f"data: {json.dumps(error_body(error.status_code, str(error.detail)))}\n\n"
        except Exception:
            errors_log.exception("stream failed")
            yield f"data: {json.dumps(error_body(500, f'internal error; request id {request_id_var.get()}'))}\n\n"
        yield "data: [DONE]\n\n"

    return SlotStream(stream(), service.slots)
