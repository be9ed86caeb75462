"""Reading a question for the offline planners: its subject, without the words that only ask."""

from __future__ import annotations

import re

from typedrag.text import bare_question, content_words


def subject(question: str, lead: re.Pattern[str], what: str) -> tuple[str, str]:
    """(the question without its lead words, its content words): what sub-queries are built around.

    ValueError when nothing is left, so the planner fails visibly instead of searching for nothing.
    """
    core = lead.sub("", bare_question(question)).strip()
    phrase = " ".join(content_words(core)) or core
    if not phrase:
        raise ValueError(f"no {what} found in the question")
    return core, phrase
