"""Evidence-based questions, and the plain-RAG baseline: retrieve with the question, answer from the passages."""

from __future__ import annotations

from pydantic import BaseModel, Field

from typedrag.engines.base import ClosedBook, Grounded, PlanTask
from typedrag.index.fusion import fuse_searches
from typedrag.index.base import distinct
from typedrag.prompts import CITE, CLOSED_BOOK, GROUNDED, PLANNER, Prompt
from typedrag.records import ScoredPassage
from typedrag.result import Source
from typedrag.steps import Depths, Expand, Flow, Number, Search, StrategyOutput, Write

GROUNDED_ANSWER = Prompt(
    "grounded_answer",
    GROUNDED,
    "Sources:\n{sources}\n\nQuestion: {question}\n\nAnswer in at most five sentences. " + CITE,
)


class Expansion(BaseModel):
    """A question's search widened by a model: the question as a search query in its documents' words, and a
    passage that would answer it (HyDE: a hypothetical answer is worded like the passages holding the real one)."""

    rewrite: str = Field(
        max_length=200, description="the question as a short search query, in the words its documents would use"
    )
    passage: str = Field(
        max_length=700, description="two or three sentences a passage answering the question would contain"
    )

    def queries(self) -> list[str]:
        return [self.rewrite, self.passage]


EXPAND_QUERY = Prompt(
    "expand_query",
    "You help a search engine find the passages that answer a question. " + PLANNER,
    "Question: {question}\n\nWrite the question as a short search query in the words its documents would use, "
    "and two or three sentences that a passage answering it would contain (they are only searched for, never "
    "shown to anyone).\n{reply_format}",
)
EXPAND = PlanTask(role="expand:query", prompt=EXPAND_QUERY, schema=Expansion)


def question_hits(question: str, k: int) -> Flow[list[ScoredPassage]]:
    """The question's own top `k` passages: its search, fused (reciprocal rank) with the searches of the queries
    a model adds when the pipeline expands queries; offline, the question's search alone."""
    extra = yield Expand(EXPAND, question)
    if not extra:
        [hits] = yield Search([question], k)
        return hits
    rankings = yield Search([question, *extra], k)
    return distinct(
        fuse_searches(rankings, k * len(rankings)), k
    )  # one query's passage may be another's near-duplicate


def grounded_answer(question: str, sources: list[Source], role: str) -> Grounded:
    """Plain RAG's step: the question answered from its passages. Decomposing types run the very same
    step as their overview, so their combined answer never has less than plain RAG's."""
    return Grounded(role=role, prompt=GROUNDED_ANSWER, question=question, sources=sources)


class EvidenceStrategy:
    """Plain RAG: the question's top-k passages, one grounded answer. Evidence-based questions get it
    under their own name; as `EvidenceStrategy("rag")` it is the plain-RAG baseline and the fallback.

    >>> EvidenceStrategy("rag").name
    'rag'
    """

    def __init__(self, name: str = "evidence-based") -> None:
        self.name = name

    def flow(self, question: str, depths: Depths) -> Flow[StrategyOutput]:
        hits = yield from question_hits(question, depths.top_k)
        sources = yield Number(hits)
        written = yield Write(grounded_answer(question, sources, f"answer:{self.name}"), final=True)
        return StrategyOutput(answer=written.text)


class ClosedBookStrategy:
    """The LLM-only baseline: no retrieval. An extractive engine has nothing to answer from and says so."""

    name = "llm"

    def flow(self, question: str, depths: Depths) -> Flow[StrategyOutput]:
        written = yield Write(ClosedBook(role="answer:llm", prompt=CLOSED_BOOK, question=question), final=True)
        return StrategyOutput(answer=written.text)
