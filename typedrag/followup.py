"""A follow-up question made to stand alone from the conversation's own words, with no LLM.

"And why did it fall?" means nothing to a search engine; the conversation says what "it" is. Without
an LLM to rewrite it, the follow-up is read with the subject of the question before it carried into it,
and its passages are searched twice, as asked and with that subject, the two rankings fused by
reciprocal rank: a follow-up that changed the subject still finds what it alone finds, and one that
leans on the conversation finds its subject.

Two things are measured rather than guessed from words:
- whether a follow-up leans on the conversation at all. One that points back ("it", "the other one",
  "and why?") does. Otherwise ("When did the eastern half fall?" after Rome, "Why did the dinosaurs die
  out?" after comets) the index decides: the subject is carried when what the search finds with it comes
  closer (MiniLM, to the question as read) than what the question's own words find alone.
- which words name the subject: the earlier question's key phrases, each scored by MiniLM against that
  question as it was read; words that say little of it ("two", "likely", "since") stay behind.
The subject is a chain: the question before was read the same way, so a follow-up of a follow-up carries
the conversation's subject, and one after a change of subject carries the new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field, field_validator

from typedrag.history import Turn
from typedrag.index.fusion import fuse_searches
from typedrag.phrasing.followups import CONTINUES as _CONTINUES
from typedrag.phrasing.questions import bare_question
from typedrag.phrasing.words import ASKING_WORDS, REFERRING
from typedrag.questions import DEFAULT_MAX_CHARS
from typedrag.records import ScoredPassage
from typedrag.text import WORD, content_words, key_phrases, terms

CARRIED_TERMS = 6  # words carried in from the conversation, at most
EARLIER_QUESTIONS = 3  # earlier user turns read for the subject chain, the latest last
MAX_TERM_CHARS = 40  # a longer "word" (a hash, a pasted blob) names no subject a search can use: never carried
SUBJECT_FLOOR = 0.20  # a phrase's MiniLM cosine to its question below which it says too little of it to carry
LEAN_MARGIN = 0.10  # how much closer the passages found with the subject must come for a follow-up to lean
LEAN_DEPTH = 5  # passages of each search compared
MAX_PHRASES = 16  # of an earlier question's phrases, the ones scored (a pasted page holds hundreds)


@dataclass(frozen=True)
class Standalone:
    """A follow-up as it is answered: the question read alone, what is searched for it, and how it came about."""

    question: str  # the question as it is classified and answered
    searches: tuple[str, ...]  # the queries searched for the question's own passages, their rankings fused
    carried: tuple[str, ...] = ()  # terms carried in from earlier turns
    rewritten: bool = False


class StandaloneQuestion(BaseModel):
    """An LLM's rewrite of a follow-up: the question, understandable without the conversation."""

    question: str = Field(min_length=1, max_length=500, description="the last question, rewritten to stand alone")

    @field_validator("question", mode="before")
    @classmethod
    def _one_line(cls, value: object) -> object:
        return " ".join(value.split()) if isinstance(value, str) else value


def conversation_text(dialogue: Sequence[Turn], chars: int = 600) -> str:
    """The earlier turns for a rewrite prompt, one line each ("user: ...", "assistant: ..."), each cut to `chars`."""
    return "\n".join(f"{t.role}: {t.content[:chars]}" for t in dialogue)


def leans_on_history(question: str) -> bool:
    """True when the question points back at the conversation ("it", "the other one", "and why?") or names
    nothing of its own. A question that does neither may still lean on it: the index decides (`offline_standalone`)."""
    words = [w.lower() for w in WORD.findall(question)]
    if any(w in REFERRING for w in words):
        return True
    if _CONTINUES.match(" ".join(question.split())):
        return True
    return not content_words(bare_question(question))


@dataclass(frozen=True)
class _Reading:
    """A question as it was read: its text with what it carried, and its subject's phrases (its own first)."""

    text: str
    phrases: tuple[str, ...]


def subject_phrases(question: str) -> list[str]:
    """The question's key phrases without the words that say what is asked, longest first."""
    phrases = []
    for phrase in key_phrases(bare_question(question)):
        run: list[str] = []
        for word in [*phrase.split(), ""]:
            if word and word.lower() not in ASKING_WORDS and len(word) <= MAX_TERM_CHARS:
                run.append(word)
            elif run:
                phrases.append(" ".join(run))
                run = []
    return list(dict.fromkeys(phrases))


def carried_terms(question: str, earlier: _Reading, embedder, limit: int = CARRIED_TERMS) -> list[str]:
    """The earlier question's subject phrases that the follow-up does not say itself, best first by their MiniLM
    cosine to that question as read, those below SUBJECT_FLOOR left out, at most `limit` words in all: a phrase
    that does not fit whole gives its best words that do (in their order)."""
    own = terms(question)
    candidates = []
    for phrase in earlier.phrases[:MAX_PHRASES]:
        words = [w for w in phrase.split() if not terms(w) <= own]
        if words:
            candidates.append(words)
    if not candidates:
        return []
    words = list(dict.fromkeys(w for c in candidates for w in c))
    texts = [earlier.text, *(" ".join(c) for c in candidates), *words]
    vectors = embedder.embed(texts)
    scores = vectors[1:] @ vectors[0]
    phrase_score, word_score = scores[: len(candidates)], dict(zip(words, scores[len(candidates) :]))
    chosen: list[str] = []
    taken: set[str] = set()
    room = limit
    for index in np.argsort(-phrase_score, kind="stable"):
        if phrase_score[index] < SUBJECT_FLOOR or room <= 0:
            break
        phrase = [w for w in candidates[index] if w not in taken]
        if len(phrase) > room:  # the best words of it that fit, in their order
            best = set(sorted(phrase, key=lambda w: -word_score[w])[:room])
            phrase = [w for w in phrase if w in best]
        if phrase:
            chosen.append(" ".join(phrase))
            taken.update(phrase)
            room -= len(phrase)
    return chosen


def _read(question: str, earlier: _Reading | None, retriever, embedder, max_chars: int) -> tuple[_Reading, Standalone]:
    """`question` read after `earlier` (None: the first question): as asked, or with the earlier subject carried in."""
    own = subject_phrases(question)
    alone = Standalone(question=question, searches=(question,))
    if earlier is None:
        return _Reading(question, tuple(own)), alone
    carried = carried_terms(question, earlier, embedder)
    while carried and len(f"{question} ({', '.join(carried)})") > max_chars:
        carried.pop()  # the question as read stays within the question limit
    if not carried:
        return _Reading(question, tuple(own)), alone
    read = f"{question} ({', '.join(carried)})"
    # Searched with the question's own words twice: they weigh double (BM25 counts a repeated term), so the
    # carried subject narrows the search without outweighing what the follow-up asks.
    searched = f"{question} {question} {' '.join(carried)}"
    if not leans_on_history(question) and not _closer_with_subject(question, read, searched, retriever, embedder):
        return _Reading(question, tuple(own)), alone
    reading = _Reading(read, tuple(dict.fromkeys([*own, *carried])))
    return reading, Standalone(question=read, searches=(searched, question), carried=tuple(carried), rewritten=True)


def _closer_with_subject(question: str, read: str, searched: str, retriever, embedder) -> bool:
    """Whether the passages found with the carried subject come closer to the question as read than what the
    question's own words find to the question alone, by LEAN_MARGIN (MiniLM cosine of each to the best passage
    head). No retriever to ask: the question stands alone."""
    if retriever is None:
        return False
    from typedrag.rerank import passage_head

    alone, carried = retriever.search_many([question, searched], LEAN_DEPTH)
    if not carried:
        return False
    heads = [passage_head(hit.passage) for hit in (*alone, *carried)]
    vectors = embedder.embed([question, read, *heads])
    found_alone = float((vectors[2 : 2 + len(alone)] @ vectors[0]).max()) if alone else 0.0
    found_with = float((vectors[2 + len(alone) :] @ vectors[1]).max())
    return found_with - found_alone >= LEAN_MARGIN


def offline_standalone(
    question: str, dialogue: Sequence[Turn], retriever=None, *, max_chars: int = DEFAULT_MAX_CHARS, embedder=None
) -> Standalone:
    """The follow-up read alone: as asked when it stands alone, else with the subject of the question before it
    (itself read the same way, over the last EARLIER_QUESTIONS questions) carried in and searched both ways.
    `retriever` is the index the measured decisions ask; without one, only a question that points back leans."""
    if embedder is None:
        from typedrag.embed import default_embedder

        embedder = default_embedder()
    earlier: _Reading | None = None
    for text in [t.content for t in dialogue if t.role == "user"][-EARLIER_QUESTIONS:]:
        earlier, _ = _read(text, earlier, retriever, embedder, max_chars)
    return _read(question, earlier, retriever, embedder, max_chars)[1]


class FusingRetriever:
    """A retriever that searches a rewritten follow-up as each of its searches and fuses the rankings; every
    other query (a sub-query, an item) goes to the index as it is."""

    def __init__(self, inner, searches: dict[str, tuple[str, ...]]) -> None:
        self.inner, self.searches = inner, searches
        self.name = inner.name

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        asked = [list(self.searches.get(q, (q,))) for q in queries]
        flat = [q for group in asked for q in group]
        found = iter(self.inner.search_many(flat, k) if len(flat) > 1 else [self.inner.search(flat[0], k)])
        results = []
        for group in asked:
            rankings = [next(found) for _ in group]
            results.append(rankings[0] if len(rankings) == 1 else fuse_searches(rankings, k))
        return results
