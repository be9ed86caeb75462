"""What every question-type classifier returns, and when the pipeline should not trust it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, runtime_checkable

from typedrag.nfq import NFQType

# Below this confidence the pipeline answers with plain RAG and records a fallback in the trace.
# Chosen on NF-CATS: below it the predicted type is more often wrong than right (valid 47%,
# train cross-validation 43%); at or above it 96.5% are right, covering 96.7% of valid questions
# (table in classify/model/MODEL_CARD.md).
FALLBACK_THRESHOLD = 0.6


@dataclass(frozen=True)
class TypePrediction:
    label: NFQType
    confidence: float  # probability of `label`
    probabilities: dict[NFQType, float]
    source: str  # "classifier:<name>", "forced" or "llm:<model>"


@runtime_checkable
class TypeClassifier(Protocol):
    name: str

    def classify(self, question: str) -> TypePrediction:
        """The type of one question; ValueError if it is empty."""
        ...

    def classify_many(self, questions: list[str]) -> list[TypePrediction]:
        """Types of several questions, in order (faster than one by one)."""
        ...


def needs_fallback(prediction: TypePrediction) -> bool:
    """True when the classifier is too unsure for a type-specific strategy."""
    return prediction.confidence < FALLBACK_THRESHOLD


def check_question(question: str) -> str:
    """Reject empty input early: a blank question has no type, and silently guessing one hides bugs."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"cannot classify an empty question (got {question!r})")
    return question


_load_lock = threading.Lock()


@lru_cache(maxsize=1)
def _load() -> TypeClassifier:
    from typedrag.classify.shipped import ShippedClassifier

    return ShippedClassifier()


def load_default_classifier() -> TypeClassifier:
    """The classifier shipped in the package, loaded once per process."""
    with _load_lock:
        return _load()
