"""Question-type classification: which of the eight NF-CATS types a question is."""

from typedrag.classify.base import FALLBACK_THRESHOLD, TypeClassifier, TypePrediction, needs_fallback
from typedrag.classify.shipped import ShippedClassifier, load_default_classifier

__all__ = [
    "FALLBACK_THRESHOLD",
    "ShippedClassifier",
    "TypeClassifier",
    "TypePrediction",
    "load_default_classifier",
    "needs_fallback",
]
