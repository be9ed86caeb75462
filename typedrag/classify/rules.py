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
    r"\bdifferen(?:ce|ces|t) (?:between|among|from|than)\b|\bdiffer(?:s|ed)? (?:from|between)\b|"
    r"\bdistinguish\w* between\b|\bsimilarit(?:y|ies) (?:between|among)\b|\bin common\b|"
    r"^compare\b|\bvs\.?\s|\bversus\b",
    re.I,
)
# A choice between named options: "Which is better for a beginner, violin or cello?", "Is it better to rent or
# buy?", "Should I learn French or Spanish?". Not "Are laptops or tablets better?": NF-CATS labels that a debate.
_CHOICE = re.compile(
    rf"^which\b.*\b\w+ or (?!not\b|no\b)\w+|^is it (?:{_COMPARATIVE}) to .+ or (?!not\b|no\b)\w+|"
    r"^should (?:i|we) \w+ (?:\w+ ){0,3}\w+ or (?!not\b|no\b)\w+",
    re.I,
)
# Statements that mention a difference are not comparison questions.
_QUESTION = re.compile(r"\?\s*$|^(?:how|what|which|who|is|are|do|does|should|can|compare)\b", re.I)


def comparison_phrasing(question: str) -> bool:
    """True when the wording itself asks for a comparison."""
    text = " ".join(question.split())
    return bool(_QUESTION.search(text) and (_EXPLICIT.search(text) or _CHOICE.search(text)))
