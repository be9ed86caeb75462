"""Evidence-based questions, and the plain-RAG baseline: retrieve with the question, answer from the passages."""

from __future__ import annotations

from typedrag.engines.base import ClosedBook, Grounded
from typedrag.prompts import CITE, CLOSED_BOOK, GROUNDED, Prompt
from typedrag.result import Source
from typedrag.steps import Depths, Flow, Number, Search, StrategyOutput, Write

GROUNDED_ANSWER = Prompt(
    "grounded_answer",
    GROUNDED,
    "Sources:\n{sources}\n\nQuestion: {question}\n\nAnswer in at most five sentences. " + CITE,
)


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
        [hits] = yield Search([question], depths.top_k)
        sources = yield Number(hits)
        written = yield Write(grounded_answer(question, sources, f"answer:{self.name}"), final=True)
        return StrategyOutput(answer=written.text)


class ClosedBookStrategy:
    """The LLM-only baseline: no retrieval. An extractive engine has nothing to answer from and says so."""

    name = "llm"

    def flow(self, question: str, depths: Depths) -> Flow[StrategyOutput]:
        written = yield Write(ClosedBook(role="answer:llm", prompt=CLOSED_BOOK, question=question), final=True)
        return StrategyOutput(answer=written.text)
