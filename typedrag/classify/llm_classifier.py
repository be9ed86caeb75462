"""Zero-shot question typing by an LLM, and the `auto` rule that asks it only when the shipped model is unsure.

An LLM reports a label, not a probability, so its predictions carry confidence 1.0 and
source `llm:<model>`; the low-confidence fallback to plain RAG applies to the shipped model only.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, field_validator

from typedrag.classify.base import TypeClassifier, TypePrediction, check_question, needs_fallback
from typedrag.errors import LLMError
from typedrag.llm.base import ChatModel
from typedrag.nfq import NFQType
from typedrag.prompts import PLANNER, Prompt
from typedrag.result import Trace

CONCURRENCY = 8  # questions classified at once in a batch; the chat model applies its own cap too


class TypeVerdict(BaseModel):
    """The LLM's reply: one NF-CATS type."""

    type: NFQType

    @field_validator("type", mode="before")
    @classmethod
    def _loose(cls, value: object) -> object:
        """Models write "debate", "Evidence based", ...: accept any spelling NFQType.parse accepts."""
        try:
            return NFQType.parse(value) if isinstance(value, str) else value
        except ValueError:
            return value


CLASSIFY_TYPE = Prompt(
    "classify_type",
    "You sort questions into kinds. " + PLANNER,
    "Question: {question}\n\n"
    "Which kind is it?\n"
    "- NOT-A-QUESTION: not a real question (a statement, greeting, or nonsense)\n"
    "- FACTOID: asks for one short fact, such as a name, date, number or place\n"
    "- EVIDENCE-BASED: asks what something is, what it means, or how it works\n"
    "- COMPARISON: asks how two or more things differ, resemble each other, or which is better\n"
    "- EXPERIENCE: asks for advice, recommendations or personal experience\n"
    "- REASON: asks why something happens or happened\n"
    "- INSTRUCTION: asks how to do something, the steps or method\n"
    "- DEBATE: asks for an opinion on a contested issue with several reasonable sides\n"
    'Reply as {{"type": "..."}}',
)


async def _gather_capped(classifier: TypeClassifier, questions: list[str]) -> list[TypePrediction]:
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(question: str) -> TypePrediction:
        async with limit:
            return await classifier.aclassify(question)

    return list(await asyncio.gather(*(one(q) for q in questions)))


class LLMTypeClassifier:
    """Asks a chat model for the type, as structured output.

    >>> from typedrag.testing import ScriptedChatModel
    >>> LLMTypeClassifier(ScriptedChatModel()).name
    'llm:scripted'
    """

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.name = f"llm:{model.name}"

    async def aclassify(self, question: str, trace: Trace | None = None) -> TypePrediction:
        """The LLM's label; LLMError if it gives none (the caller decides what to fall back to)."""
        check_question(question)
        completion = await self.model.complete(
            CLASSIFY_TYPE.messages(question=question), role="classify", schema=TypeVerdict, max_tokens=30
        )
        if trace is not None:
            trace.calls.append(completion.call)
        if not isinstance(completion.parsed, TypeVerdict):
            raise LLMError(completion.call.error or "the model gave no valid type")
        label = completion.parsed.type
        return TypePrediction(label=label, confidence=1.0, probabilities={label: 1.0}, source=self.name)

    async def aclassify_many(self, questions: list[str]) -> list[TypePrediction]:
        return await _gather_capped(self, questions)


class AutoClassifier:
    """The shipped classifier first; the LLM only for questions it is unsure of or reads as no question (either
    would drop the typed plan), and if the LLM fails, the shipped answer. The shipped model learnt NF-CATS's
    one-sentence questions: a question that opens with the asker's situation ("I pointed rsyslog at a file ...
    What should I check?") reads to it as a statement.

    >>> from typedrag.classify import load_default_classifier
    >>> from typedrag.testing import ScriptedChatModel
    >>> AutoClassifier(load_default_classifier(), LLMTypeClassifier(ScriptedChatModel())).name
    'auto(nfcats-technical-tfidf-minilm-lr-2, llm:scripted)'
    """

    def __init__(self, shipped: TypeClassifier, llm: LLMTypeClassifier) -> None:
        self.shipped, self.llm = shipped, llm
        self.name = f"auto({shipped.name}, {llm.name})"

    async def aclassify(self, question: str, trace: Trace | None = None) -> TypePrediction:
        prediction = await self.shipped.aclassify(question, trace)
        if not needs_fallback(prediction) and prediction.label != NFQType.NOT_A_QUESTION:
            return prediction
        try:
            return await self.llm.aclassify(question, trace)
        except LLMError as error:
            if trace is not None:
                trace.fallback("classify", f"LLM classifier failed ({error}); kept {prediction.source}")
            return prediction

    async def aclassify_many(self, questions: list[str]) -> list[TypePrediction]:
        return await _gather_capped(self, questions)
