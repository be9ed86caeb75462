"""Saved conversations and feedback over HTTP (/v1/conversations, /v1/messages/{id}/feedback): a signed-in user's
own conversations, listed a page at a time, searched, reopened with every answer's result and trace, renamed,
deleted and exported (Markdown, JSON); questions asked in one, each read against its history as the page sends
it; a verdict on each answer. Another user's conversation or answer is a 404, as if it did not exist.

The history a follow-up is read with is the conversation's stored turns cut to the window the page used to send
(`window_of`: the latest 20 turns, 4,000 characters each, 96 KB in all, starting with a question), so a question
asked in a reopened conversation is answered exactly as if the page had kept it in memory.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from typedrag.history import Turn
from typedrag.library import Caller
from typedrag.result import AnswerResult
from typedrag.server.answering import Asking, client_closed
from typedrag.server.auth import in_store, require_caller
from typedrag.server.error_bodies import api_error
from typedrag.server.logs import log, request_id_var
from typedrag.server.routes.native import ServerSentEvents
from typedrag.server.service import Service, service_of
from typedrag.store import Conversation, Feedback, Message, StoreError, StoreUnavailable, User

WINDOW_TURNS = 20  # as the page's windowOf (typedrag/server/static/app.js)
TURN_CHARS = 4000
WINDOW_BYTES = 96 * 1024

router = APIRouter(tags=["conversations"])


class NewConversation(BaseModel):
    """A conversation to start: the collection it asks in (default: the one a question naming none is asked in)."""

    collection: str | None = None
    title: str = Field("", description="empty: the first question becomes the title")


class Rename(BaseModel):
    """A conversation's new title (what the list shows and the search reads)."""

    title: str


class Question(BaseModel):
    """A question asked in a saved conversation: read with the conversation so far, answered in its collection."""

    question: str = Field(examples=["And why does that matter?"])
    method: Literal["typed", "rag", "llm"] = "typed"
    type: str | None = Field(None, description="Force the question type, e.g. comparison; default: classify it")
    knowledge: Literal["documents", "labelled"] | None = Field(
        None, description="documents or labelled (the model's own knowledge, apart); default: the server's setting"
    )


class Verdict(BaseModel):
    """A verdict on an answer: up or down, a comment, and the passages (of its sources) that helped."""

    verdict: Literal["up", "down"]
    comment: str = ""
    helpful: list[str] = Field([], description="passage ids, among the answer's sources, that helped")


def window_of(turns: list[Turn]) -> list[Turn]:
    """The turns the page sends with a question (its windowOf): the latest ones within the bounds above, each cut
    to TURN_CHARS, starting with a question."""
    sent: list[Turn] = []
    size = 2
    for turn in reversed(turns):
        if len(sent) >= WINDOW_TURNS:
            break
        kept = Turn(role=turn.role, content=turn.content[:TURN_CHARS])
        bytes_ = (
            len(
                json.dumps(
                    {"role": kept.role, "content": kept.content}, ensure_ascii=False, separators=(",", ":")
                ).encode()
            )
            + 1
        )
        if size + bytes_ > WINDOW_BYTES:
            break
        size += bytes_
        sent.insert(0, kept)
    while sent and sent[0].role != "user":
        sent.pop(0)
    return sent


def trace_id() -> str:
    """The id an answer is found by in the traces: its OpenTelemetry trace's when tracing is on, else the request id
    its log lines carry."""
    try:
        from opentelemetry import trace
    except ImportError:
        return request_id_var.get()
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else request_id_var.get()


def _account(request: Request, caller: Caller) -> tuple[Service, Any, User]:
    service = service_of(request)
    if service.store is None:
        raise api_error(409, "this server keeps no conversations: start it with --data DIR or --database URL")
    if caller.user is None:
        raise api_error(
            403, "conversations are kept for accounts: sign in with a user's key (`typedrag users add NAME --key`)"
        )
    return service, service.store, caller.user


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": conversation.id,
        "collection": conversation.collection,
        "title": conversation.title,
        "created_at": conversation.created_at.isoformat(),
        "updated_at": conversation.updated_at.isoformat(),
    }


def message_json(message: Message) -> dict[str, Any]:
    return {
        "id": message.id,
        "role": message.role,
        "text": message.text,
        "created_at": message.created_at.isoformat(),
        "trace_id": message.trace_id,
        "method": message.method,
        "type": message.type,
        "strategy": message.strategy,
        "result": message.result,
    }


def feedback_json(given: Feedback | None) -> dict[str, Any] | None:
    if given is None:
        return None
    return {
        "id": given.id,
        "message_id": given.message_id,
        "verdict": given.verdict,
        "comment": given.comment,
        "helpful": list(given.helpful),
        "updated_at": given.updated_at.isoformat(),
    }


@router.get("/v1/conversations")
async def list_conversations(
    request: Request,
    collection: str | None = None,
    search: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
    caller: Caller = Depends(require_caller),
) -> dict[str, Any]:
    """The caller's conversations, newest first, `limit` (at most 200) a page: `next_cursor` asks for the next page
    (null: this was the last). `search` finds a phrase in titles and messages; `collection` keeps one collection's."""
    _, store, user = _account(request, caller)
    page = await in_store(store.conversations, user, collection=collection, search=search, limit=limit, cursor=cursor)
    return {"conversations": [conversation_json(c) for c in page.items], "next_cursor": page.next_cursor}


@router.post("/v1/conversations", status_code=201)
async def start_conversation(
    body: NewConversation, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any]:
    """A new conversation in a collection the caller may read (404 for one they may not, as for one that is absent)."""
    service, store, user = _account(request, caller)
    collection = service.library.get(body.collection, caller).name
    return conversation_json(await in_store(store.start_conversation, user, collection, body.title))


@router.get("/v1/conversations/{conversation_id}")
async def get_conversation(
    conversation_id: str, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any]:
    """One conversation with every message: the questions, and the answers with their full result (citations,
    sources, the trace) and the caller's verdict on each."""
    _, store, user = _account(request, caller)
    return await in_store(store.export_json, user, conversation_id)


@router.patch("/v1/conversations/{conversation_id}")
async def rename_conversation(
    conversation_id: str, body: Rename, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any]:
    _, store, user = _account(request, caller)
    return conversation_json(await in_store(store.rename_conversation, user, conversation_id, body.title))


@router.delete("/v1/conversations/{conversation_id}")
async def delete_conversation(
    conversation_id: str, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any]:
    """Gone from the caller's list at once; its messages and feedback are removed by the next purge."""
    _, store, user = _account(request, caller)
    await in_store(store.delete_conversation, user, conversation_id)
    return {"deleted": conversation_id}


@router.get("/v1/conversations/{conversation_id}/export", response_class=Response)
async def export_conversation(
    conversation_id: str,
    request: Request,
    format: Literal["markdown", "json"] = "markdown",
    caller: Caller = Depends(require_caller),
) -> Response:
    """The conversation as a file: Markdown (each question, its answer, the sentences cited, the sources) or JSON
    (every message, each answer's full result with its trace, the caller's verdicts)."""
    _, store, user = _account(request, caller)
    conversation = await in_store(store.conversation, user, conversation_id)
    name = (re.sub(r"[^A-Za-z0-9]+", "-", conversation.title).strip("-")[:60] or "conversation").lower()
    if format == "json":
        body = json.dumps(await in_store(store.export_json, user, conversation_id), ensure_ascii=False, indent=1)
        kind, suffix = "application/json", "json"
    else:
        body = await in_store(store.export_markdown, user, conversation_id)
        kind, suffix = "text/markdown; charset=utf-8", "md"
    return Response(
        body,
        media_type=kind,
        headers={
            "Content-Disposition": f'attachment; filename="typedrag-{name}.{suffix}"',
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )


async def _prepared(
    conversation_id: str, body: Question, request: Request, caller: Caller
) -> tuple[Any, User, Conversation, Asking]:
    """The store, the user, the conversation and the question asked in it, checked and read with its history."""
    service, store, user = _account(request, caller)
    question, forced = service.check(body.question, body.type)
    conversation, turns = await in_store(store.conversation_with_history, user, conversation_id)
    history = service.check_history(window_of(turns))
    pipeline = service.pipeline_for(conversation.collection, caller)
    return store, user, conversation, Asking(service, question, body.method, forced, history, pipeline, body.knowledge)


@router.post("/v1/conversations/{conversation_id}/answer", response_model=None)
async def answer_in_conversation(
    conversation_id: str, body: Question, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any] | JSONResponse:
    """Ask in a saved conversation: the answer (its full result in `answer.result`), read with the conversation so
    far, kept in it with the question (both or neither)."""
    store, user, conversation, asking = await _prepared(conversation_id, body, request, caller)
    traced = trace_id()
    result = await asking.once(request)
    if result is None:
        return client_closed()
    asked, answered, kept = await in_store(
        store.add_exchange, user, conversation.id, asking.question, result.answer, result=result, trace_id=traced
    )
    return {"conversation": conversation_json(kept), "question": message_json(asked), "answer": message_json(answered)}


@router.post("/v1/conversations/{conversation_id}/answer/stream", response_class=StreamingResponse)
async def answer_stream_in_conversation(
    conversation_id: str, body: Question, request: Request, caller: Caller = Depends(require_caller)
) -> Response:
    """As /v1/answer/stream, in a saved conversation; after `result`, `saved` {conversation, question, answer} (the
    messages' ids: the answer's is what feedback is given on), or `error` when it could not be kept."""
    store, user, conversation, asking = await _prepared(conversation_id, body, request, caller)
    traced = trace_id()

    async def save(result: AnswerResult) -> list[tuple[str, Any]]:
        try:
            asked, answered, kept = await in_store(
                store.add_exchange,
                user,
                conversation.id,
                asking.question,
                result.answer,
                result=result,
                trace_id=traced,
            )
        except (StoreError, StoreUnavailable) as error:
            log.warning("an answer was not saved", extra={"fields": {"error": str(error)}})
            return [
                (
                    "error",
                    {
                        "status": 503,
                        "message": "the answer was not saved: the store is unavailable; see the server log",
                    },
                )
            ]
        return [("saved", {"conversation": conversation_json(kept), "question": asked.id, "answer": answered.id})]

    return asking.stream(ServerSentEvents(), save)


@router.post("/v1/messages/{message_id}/feedback")
async def give_feedback(
    message_id: int, body: Verdict, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any]:
    """The caller's verdict on one of their answers (a second replaces the first): up or down, an optional comment,
    and the passages among its sources that helped. Kept with the question, answer, sources, type and trace id."""
    _, store, user = _account(request, caller)
    given = await in_store(store.give_feedback, user, message_id, body.verdict, body.comment, body.helpful)
    log.info(
        "feedback",
        extra={"fields": {"verdict": given.verdict, "helpful": len(given.helpful), "comment": bool(given.comment)}},
    )
    return feedback_json(given) or {}


@router.get("/v1/messages/{message_id}/feedback")
async def get_feedback(message_id: int, request: Request, caller: Caller = Depends(require_caller)) -> dict[str, Any]:
    """The caller's verdict on one of their answers (`feedback` null: none given yet)."""
    _, store, user = _account(request, caller)
    await in_store(store.answer, user, message_id)
    return {"feedback": feedback_json(await in_store(store.feedback_on, user, message_id))}
