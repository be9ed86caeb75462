"""The role interface every engine implements, and the trace steps write into."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeVar

from pydantic import BaseModel

from typedrag.llm.base import LLMCall
from typedrag.nfq import NFQType
from typedrag.result import Fallback, Source

PlanT = TypeVar("PlanT", bound=BaseModel)


class AnswerStyle(StrEnum):
    DIRECT = "direct"  # plain RAG / evidence-based
    COMPARISON = "comparison"
    EXPERIENCE = "experience"
    ASPECT = "aspect"  # one sub-query of a reason/instruction question
    PERSPECTIVE = "perspective"  # one side of a debate


@dataclass
class AnswerRequest:
    question: str
    sources: list[Source]
    style: AnswerStyle = AnswerStyle.DIRECT
    focus: str = ""  # sub-query, perspective name, or experience topic
    query: str = ""  # the aspect's retrieval query (a perspective's biased wording), for extractive selection
    items: list[str] = field(default_factory=list)  # comparison items
    purpose: str = ""  # comparison purpose


@dataclass
class PartialAnswer:
    """One aspect's answer handed to the aggregator or mediator."""

    label: str
    text: str


@dataclass
class Trace:
    """What a question's steps did: model calls and recorded degradations. Shared by concurrent steps."""

    calls: list[LLMCall] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)

    def fallback(self, step: str, reason: str) -> None:
        self.fallbacks.append(Fallback(step=step, reason=reason))


class PlanFailed(Exception):
    """The engine could not produce a valid plan (after its one repair attempt)."""


class Engine(Protocol):
    name: str

    async def plan(self, question: str, kind: NFQType, schema: type[PlanT], trace: Trace) -> PlanT:
        """A validated plan for `kind`, or PlanFailed with the reason."""
        ...

    async def answer(self, request: AnswerRequest, trace: Trace, *, role: str = "answer") -> str:
        """An answer grounded in `request.sources`, citing them as [n]."""
        ...

    async def answer_closed_book(self, question: str, trace: Trace) -> str:
        """The LLM-only baseline: an answer with no retrieval."""
        ...

    async def combine(
        self, question: str, kind: NFQType, parts: list[PartialAnswer], trace: Trace, *, topic: str = ""
    ) -> str:
        """Aggregate (reason, instruction) or mediate (debate) per-aspect answers into one answer."""
        ...
