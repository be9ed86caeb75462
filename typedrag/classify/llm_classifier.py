"""Zero-shot question typing by an LLM, and the `auto` rule that asks it only when the shipped model is unsure.

An LLM reports a label, not a probability, so its predictions carry confidence 1.0 and
source `llm:<model>`; the low-confidence fallback to plain RAG applies to the shipped model only.
"""

from __future__ import annotations

from pydantic import BaseModel, field_validator

from typedrag.classify.base import TypeClassifier, TypePrediction, check_question, needs_fallback
from typedrag.engines.base import Trace
from typedrag.llm.base import ChatModel, LLMError
from typedrag.nfq import NFQType
from typedrag.prompts import CLASSIFY_TYPE


class TypeVerdict(BaseModel):
    type: NFQType

    @field_validator("type", mode="before")
    @classmethod
    def _loose(cls, value: object) -> object:
        """Models write "debate", "Evidence based", ...: accept any spelling NFQType.parse accepts."""
        try:
            return NFQType.parse(value) if isinstance(value, str) else value
        except ValueError:
            return value


class LLMTypeClassifier:
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


class AutoClassifier:
    """The shipped classifier first; the LLM only for questions it is unsure of (and if the LLM fails, the shipped answer)."""

    def __init__(self, shipped: TypeClassifier, llm: LLMTypeClassifier) -> None:
        self.shipped, self.llm = shipped, llm
        self.name = f"auto({shipped.name}, {llm.name})"

    async def aclassify(self, question: str, trace: Trace | None = None) -> TypePrediction:
        prediction = self.shipped.classify(question)
        if not needs_fallback(prediction):
            return prediction
        try:
            return await self.llm.aclassify(question, trace)
        except LLMError as error:
            if trace is not None:
                trace.fallback("classify", f"LLM classifier failed ({error}); kept {prediction.source}")
            return prediction
