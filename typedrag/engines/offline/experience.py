"""Experience, offline: the question's topic and keywords, and advice sentences added to plain RAG's lead."""

from __future__ import annotations

import re

from typedrag.engines.base import Extract, Section, WriteTask
from typedrag.engines.offline.settings import OfflineSettings
from typedrag.engines.offline.shapes import ADVICE
from typedrag.strategies.experience import ExperiencePlan
from typedrag.text import bare_question, content_words, key_phrases

_LEAD = re.compile(
    r"^(?:what|which|any|can you|could you|do you|would you)\s+"
    r"(?:are|is|do|does|have|recommend|suggest|good|some|advice|tips|ideas)?\s*",
    re.I,
)


def plan(question: str) -> ExperiencePlan:
    """The question's content words as the topic, its noun phrases and words as keywords."""
    text = _LEAD.sub("", bare_question(question))
    phrases = key_phrases(text)
    if not phrases:
        raise ValueError("no keywords found in the question")
    keywords = list(dict.fromkeys(phrases + content_words(text)))
    return ExperiencePlan(topic=" ".join(content_words(text)), keywords=keywords)


def answer(task: WriteTask, settings: OfflineSettings) -> Extract:
    """Plain RAG's lead, then up to two sentences that advise (should, recommend, avoid, try ...)."""
    question = task.values["question"]
    advice = Section(
        query=f"{task.values['topic']} {question}",
        sentences=settings.added_sentences,
        shape=ADVICE,
        shape_only=True,
        optional=True,
        max_words=settings.added_max_words,
    )
    return Extract((Section(query=question, lead=True), advice))
