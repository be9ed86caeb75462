"""What every question-type classifier returns, and when the pipeline should not trust it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from typedrag.errors import QuestionError
from typedrag.result import Trace

# Below this confidence the pipeline answers with plain RAG and records a fallback in the trace.
# Chosen on NF-CATS: below it the predicted type is more often wrong than right (valid 47%,
# train cross-validation 43%); at or above it 96.5% are right, covering 96.7% of valid questions
# (table in classify/model/MODEL_CARD.md).
FALLBACK_THRESHOLD = 0.6


@dataclass(frozen=True)
class TypePrediction:
    """A question's type: the label (an NF-CATS type or any route label), its probability, who said so."""

    label: str
    confidence: float  # probability of `label`
    probabilities: dict[str, float]
    source: str  # "classifier:<name>", "forced" or "llm:<model>"


@runtime_checkable
class TypeClassifier(Protocol):
    """Decides question types. Both methods are async: a classifier may call a model over the network.

    A local classifier runs its sync work in a thread (see ShippedClassifier); `trace` receives
    any LLM call made, so the result shows what classifying cost.
    """

    name: str

    async def aclassify(self, question: str, trace: Trace | None = None) -> TypePrediction:
        """The type of one question; QuestionError if it is empty."""
        ...

    async def aclassify_many(self, questions: list[str]) -> list[TypePrediction]:
        """The types of several questions, in order (batched or concurrent)."""
        ...


def needs_fallback(prediction: TypePrediction) -> bool:
    """True when the classifier is too unsure for a type-specific strategy."""
    return prediction.confidence < FALLBACK_THRESHOLD


def check_question(question: str) -> str:
    """Reject empty input early: a blank question has no type, and silently guessing one hides bugs."""
    if not isinstance(question, str) or not question.strip():
        raise QuestionError(f"cannot classify an empty question (got {question!r})")
    return question
