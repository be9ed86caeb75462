"""Validation shared by every plan schema: clean phrase lists, and cap them visibly.

Cleaning happens in validators so every engine gets the same rules: strip, drop empties, drop
case-insensitive duplicates. Lists are not capped by the schema (a model that names seven items
has not failed); the strategy keeps the first MAX_ASPECTS and records what it dropped.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from typedrag.engines.base import Trace

MAX_ASPECTS = 5

Phrase = Annotated[str, Field(min_length=1, max_length=300)]


def clean_phrases(values: Any) -> Any:
    """Strip, drop empty and duplicate strings. Non-lists pass through to fail validation."""
    if not isinstance(values, list):
        return values
    seen: set[str] = set()
    kept: list[Any] = []
    for value in values:
        if not isinstance(value, str):
            kept.append(value)  # let pydantic reject it with a precise message
            continue
        text = " ".join(value.split()).strip(" .;,")
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            kept.append(text)
    return kept


def keep_at_most(values: list, cap: int, what: str, step: str, trace: Trace) -> list:
    """The first `cap` values; any beyond are dropped and the drop is recorded in the trace."""
    if len(values) > cap:
        dropped = ", ".join(str(getattr(v, "name", v)) for v in values[cap:])
        trace.fallback(step, f"{len(values)} {what} planned, the first {cap} kept; dropped: {dropped}")
    return values[:cap]
