"""Question-analysis helpers shared by the strategies' offline planners (the planning roles without a model)."""

from __future__ import annotations

import re

from typedrag.text import content_words

_LEAD = re.compile(
    r"^(?:so|and|but|well|ok|okay|please|hi|hey)[, ]+|"
    r"^(?:can|could|would) (?:you|someone|anyone) (?:please )?(?:tell me|explain|say)\s*",
    re.I,
)


def normalise(question: str) -> str:
    """The question on one line, without pleasantries or the closing question mark."""
    text = " ".join(question.split()).strip()
    text = _LEAD.sub("", text)
    return text.rstrip(" ?!.")


def subject(question: str, lead: re.Pattern[str], what: str) -> tuple[str, str]:
    """(the question without its lead words, its content words): what sub-queries are built around.

    ValueError when nothing is left, so the planner fails visibly instead of searching for nothing.
    """
    core = lead.sub("", normalise(question)).strip()
    phrase = " ".join(content_words(core)) or core
    if not phrase:
        raise ValueError(f"no {what} found in the question")
    return core, phrase
