"""The steps a strategy hands an engine, as typed objects, and what the engine hands back.

A strategy asks for a plan with a `PlanTask` (its prompt and schema) and for text with a `WriteTask`:
typedrag's own steps are the subclasses below, each declaring what it answers from (the question,
the sources, a comparison's purpose and items, an aspect's facet, the parts to combine) as typed
fields, in the spirit of a DSPy Signature. The LLM engine fills the step's prompt from `values()`;
the offline engine dispatches on the step's class (typedrag/engines/offline/answers.py). A route
added from outside typedrag uses `WriteTask` itself, with its prompt's own values in `extra`; the
offline engine writes it as plain RAG does.

`role` names a step in traces and in the response cache ("aspect:reason"); nothing dispatches on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, Field, field_validator

from typedrag.citations import strip_markers
from typedrag.prompts import Prompt
from typedrag.reader import Role
from typedrag.result import Knowledge, Source, Trace, Unsourced
from typedrag.text import split_sentences

__all__ = [
    "Advised",
    "AspectAnswer",
    "ClosedBook",
    "Combined",
    "Compared",
    "Mediated",
    "Engine",
    "Facet",
    "Grounded",
    "LabelledAnswer",
    "Part",
    "PlanT",
    "PlanTask",
    "Quote",
    "TextSink",
    "Trace",
    "WriteTask",
    "Weighing",
    "Written",
    "sentence_pieces",
    "trimmed",
]

PlanT = TypeVar("PlanT", bound=BaseModel)
TextSink = Callable[[str], None]  # hears a step's text piece by piece as it is written
_SPACE_BEFORE_STOP = re.compile(r"\s+([.,;:!?])")  # "is b [2]." without its marker is "is b ."
_PIECE_END = re.compile(r"(?<=[.!?\]])[ \t]+(?!\[)|\n+")


@dataclass(frozen=True)
class PlanTask(Generic[PlanT]):
    """A structured step: the LLM engine fills `prompt` as `schema`; the offline engine plans with its own
    planner for this task, or with `offline` (a route added from outside typedrag), which returns a plan
    or raises ValueError when it does not apply. The prompt may use `{question}` and `{reply_format}`."""

    role: str  # "plan:<type>", for traces
    prompt: Prompt
    schema: type[PlanT]
    offline: Callable[[str], PlanT] | None = None


class Facet(StrEnum):
    """What the planned aspects of a decomposing type add to plain RAG's answer."""

    CAUSES = "causes"  # reason: each aspect a cause, condition or mechanism
    STEPS = "steps"  # instruction: each aspect a part of the procedure
    VIEWS = "views"  # debate: each aspect one perspective's case


@dataclass(frozen=True)
class Quote:
    """A sentence an extractive engine quoted, as the reader read it: kept with a partial answer so the
    step that combines answers knows each sentence's role and place without parsing the text back."""

    text: str
    cites: tuple[int, ...]  # the numbers of the passages it came from
    role: Role
    answers: float  # the reader's chance that it answers the question
    order: int | None = None  # its place in an ordered list of its document (a step the document numbered)


@dataclass(frozen=True)
class Written:
    """An engine's text for a step. `quotes` holds what an extractive engine quoted, in the order written
    (an LLM's text has none); `supported` is False when the sources do not answer the question, so the
    text says so or shows only the nearest passages.

    What the abstention policy (typedrag.abstain) reads is data here, never an exception: `best`, an
    extractive engine's reader's highest chance that a sentence of the step's passages answers, and
    `not_in_sources`, what a model said its sources lack when it replied that they do not answer. Engines
    know no bars: the driver applies them, and sets `declined` on a partial answer the policy (or a check of
    its citations) turns down, with the reason; an engine sets it on a step it does not write (the offline
    engine's aspects whose sentences it would add only by role, when those additions are off)."""

    text: str
    quotes: tuple[Quote, ...] = ()
    supported: bool = True
    best: float | None = None
    not_in_sources: str | None = None
    notes: tuple[str, ...] = ()  # what the engine left out and why, recorded in the trace when the text is used
    # How the engine wrote the step by its design (the offline engine quotes only what its reader reads as
    # answering): recorded on the step in the trace, never as a fallback.
    said: tuple[str, ...] = ()
    declined: str | None = None
    # knowledge = "labelled", a final step: what the model added from its own knowledge, apart from `text` (kept
    # even when the policy turns the text down: then it stands beside the abstention)
    unsourced: Unsourced | None = None
    # The question heading of the entry the text answers from, when the engine read that entry as answering the
    # question it is filed under (`WriteTask.filed_under`): the policy's bars are then not read. None: it did not.
    filed_under: str | None = None


@dataclass(frozen=True)
class Part:
    """One aspect's answer handed to the step that combines them."""

    label: str
    text: str
    quotes: tuple[Quote, ...] = ()
    lead: bool = False  # plain RAG's own answer (the overview): the combined answer keeps it whole
    best: float | None = None  # the `Written.best` it was written with: the combined answer is judged on it too
    filed_under: str | None = None  # its `Written.filed_under`: the combined answer stands on the entry it quotes


@dataclass(frozen=True, kw_only=True)
class WriteTask:
    """A generation step: `prompt` filled from `values()` (with `{sources}` / `{parts}` formatted by the
    engine). A route's own step passes its prompt's other values in `extra`."""

    role: str
    prompt: Prompt
    question: str
    sources: list[Source] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)
    max_tokens: int = 400
    instructions: str = ""  # the reader's own instructions (a chat's system messages): language, tone, length
    # The question heading the best-ranked source is filed under when it reads as the question (a FAQ's entry,
    # typedrag.abstain.HEADING_BAR): that entry is the answer's first candidate, answered from alone when the
    # engine reads it as answering (and says so in `Written.filed_under`); else the sources are read as any.
    filed_under: str | None = None
    # "labelled" (set by the driver on a final step when the reader allows it): a generative engine may add what
    # its model knows where the sources do not cover the question, apart from the cited answer (`LabelledAnswer`)
    knowledge: Knowledge = "documents"

    def values(self) -> dict[str, str]:
        """The prompt's placeholders other than the sources and parts."""
        return {"question": self.question, **self.extra}


@dataclass(frozen=True, kw_only=True)
class Grounded(WriteTask):
    """Plain RAG's step: the question answered from its own passages (evidence-based questions, the
    plain-RAG baseline, and the overview every decomposing type begins with)."""


@dataclass(frozen=True, kw_only=True)
class ClosedBook(WriteTask):
    """The LLM-only baseline: no sources."""


@dataclass(frozen=True, kw_only=True)
class Compared(WriteTask):
    """A comparison answered by its purpose, covering every item. The first `lead` sources are the
    question's own top passages: what plain RAG answers from."""

    purpose: Literal["difference", "similarity", "superiority"]
    items: tuple[str, ...]
    instruction: str  # how the purpose shapes the answer, in the prompt's words
    lead: int = 0
    # The numbers of the sources found for each item, in `items` order: the prompt names them, so each item is
    # described from its own passages.
    item_sources: tuple[tuple[int, ...], ...] = ()

    def values(self) -> dict[str, str]:
        return {
            **super().values(),
            "purpose": self.purpose,
            "items": "; ".join(self.items),
            "purpose_instruction": self.instruction,
            "item_passages": self.item_passages(),
        }

    def item_passages(self) -> str:
        """ " Passages found for each: VACUUM [1] [3]; VACUUM FULL [2]." (empty when unknown)."""
        named = [
            f"{item} {' '.join(f'[{n}]' for n in numbers)}"
            for item, numbers in zip(self.items, self.item_sources)
            if numbers
        ]
        return f" Passages found for each: {'; '.join(named)}." if named else ""


@dataclass(frozen=True, kw_only=True)
class Advised(WriteTask):
    """Advice on `topic` drawn from varied experiences; the first `lead` sources are the question's own."""

    topic: str
    lead: int = 0
    facets: tuple[str, ...] = ()  # the facets of the advice the plan searched for (the prompt names them)

    def values(self) -> dict[str, str]:
        facets = FACETS_LINE.format(facets="; ".join(self.facets)) if self.facets else ""
        return {**super().values(), "topic": self.topic, "facets": facets}


@dataclass(frozen=True, kw_only=True)
class AspectAnswer(WriteTask):
    """One planned aspect answered from passages of its own: a cause, a part of the procedure, or one
    perspective's case (`facet`); `focus` is the aspect as the plan named it."""

    focus: str
    facet: Facet

    def values(self) -> dict[str, str]:
        return {**super().values(), "focus": self.focus}


@dataclass(frozen=True, kw_only=True)
class Combined(WriteTask):
    """The aspects' answers merged into one: aggregated (causes, steps) or mediated (views), as `combine`
    says (the step's span is named after it). `sources` are the sources its parts were written from, which the
    relevance bar judges (the prompt does not show them): not those of an aspect left out."""

    parts: tuple[Part, ...]
    facet: Facet
    combine: Literal["aggregate", "mediate"] = "aggregate"
    topic: str = ""  # a debate's topic
    # Why the question's own answer (the overview) was dropped, when it was: its passages did not answer the question
    # as asked, so the parts left come from the aspects' searches alone, and a model is told so (prompts.unanswered).
    unanswered: str | None = None

    def values(self) -> dict[str, str]:
        return {**super().values(), "topic": self.topic} if self.topic else super().values()


# How an advice step's prompt names the facets its plan searched for.
# The facets are what the plan searched for, not parts of the question: a facet the sources do not speak to is
# passed over, never reported as not covered (a sentence a reader holds against the answer).
FACETS_LINE = (
    " The passages were searched for these facets of the advice: {facets}. Cover those the sources speak to and pass"
    " over the others without remark."
)
MAX_UNSOURCED = 6  # sentences of its own a model may add


class LabelledAnswer(BaseModel):
    """A final step's reply with knowledge = "labelled": the answer from the numbered sources, cited, and apart
    from it what the model knows itself about what the sources do not cover (no citation markers, one sentence
    an item: markers a model puts there anyway are removed, a paragraph is split into its sentences)."""

    from_sources: str = Field(
        description="the answer from the numbered sources, each sentence citing its sources like [2]; empty when they do not answer the question at all"
    )
    not_covered: str = Field(
        "",
        max_length=300,
        description="what the question asks that the sources do not cover, in a few words; empty when they cover all of it",
    )
    from_own_knowledge: list[str] = Field(
        [],
        json_schema_extra={"maxItems": MAX_UNSOURCED},
        description=f"only for what the sources do not cover: up to {MAX_UNSOURCED} sentences from your own knowledge, without source numbers; empty when the sources cover the question",
    )

    @field_validator("from_own_knowledge", mode="after")
    @classmethod
    def _sentences(cls, value: list[str]) -> list[str]:
        sentences = [
            _SPACE_BEFORE_STOP.sub(r"\1", " ".join(strip_markers(s).split()))
            for item in value
            for s in split_sentences(item)
        ]
        return [s for s in sentences if s][: 2 * MAX_UNSOURCED]


class Weighing(BaseModel):
    """Whether a debate's sources favour one side, weighed before it is mediated: the mediator concludes
    where they do ("generally no, because ...") and sets out both sides only where they are balanced."""

    leaning: Literal["one side", "balanced"] = Field(
        description="one side: the sources recommend or clearly support one of the perspectives; balanced: they leave the question open"
    )
    side: str = Field(
        "", max_length=120, description="the perspective the sources favour, named as above; empty when balanced"
    )
    reason: str = Field(
        "",
        max_length=300,
        description="the sources' main reason for that side, in one short sentence; empty when balanced",
    )

    @property
    def concludes(self) -> bool:
        return self.leaning == "one side" and bool(self.side.strip())


@dataclass(frozen=True, kw_only=True)
class Mediated(Combined):
    """A debate's perspectives mediated, with the prompt's `{stance}`: conclude for the side the sources
    favour, or set out both, as the flow's weighing found (a `Weigh` step, typedrag.steps; balanced offline,
    where nothing weighs, and when the weighing fails). An extractive engine mediates as it combines any parts."""

    stance: str = ""

    def values(self) -> dict[str, str]:
        return {**super().values(), "stance": self.stance}


class Engine(Protocol):
    """What the driver (typedrag.driver) asks of an engine: `plan` fills a schema, `write` produces text, and
    `quotes_from` says which of a step's sources its answer can quote. `generative` says whether it has a model:
    only then does the driver ask for more queries, a debate's weighing or a follow-up's rewrite, or offer a final
    step leave to add what the model knows. Implementations are async-safe."""

    name: str
    generative: bool  # False for an extractive engine: it cannot answer without passages

    def quotes_from(self, task: WriteTask) -> list[Source]:
        """The sources `task`'s answer can quote, which the abstention policy's relevance bar judges before it is
        written (offline): all of them for a model; an extractive engine may say it is fewer."""
        ...

    async def plan(self, task: PlanTask[PlanT], question: str, trace: Trace) -> PlanT:
        """A validated plan, or PlanFailed with the reason."""
        ...

    async def write(self, task: WriteTask, trace: Trace, on_text: TextSink | None = None) -> Written:
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
