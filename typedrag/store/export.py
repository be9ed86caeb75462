"""A saved conversation as a file: Markdown to read or share (each answer with its cited sentences and sources),
JSON to keep or inspect (every message, each answer's full result with its trace, and the owner's verdicts)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ValidationError

from typedrag.result import Source
from typedrag.store.records import Conversation, Feedback, Message

JSON_FORMAT = "typedrag-conversation/1"
EXCERPT_CHARS = 400  # of each source's passage in the Markdown


def conversation_json(
    conversation: Conversation, messages: list[Message], verdicts: dict[int, Feedback | None], *, exported_at: datetime
) -> dict[str, Any]:
    def one(message: Message) -> dict[str, Any]:
        item: dict[str, Any] = {
            "id": message.id,
            "role": message.role,
            "text": message.text,
            "created_at": message.created_at.isoformat(),
        }
        if message.role == "assistant":
            given = verdicts.get(message.id)
            item.update(
                trace_id=message.trace_id,
                method=message.method,
                type=message.type,
                strategy=message.strategy,
                result=message.result,
                feedback=None
                if given is None
                else {
                    "verdict": given.verdict,
                    "comment": given.comment,
                    "helpful": list(given.helpful),
                    "updated_at": given.updated_at.isoformat(),
                },
            )
        return item

    return {
        "format": JSON_FORMAT,
        "exported_at": exported_at.isoformat(),
        "conversation": {
            "id": conversation.id,
            "collection": conversation.collection,
            "title": conversation.title,
            "created_at": conversation.created_at.isoformat(),
            "updated_at": conversation.updated_at.isoformat(),
        },
        "messages": [one(m) for m in messages],
    }


def conversation_markdown(conversation: Conversation, messages: list[Message]) -> str:
    lines = [
        f"# {_one_line(conversation.title) or 'Conversation'}",
        "",
        f"Collection `{_one_line(conversation.collection)}` · started {conversation.created_at:%Y-%m-%d %H:%M} UTC · "
        f"last {conversation.updated_at:%Y-%m-%d %H:%M} UTC",
    ]
    for message in messages:
        if message.role == "user":
            lines += ["", "## Question", "", message.text]
        elif message.role == "system":
            lines += ["", "## Instructions", "", message.text]
        else:
            lines += ["", *_answer(message)]
    return "\n".join(lines).rstrip() + "\n"


def _answer(message: Message) -> list[str]:
    result = message.result or {}
    facts = [
        f"type {message.type}" if message.type else "",
        f"strategy {message.strategy}" if message.strategy else "",
        f"method {message.method}" if message.method else "",
        f"engine {_engine(result)}" if _engine(result) else "",
    ]
    lines = ["## Answer", ""]
    described = " · ".join(f for f in facts if f)
    if described:
        lines += [f"*{described}*", ""]
    lines.append(message.text or result.get("answer", ""))
    citations = [c for c in result.get("citations") or [] if isinstance(c, dict)]
    if citations:
        lines += ["", "### Citations", ""]
        for citation in citations:
            marks = ", ".join(f"[{n}]" for n in citation.get("source_numbers") or [])
            ids = ", ".join(f"`{p}`" for p in citation.get("passage_ids") or [])
            lines.append(f"- {_one_line(citation.get('text', ''))} {marks} ({ids})")
    sources = [s for s in result.get("sources") or [] if isinstance(s, dict)]
    if sources:
        lines += ["", "### Sources", ""]
        for raw in sources:
            lines += _source(raw)
    if message.trace_id:
        lines += ["", f"Trace id: `{message.trace_id}`"]
    return lines


def _source(raw: dict[str, Any]) -> list[str]:
    try:
        source = Source.model_validate(raw)
        number, where, passage, text = source.number, source.where, source.passage_id, source.text
    except ValidationError:  # a result saved by another version: what can be read of it
        number, where, passage, text = (
            raw.get("number", "?"),
            raw.get("title", ""),
            raw.get("passage_id", ""),
            raw.get("text", ""),
        )
    link = raw.get("link") or raw.get("url")
    name = (
        f"[{_one_line(str(where)) or passage}]({link})"
        if isinstance(link, str) and link
        else f"**{_one_line(str(where)) or passage}**"
    )
    excerpt = _one_line(str(text))
    if len(excerpt) > EXCERPT_CHARS:
        excerpt = excerpt[:EXCERPT_CHARS].rsplit(" ", 1)[0] + " …"
    return [f"{number}. {name} (`{passage}`)", f"   > {excerpt}" if excerpt else ""]


def _engine(result: dict[str, Any]) -> str:
    engines = result.get("engines")
    return str(engines.get("generator", "")) if isinstance(engines, dict) else ""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
