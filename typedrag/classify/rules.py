"""Phrasings that make a question a comparison whatever a statistical model says.

Each pattern names the comparison outright (a difference, a "compare", a "versus", a choice
between named options with a comparative), so it is right almost every time it fires; the
validation figures with and without the rule are in classify/model/MODEL_CARD.md.
"""

from __future__ import annotations

import re

_COMPARATIVE = (
    r"better|worse|best|worst|faster|slower|cheaper|safer|healthier|stronger|easier|harder|bigger|smaller|"
    r"preferable|superior|inferior|prefer|rather|more \w+|less \w+"
)
_EXPLICIT = re.compile(
    r"\bdifferen(?:ce|ces|t) (?:between|among|from|than|to)\b|\bdiffer(?:s|ed)? (?:from|between)\b|"
    r"\bdistinguish\w* between\b|\bsimilarit(?:y|ies) (?:between|among|of)\b|\bin common\b|"
    r"^compare\b|\bcompar(?:e|ed|es|ison|ing) (?:to|with|of|between|against)\b|\bhow do(?:es)? .+ compare\b|"
    r"\bvs\.?\s|\bversus\b|\bcontrast (?:between|with)\b",
    re.I,
)
# A choice between named options with a comparative or "which": "Which is better for a beginner, violin or cello?"
_CHOICE = re.compile(
    rf"(?:\bwhich\b|\b(?:{_COMPARATIVE})\b).*\b\w+ or (?!not\b|no\b)\w+|\b\w+ or (?!not\b|no\b)\w+.*\b(?:{_COMPARATIVE})\b|"
    r"^should (?:i|we) \w+ (?:\w+ ){0,3}\w+ or (?!not\b|no\b)\w+",
    re.I,
)


def comparison_phrasing(question: str) -> bool:
    """True when the wording itself asks for a comparison."""
    text = " ".join(question.split())
    return bool(_EXPLICIT.search(text) or _CHOICE.search(text))
