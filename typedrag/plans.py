"""Validated plans, one per decomposing NFQ type. The same models are the JSON schemas sent to LLMs.

Cleaning happens in validators so every engine gets the same rules: strip, drop empties,
drop case-insensitive duplicates, cap at MAX_ASPECTS; what remains must still make a plan.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

MAX_ASPECTS = 5


def clean_phrases(values: Any, cap: int = MAX_ASPECTS) -> Any:
    """Strip, drop empty and duplicate strings, keep at most `cap`. Non-lists pass through to fail validation."""
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
    return kept[:cap]


Phrase = Annotated[str, Field(min_length=1, max_length=300)]


class ComparisonPlan(BaseModel):
    """What is compared, and to what end (it shapes the answer)."""

    purpose: Literal["difference", "similarity", "superiority"]
    items: list[Phrase] = Field(min_length=2, max_length=MAX_ASPECTS, description="the things compared, as specific phrases")

    @field_validator("purpose", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("items", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return clean_phrases(value)


class ExperiencePlan(BaseModel):
    """The topic and key entities used to rerank advice-style passages."""

    topic: Phrase
    keywords: list[Phrase] = Field(min_length=1, max_length=8)

    @field_validator("keywords", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return clean_phrases(value, cap=8)


class SubQueryPlan(BaseModel):
    """Single-aspect sub-queries for Reason (causes) and Instruction (steps) questions."""

    sub_queries: list[Phrase] = Field(min_length=2, max_length=MAX_ASPECTS)

    @field_validator("sub_queries", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return clean_phrases(value)


class Perspective(BaseModel):
    name: Phrase = Field(description="a short label for the viewpoint, e.g. 'supporters of X'")
    sub_query: Phrase = Field(description="a search query biased towards this viewpoint")


class DebatePlan(BaseModel):
    """The debated topic and 2-5 distinct perspectives, each with its own biased sub-query."""

    topic: Phrase
    perspectives: list[Perspective] = Field(min_length=2, max_length=MAX_ASPECTS)

    @field_validator("perspectives", mode="before")
    @classmethod
    def _dedupe(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        seen: set[str] = set()
        kept = []
        for item in value:
            name = item.get("name") if isinstance(item, dict) else None
            if isinstance(name, str):
                key = " ".join(name.split()).casefold()
                if not key or key in seen:
                    continue
                seen.add(key)
            kept.append(item)
        return kept[:MAX_ASPECTS]
