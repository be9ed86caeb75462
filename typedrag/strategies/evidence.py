"""Evidence-based questions, and the plain-RAG baseline: retrieve with the question, answer from the passages."""

from __future__ import annotations

from typedrag.engines.base import Extract, Section, WriteTask
from typedrag.prompts import CITE, CLOSED_BOOK, GROUNDED, Prompt
from typedrag.strategies.base import StrategyContext, StrategyOutput

GROUNDED_ANSWER = Prompt(
    "grounded_answer",
    GROUNDED,
    "Sources:\n{sources}\n\nQuestion: {question}\n\nAnswer in at most five sentences. " + CITE,
)
ANSWER_SENTENCES = 4  # the offline engine's plain answer; typed answers are measured against its length


class EvidenceStrategy:
    """Plain RAG: the question's top-k passages, one grounded answer. Evidence-based questions get it
    under their own name; as `EvidenceStrategy("rag")` it is the plain-RAG baseline and the fallback.

    >>> EvidenceStrategy("rag").name
    'rag'
    """

    def __init__(self, name: str = "evidence-based") -> None:
        self.name = name

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        hits = await ctx.retrieve(question, ctx.top_k)
        task = WriteTask(
            role="answer",
            prompt=GROUNDED_ANSWER,
            values={"question": question},
            sources=ctx.book.add(hits),
            extract=Extract((Section(query=question, sentences=ANSWER_SENTENCES),)),
        )
        return StrategyOutput(answer=await ctx.write_answer(task))


class ClosedBookStrategy:
    """The LLM-only baseline: no retrieval. An extractive engine has nothing to answer from and says so."""

    name = "llm"

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        task = WriteTask(role="answer:closed-book", prompt=CLOSED_BOOK, values={"question": question}, extract=Extract(()))
        return StrategyOutput(answer=await ctx.write_answer(task))
