"""Tolerant parsing of model replies into pydantic objects.

Small local models wrap JSON in code fences, add a preamble, or emit a bare list where an
object was asked for. We recover what is unambiguous and let validation decide the rest.
Model output is data only: it is parsed with `json`, never evaluated.

`validated` is the one validate-then-repair step every chat model shares (the OpenAI client and the
framework adapters in typedrag.integrations): check the reply, ask once more with the error shown,
and record the outcome on the call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from itertools import islice
from typing import Any

from pydantic import BaseModel, ValidationError

from typedrag.llm.base import LLMCall, Message, StructuredOutcome

REPAIR_INSTRUCTION = (
    "Your previous reply could not be used: {error}. Reply again with only a JSON value that "
    "matches this JSON schema, with no other text:\n{schema}"
)
REPLY_CHARS = 600  # of a structured reply that did not validate, kept in the trace
REPAIR_EXCERPT_CHARS = 4_000  # of the rejected reply, shown to the model in the repair request

Checked = tuple[bool, Any]  # (usable, the parsed object, or the error that made the reply unusable)
Ask = Callable[[list[Message]], Awaitable[tuple[str, Checked]]]  # one request: the reply and its check

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_OPENING = re.compile(r"[\[{]")
MAX_ATTEMPTS = 50  # opening brackets tried per candidate: a runaway reply full of brackets stays cheap


class IncompleteJSON(ValueError):
    """The reply opens a JSON value and ends before closing it: cut off, usually at the token limit."""


def extract_json(text: str) -> Any:
    """The first JSON value in `text` (fenced or not); raises ValueError when there is none
    (`IncompleteJSON` when one is opened and never closed)."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for match in islice(_OPENING.finditer(candidate), MAX_ATTEMPTS):
            try:
                value, _ = decoder.raw_decode(candidate, match.start())
            except (json.JSONDecodeError, RecursionError):  # RecursionError: nesting deeper than the parser's stack
                continue
            return value
    opening = _OPENING.search(text)
    if opening is not None and _unclosed(text, opening.start()):
        raise IncompleteJSON(
            f"the JSON value in the reply is incomplete: it stops after {len(text) - opening.start()} characters, before it is closed"
        )
    raise ValueError("no JSON object or list found in the reply")


def _unclosed(text: str, start: int) -> bool:
    """True when the brackets opened from `start` are still open at the end of `text` (strings skipped)."""
    depth, in_string, escaped = 0, False, False
    for char in text[start:]:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
            continue
        if char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return False
    return depth > 0


def parse_structured(text: str, schema: type[BaseModel]) -> BaseModel:
    """Validate a reply against `schema`; a bare list fills the schema's only list field."""
    value = extract_json(text)
    if isinstance(value, list):
        list_fields = [name for name, f in schema.model_fields.items() if _is_list(f.annotation)]
        if len(list_fields) == 1:
            value = {list_fields[0]: value}
    return schema.model_validate(value)


def _is_list(annotation: Any) -> bool:
    return getattr(annotation, "__origin__", None) is list


def describe_error(error: Exception) -> str:
    """A short, model-readable reason a reply was rejected."""
    if isinstance(error, ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg'].removeprefix('Value error, ')}"
            for e in error.errors()[:5]
        ]
        return "; ".join(parts)
    return str(error)


def validator(schema: type[BaseModel]) -> Callable[[str], Checked]:
    """A reply check for `schema`: (True, the parsed object) or (False, the error)."""

    def usable(text: str) -> Checked:
        try:
            return True, parse_structured(text, schema)
        except ValueError as error:  # pydantic.ValidationError is a ValueError
            return False, error

    return usable


async def validated(
    ask: Ask, messages: list[Message], schema: type[BaseModel], max_tokens: int, call: LLMCall
) -> tuple[BaseModel | None, str]:
    """(the validated object or None, the last reply): one request, and if its reply does not validate,
    ONE repair request that shows the model its reply and the error. The outcome, the rejected reply
    and the reason go on `call`; a None object means the caller falls back and the trace says why."""
    text, (ok, value) = await ask(messages)
    if ok:
        call.structured = StructuredOutcome.OK
        return value, text
    reason = why_unusable(value, max_tokens, call)
    call.reply = short(text, REPLY_CHARS)
    repair: list[Message] = [
        *messages,
        {"role": "assistant", "content": excerpt(text)},
        {"role": "user", "content": REPAIR_INSTRUCTION.format(error=reason, schema=schema_text(schema))},
    ]
    text, (ok, value) = await ask(repair)
    if ok:
        call.structured = StructuredOutcome.REPAIRED
        return value, text
    call.structured = StructuredOutcome.FAILED
    call.reply = short(text, REPLY_CHARS)
    call.error = (
        f"invalid structured output after one repair: {why_unusable(value, max_tokens, call)} (first: {reason})"
    )
    return None, text


def why_unusable(error: Exception, max_tokens: int, call: LLMCall) -> str:
    """What was wrong with a structured reply, in words the model (and the trace's reader) can act on."""
    reason = describe_error(error)
    if call.finish_reason == "length":
        return f"the reply was cut off at the {max_tokens}-token limit ({reason}); reply with a shorter JSON value"
    return reason


def excerpt(reply: str, limit: int = REPAIR_EXCERPT_CHARS) -> str:
    """What a repair request shows the model of its own reply: all of it up to `limit` characters, else its
    opening and its end (where JSON is left open or cut off), never megabytes sent back whole."""
    if len(reply) <= limit:
        return reply
    half = limit // 2
    return f"{reply[:half]}\n[... {len(reply) - 2 * half:,} characters left out ...]\n{reply[-half:]}"


def short(text: str, limit: int = 300) -> str:
    """`text` on one line, cut to `limit` characters."""
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


def schema_text(schema: type[BaseModel]) -> str:
    """The schema as compact JSON, for a repair prompt."""
    return json.dumps(schema.model_json_schema(), separators=(",", ":"))
