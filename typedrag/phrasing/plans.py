"""The offline planners: what each strategy's plan searches for, read from the question's phrasing, with no model.

A reason is searched as its subject's causes and factors, an instruction as its task's requirements and steps, a
debate as its topic's benefits and criticism, advice by the question's key phrases and words (a comparison's
items are `typedrag.phrasing.questions.compared`). Each strategy's `offline_plan` puts these into its plan's
schema. ValueError when the question gives nothing to plan from.
"""

from __future__ import annotations

from typedrag.phrasing.questions import HOW_TO, SHOULD, WHY, advice_topic, subject
from typedrag.phrasing.content import content_words, key_phrases


def reason_queries(question: str) -> list[str]:
    """Two searches for the subject's causes, read from the question: its causes, and the factors behind it."""
    _, phrase = subject(question, WHY, "subject")
    return [f"{phrase} causes", f"{phrase} factors"]


def instruction_queries(question: str) -> list[str]:
    """What the task needs first, then its steps, searched around its words as the question names it."""
    _, phrase = subject(question, HOW_TO, "task")
    return [f"{phrase} requirements", f"{phrase} steps"]


def debate_sides(question: str) -> tuple[str, list[tuple[str, str]]]:
    """(the debated topic, [(viewpoint, its search)]): the case for and the case against, each searched around the
    topic the question names."""
    core, phrase = subject(question, SHOULD, "debated topic")
    return core or phrase, [("in favour", f"{phrase} benefits"), ("against", f"{phrase} criticism")]


def advice_keywords(question: str) -> tuple[str, list[str]]:
    """(topic, keywords) of an advice request: its content words as the topic, its noun phrases and words as keywords."""
    text = advice_topic(question)
    phrases = key_phrases(text)
    if not phrases:
        raise ValueError("no keywords found in the question")
    return " ".join(content_words(text)), list(dict.fromkeys(phrases + content_words(text)))
