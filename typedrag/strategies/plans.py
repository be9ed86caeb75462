"""Validation shared by every plan schema: short phrases, clean lists, and limits a decoder can hold to.

The JSON schema sent to a model carries `maxItems` and `maxLength` for every list and phrase, so a
server with constrained decoding (llama.cpp, vLLM, Ollama, OpenAI) cannot run a list on until its
token limit. Validation itself is tolerant of length, strict about shape:
- a list longer than the limit still validates (a model with no grammar that names seven items has
  not failed); the strategy keeps the first MAX_ASPECTS and records what it dropped;
- a phrase that is a paragraph, an answer or code (several sentences, a line break, a code fence, well
  over its length) is rejected, with a message the repair prompt passes on verbatim.
Cleaning happens in validators so every engine gets the same rules: strip, drop empties, drop
case-insensitive duplicates.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from typedrag.steps import Flow, Note

MAX_ASPECTS = 5
QUERY_CHARS = 100  # a search query: a short phrase
NAME_CHARS = 60  # an item, a viewpoint, a keyword: a name
# What validation lets through: half again what a decoder is held to (a model with no grammar may run a little
# long), which a paragraph, an answer or a code listing still exceeds.
SLACK = 1.5
_SENTENCE_BREAK = re.compile(r"[.!?]\s+[A-Z]")


def _phrase(chars: int, what: str):
    def check(text: str) -> str:
        text = text.strip()
        if "```" in text or "\n" in text:
            raise ValueError(f"{what} must be one line of plain words, not code or a list")
        if len(text) > SLACK * chars:
            raise ValueError(
                f"{what} must be a short phrase of at most {chars} characters, not a paragraph or an answer "
                f"(this one has {len(text)})"
            )
        if _SENTENCE_BREAK.search(text):
            raise ValueError(f"{what} must be a single phrase, not several sentences")
        return text

    return check


Query = Annotated[
    str,
    Field(min_length=1, json_schema_extra={"maxLength": QUERY_CHARS}),
    AfterValidator(_phrase(QUERY_CHARS, "a search query")),
]
Name = Annotated[
    str,
    Field(min_length=1, json_schema_extra={"maxLength": NAME_CHARS}),
    AfterValidator(_phrase(NAME_CHARS, "a name")),
]


def aspect_list(description: str, *, at_least: int = 2, at_most: int = MAX_ASPECTS, accept: int | None = None) -> Any:
    """A list field whose schema asks decoders for `at_least` to `at_most` items; validation accepts `accept`
    (default `at_least`) or more, after duplicates are dropped."""
    return Field(
        min_length=accept or at_least,
        description=description,
        json_schema_extra={"minItems": at_least, "maxItems": at_most},
    )


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
        text = re.sub(r"[ \t]+", " ", value).strip(" \n.;,")  # line breaks stay, for the shape check to see
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            kept.append(text)
    return kept


def keep_at_most(values: list, cap: int, what: str, step: str) -> Flow[list]:
    """The first `cap` values; any beyond are dropped and the drop is recorded in the trace."""
    if len(values) > cap:
        dropped = ", ".join(str(getattr(v, "name", v)) for v in values[cap:])
        yield Note(step, f"{len(values)} {what} planned, the first {cap} kept; dropped: {dropped}")
    return values[:cap]
