"""The result of answering one question, with its full trace. Serialised as-is by `--json` and the API."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from typedrag import telemetry
from typedrag.citations import cited_numbers, strip_markers, strip_reference_marks
from typedrag.llm.base import LLMCall
from typedrag.records import SECTION_SEPARATOR, LineKind, ScoredPassage
from typedrag.text import split_sentences


class Source(BaseModel):
    """A retrieved passage with the number the answer cites it by ([n]), and where in its document it is."""

    number: int
    passage_id: str
    title: str
    section: str = Field(
        "", description="heading path inside the document, e.g. 'Routine Vacuuming › Recovering Disk Space'"
    )
    page: int | None = Field(None, description="PDF page the passage starts on")
    page_end: int | None = Field(None, description="last PDF page, when the passage runs over more than one")
    text: str
    score: float
    lines: tuple[LineKind, ...] = Field(
        (),
        description="the kind of each line of `text` (prose, item with its order, code, table ...); empty: unknown, read as prose",
    )
    link: str | None = Field(
        None,
        description="the page showing the original document at this passage, highlighted, on a typedrag server: /view/<collection>?passage=<id>",
    )

    @classmethod
    def of(cls, number: int, hit: ScoredPassage) -> "Source":
        """Numbered as `number`; markers the passage carries in its text, title or section are removed, so
        none can pose as a citation to an engine or a reader."""
        p = hit.passage
        return cls(
            number=number,
            passage_id=p.passage_id,
            title=strip_reference_marks(p.title).strip(),
            section=strip_reference_marks(p.section).strip(),
            page=p.page,
            page_end=p.page_end,
            text=strip_reference_marks(p.text),
            score=round(hit.score, 4),
            lines=p.lines,
        )

    @property
    def where(self) -> str:
        """ "Title › Section, p. 12" (or "pp. 12–13"): how the source is named to a reader."""
        name = SECTION_SEPARATOR.join(part for part in (self.title, self.section) if part)
        if self.page is not None:
            pages = f"pp. {self.page}–{self.page_end}" if self.page_end else f"p. {self.page}"
            name = f"{name}, {pages}" if name else pages
        return name


class TypeDecision(BaseModel):
    """The question type the answer was routed on, how sure, and who decided (classifier, LLM or forced)."""

    type: str
    confidence: float
    source: str = Field(description="classifier:<name>, forced, or llm:<model>")
    probabilities: dict[str, float] = {}


class Aspect(BaseModel):
    """One decomposed part: a sub-query (reason/instruction), a perspective (debate) or an item (comparison)."""

    label: str
    query: str
    source_numbers: list[int] = []
    answer: str = ""
    error: str | None = None
    used: bool = True  # False when the typed strategy fell back: the final answer did not draw on it


class Citation(BaseModel):
    """An answer sentence and the passages it cites."""

    text: str
    source_numbers: list[int]
    passage_ids: list[str]


class Fallback(BaseModel):
    """A recorded degradation: which step fell back or dropped something, and why."""

    step: str
    reason: str


class EngineStep(BaseModel):
    """A plan or a writing step an engine performed, and the time it took. The offline engine's steps call no
    model: they are here, not among the LLM calls."""

    step: Literal["plan", "write"]
    role: str = Field(description="which step, e.g. plan:comparison, aspect:reason, aggregate:reason")
    engine: str
    latency_ms: float = 0.0
    error: str | None = Field(None, description="why it gave nothing usable (a plan that failed, an endpoint that did)")
    notes: list[str] = Field(
        default_factory=list,
        description="how the engine wrote the step by its design (what the offline engine left out and why): not a fallback",
    )


@dataclass
class Trace:
    """What a question's steps did: model calls, engine steps and recorded degradations. Shared by concurrent steps."""

    calls: list[LLMCall] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    steps: list[EngineStep] = field(default_factory=list)

    def fallback(self, step: str, reason: str) -> None:
        """Record a degradation (a fallback, a dropped aspect) so the result says what happened."""
        self.fallbacks.append(Fallback(step=step, reason=reason))
        telemetry.fallback(step, reason)  # an event on the span of the step it happened in


class Usage(BaseModel):
    """Totals over a result's LLM calls: calls, cache hits, HTTP requests and tokens."""

    calls: int = 0
    cached_calls: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @classmethod
    def of(cls, calls: list[LLMCall]) -> "Usage":
        return cls(
            calls=len(calls),
            cached_calls=sum(c.cached for c in calls),
            requests=sum(c.requests for c in calls),
            prompt_tokens=sum(c.prompt_tokens for c in calls),
            completion_tokens=sum(c.completion_tokens for c in calls),
        )


class Engines(BaseModel):
    """What answered: the generator (model or offline engine), retriever, classifier and reranker (if used)."""

    generator: str
    retriever: str | None = None
    classifier: str | None = None
    reranker: str | None = None


class Rewrite(BaseModel):
    """How a follow-up was read to stand alone before it was classified and answered."""

    by: str = Field(description="llm:<model>, or offline (the earlier questions' key terms carried in)")
    rewritten: bool = Field(description="False when the follow-up already stood alone and was kept as asked")
    carried: list[str] = Field([], description="offline: the terms carried in from earlier questions")
    history_turns: int = Field(0, description="user and assistant turns of the conversation before this question")


class Abstention(BaseModel):
    """Why the answer says the documents do not answer the question: its sources are the nearest passages, not an answer."""

    looked_for: str = Field(description="what was searched for")
    reason: str
    by: str = Field(
        description="relevance bar, reader or unmentioned name (offline), or llm:<model> (the model said its sources do not answer)"
    )
    score: float | None = Field(
        None,
        description="relevance bar: the best passage sentence's similarity to the question; reader: its best chance that a sentence answers",
    )
    bar: float | None = Field(None, description="the score below which typedrag abstains")


Knowledge = Literal["documents", "labelled"]
KNOWLEDGE: tuple[Knowledge, ...] = ("documents", "labelled")
# How the part of an answer written from the model's own knowledge is introduced wherever it is shown as text.
UNSOURCED_LABEL = "Not from your documents:"


class Unsourced(BaseModel):
    """The part of an answer the model wrote from its own knowledge (knowledge = "labelled"), where the documents
    do not cover the question or a part of it: kept apart from the cited answer, never cited, sentence by sentence."""

    sentences: list[str] = Field(
        description="what the model added from its own knowledge, one sentence each, without citation markers"
    )
    covers: str = Field("", description="what the question asks that the documents do not cover, in the model's words")
    by: str = Field(description="the model that wrote it")

    @property
    def text(self) -> str:
        """The part as a reader sees it: "Not from your documents: ..." """
        return f"{UNSOURCED_LABEL} {' '.join(self.sentences)}"


class AnswerResult(BaseModel):
    """One answered question with its whole trace: type, plan, aspects, sources, citations, calls, fallbacks."""

    question: str  # as asked (the last turn of a conversation)
    method: str  # llm | rag | typed
    answer: str
    standalone_question: str | None = Field(None, description="with history: the question as classified and answered")
    searched: list[str] = Field(
        [], description="the queries searched for the question's own passages (fused when several)"
    )
    rewrite: Rewrite | None = None
    abstained: bool = Field(
        False, description="the documents do not answer: `sources` are the nearest passages, not an answer"
    )
    abstention: Abstention | None = None
    instructions: str | None = Field(None, description="what the conversation's system messages asked of the answer")
    strategy: str  # which plan ran, e.g. "comparison" or "rag"
    type: TypeDecision | None = None
    plan: dict[str, Any] | None = None
    plan_used: bool = True  # False when the typed strategy fell back to plain RAG: plan and aspects kept, not used
    aspects: list[Aspect] = []
    sources: list[Source] = []
    citations: list[Citation] = []
    fallbacks: list[Fallback] = []
    llm_calls: list[LLMCall] = []
    usage: Usage = Usage()
    steps: list[EngineStep] = Field(
        [], description="every plan and writing step an engine performed, in the order they ended"
    )
    timings_ms: dict[str, float] = {}
    engines: Engines
    prompt_version: str
    knowledge: Knowledge = Field(
        "documents",
        description="documents: the answer holds nothing unsourced; labelled: where the documents do not cover the question, the model may add what it knows, apart (`unsourced`)",
    )
    unsourced: Unsourced | None = Field(
        None,
        description="knowledge = labelled: what the model added from its own knowledge, apart from `answer` (which holds only what the documents support)",
    )

    @property
    def reply(self) -> str:
        """The whole text a reader reads: the answer, then the part from the model's own knowledge, labelled."""
        if self.unsourced is None or not self.unsourced.sentences:
            return self.answer
        return f"{self.answer}\n\n{self.unsourced.text}" if self.answer else self.unsourced.text

    collection: str | None = Field(None, description="the collection answered in (its sources link to their originals)")


# A bullet or step prefix ("- comet: ", "2. "): layout, not part of the cited claim.
_LINE_PREFIX = re.compile(r"^(?:[-•*]\s+(?:[^:\[\]]{1,80}:\s+)?|\d{1,2}[.)]\s+)")


def extract_citations(answer: str, sources: list[Source]) -> list[Citation]:
    """Link each cited answer sentence to the passages it names; unknown numbers are ignored."""
    by_number = {s.number: s for s in sources}
    citations: list[Citation] = []
    for sentence in split_sentences(answer):
        numbers = [n for n in cited_numbers(sentence) if n in by_number]
        if numbers:
            citations.append(
                Citation(
                    text=_LINE_PREFIX.sub("", strip_markers(sentence).strip()).strip(),
                    source_numbers=numbers,
                    passage_ids=[by_number[n].passage_id for n in numbers],
                )
            )
    return citations
