"""Question-type classification: which of the eight NF-CATS types a question is."""

from typedrag.classify.base import (
    FALLBACK_THRESHOLD,
    TypeClassifier,
    TypePrediction,
    load_default_classifier,
    needs_fallback,
)

__all__ = ["FALLBACK_THRESHOLD", "TypeClassifier", "TypePrediction", "load_default_classifier", "needs_fallback"]
