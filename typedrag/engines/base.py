"""What a strategy asks an engine to do, and the trace every step writes into.

A strategy hands over a `PlanTask` (its role, prompt and schema) or a `WriteTask` (its role, prompt,
the prompt's values, the passages or partial answers). The LLM engine fills the prompt; the offline
engine looks the role up among its own planners and extractive recipes (typedrag/engines/offline/).
A route added from outside typedrag may bring its own offline planner (`PlanTask.offline`) and recipe
(`WriteTask.extract`, in the `Section`/`Extract` terms below); without them the offline engine uses
its generic recipe, so a new type needs no engine change.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

from typedrag.prompts import Prompt
from typedrag.result import Source, Trace

__all__ = ["Engine", "Extract", "Part", "PlanT", "PlanTask", "Section", "TextSink", "Trace", "WriteTask", "sentence_pieces", "trimmed"]

PlanT = TypeVar("PlanT", bound=BaseModel)
TextSink = Callable[[str], None]  # hears a step's text piece by piece as it is written
_PIECE_END = re.compile(r"(?<=[.!?\]])[ \t]+(?!\[)|\n+")


@dataclass(frozen=True)
class PlanTask(Generic[PlanT]):
    """A structured step: the LLM engine fills `prompt` as `schema`; the offline engine plans by `role`.

    The prompt may use `{question}` and `{reply_format}` (generated from the schema). `offline`, for a
    route the offline engine does not know, returns a plan or raises ValueError when it does not apply.
    """

    role: str  # "plan:<type>"
    prompt: Prompt
    schema: type[PlanT]
    offline: Callable[[str], PlanT] | None = None


@dataclass
class Part:
    """One aspect's answer handed to an aggregator or mediator."""

    label: str
    text: str
    query: str = ""  # what the aspect was about; the offline engine selects its sentences by it


@dataclass(frozen=True)
class Section:
    """One part of an extractive answer: sentences about `query`, optionally from some groups only.

    `shape` favours sentences of the right shape (a cause, a step, a stance); with `shape_only` no other
    sentence is taken, so a section with none of its shape adds nothing rather than the nearest sentence.
    A group is a passage number when writing from sources, a part index when combining partial answers.
    """

    query: str
    label: str = ""
    sentences: int = 2
    shape: re.Pattern[str] | None = None
    shape_only: bool = False
    groups: frozenset[int] | None = None
    in_order: bool = False  # keep the sentences in text order (steps), not in order of relevance
    optional: bool = False  # left out when nothing fits; otherwise a labelled section says so
    max_words: int | None = None  # longer sentences only when there is no shorter one (an added point, not a run-on)
    about: tuple[str, ...] = ()  # things a sentence must name (two of them, if several), itself or by its article's title
    subject: bool = False  # ...as what the sentence is about: it opens the sentence, not a list or a phrase ("of X")
    verbatim: bool = False  # every sentence of its groups as written, in order (a lead chosen already)
    lead: bool = False  # plain RAG's answer from the question's own passages (`WriteTask.question_sources`)


@dataclass(frozen=True)
class Extract:
    """How the offline engine writes an answer: sections of picked sentences, laid out one way.

    The header and footer frame the labelled sections, so they show only when those say something, and
    the header only when every section labelled in `header_needs` does ("Views differ." needs a view
    on each side)."""

    sections: tuple[Section, ...]
    layout: Literal["prose", "bullets", "numbered"] = "prose"
    header: str = ""
    footer: str = ""
    header_needs: tuple[str, ...] = ()


@dataclass
class WriteTask:
    """A generation step: fill `prompt` (with `{sources}` / `{parts}` formatted from the lists), or extract.

    `question_sources` says how many of the first sources are the question's own top passages, the
    evidence plain RAG answers from: the offline engine leads every typed answer with what plain RAG
    would say from them. `extract` is an outside route's own recipe for the offline engine.
    """

    role: str  # "answer:<type>", "aspect:<type>", "aggregate:<type>", "mediate:<type>"
    prompt: Prompt
    values: dict[str, str]
    sources: list[Source] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)
    max_tokens: int = 400
    question_sources: int = 0
    extract: Extract | None = None
    instructions: str = ""  # the reader's own instructions (a chat's system messages): language, tone, length


class Engine(Protocol):
    """Performs the LLM roles: `plan` fills a schema, `write` produces text. Implementations are async-safe."""

    name: str
    generative: bool  # False for an extractive engine: it cannot answer without passages

    async def plan(self, task: PlanTask[PlanT], question: str, trace: Trace) -> PlanT:
        """A validated plan, or PlanFailed with the reason."""
        ...

    async def write(self, task: WriteTask, trace: Trace, on_text: TextSink | None = None) -> str:
        """The text of the step, citing passages as [n] where it uses them. `on_text`, if given,
        hears the text as it is written, in pieces that concatenate to the returned text."""
        ...


def trimmed(sink: TextSink) -> TextSink:
    """`sink` fed without the text's leading and trailing whitespace, as engines return it stripped:
    whitespace is held back until more text follows it."""
    held, started = "", False

    def feed(piece: str) -> None:
        nonlocal held, started
        if not started:
            piece = piece.lstrip()
            started = bool(piece)
        text = held + piece
        body = text.rstrip()
        held = text[len(body) :]
        if body:
            sink(body)

    return feed


def sentence_pieces(text: str) -> list[str]:
    """`text` cut after each sentence or line, whitespace kept, so the pieces concatenate back to it."""
    pieces, start = [], 0
    for match in _PIECE_END.finditer(text):
        pieces.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces
