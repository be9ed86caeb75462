"""Tolerant parsing of model replies into pydantic objects.

Small local models wrap JSON in code fences, add a preamble, or emit a bare list where an
object was asked for. We recover what is unambiguous and let validation decide the rest.
Model output is data only: it is parsed with `json`, never evaluated.
"""

from __future__ import annotations

import json
import re
from itertools import islice
from typing import Any

from pydantic import BaseModel, ValidationError

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
        raise IncompleteJSON(f"the JSON value in the reply is incomplete: it stops after {len(text) - opening.start()} characters, before it is closed")
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
        parts = [f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg'].removeprefix('Value error, ')}" for e in error.errors()[:5]]
        return "; ".join(parts)
    return str(error)
