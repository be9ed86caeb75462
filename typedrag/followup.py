"""A follow-up question made to stand alone from the conversation's own words, with no model.

"And why did it fall?" means nothing to a search engine; the conversation says what "it" is. Without
an LLM to rewrite it, the follow-up is read with the key terms of the earlier questions carried into
it (the latest question's first), and the question's own passages are searched twice, as asked and with
those terms, the two rankings fused by reciprocal rank: a follow-up that changed the subject still finds
what it alone finds, and one that leans on the conversation finds its subject. A follow-up that names
its own subject and refers to nothing before it stands alone, and is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field, field_validator

from typedrag.history import Turn
from typedrag.records import ScoredPassage
from typedrag.questions import bare_question
from typedrag.text import WORD, content_words, key_phrases, terms

# Words that point back at something said before ("it", "the other one", "both").
REFERRING = frozenset(
    """it its it's itself they them their theirs themselves this that these those he him his she her hers
    there then one ones other others another former latter both either neither same such""".split()
)
# Openings of a question that continues the previous one ("and ...", "what about ...", "why?").
_CONTINUES = re.compile(
    r"^(?:and|but|or|also|so|then|what about|how about|what else|anything else|any other|why not|how come|how so|"
    r"in what way|which one|which of)\b",
    re.I,
)
# Words that say what is asked rather than what about ("what is the difference", "how does it work"):
# carried into a follow-up they would pull in passages about differences or work in general.
ASKING_WORDS = frozenset(
    """difference differences differ different compare comparison similar similarity work works working happen
    happens happened mean means meaning use used using need needs want wants explain tell describe example
    examples kind kinds type types reason reasons cause causes start started change changes look looks show
    find know like just also actually usually often possible""".split()
)
MIN_OWN_WORDS = 3  # a question with fewer content words of its own leans on the conversation
CARRIED_TERMS = 6  # terms carried in from earlier questions, at most
EARLIER_QUESTIONS = 3  # earlier user turns read for them, the latest first
FUSION_K = 60  # reciprocal-rank fusion's constant (Cormack et al. 2009)


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
    """True when the question points back at the conversation ("it", "the other one", "and why?") or has
    too few words of its own to name a subject."""
    words = [w.lower() for w in WORD.findall(question)]
    if any(w in REFERRING for w in words):
        return True
    if _CONTINUES.match(" ".join(question.split())):
        return True
    return len(content_words(bare_question(question))) < MIN_OWN_WORDS


def carried_terms(question: str, dialogue: Sequence[Turn], limit: int = CARRIED_TERMS) -> list[str]:
    """Key terms of the earlier questions that the follow-up does not say itself: the latest question's
    first, each question's longest phrases first, at most `limit` words in all."""
    own = terms(question)
    earlier = [t.content for t in dialogue if t.role == "user"][-EARLIER_QUESTIONS:]
    chosen: list[str] = []
    seen: set[str] = set(own)
    for text in reversed(earlier):
        for phrase in key_phrases(bare_question(text)):
            words = [w for w in phrase.split() if w.lower() not in ASKING_WORDS and not terms(w) <= seen]
            if not words:
                continue
            if sum(len(p.split()) for p in chosen) + len(words) > limit:
                return chosen
            chosen.append(" ".join(words))
            seen |= terms(" ".join(words))
    return chosen


def offline_standalone(question: str, dialogue: Sequence[Turn]) -> Standalone:
    """The follow-up read alone: as asked when it stands alone, else with the earlier questions' key terms
    carried in and searched both ways."""
    if not leans_on_history(question):
        return Standalone(question=question, searches=(question,))
    carried = carried_terms(question, dialogue)
    if not carried:
        return Standalone(question=question, searches=(question,))
    read_alone = f"{question} ({', '.join(carried)})"
    # Searched with the question's own words twice: they weigh double (BM25 counts a repeated term), so the
    # carried subject narrows the search without outweighing what the follow-up asks.
    searched = f"{question} {question} {' '.join(carried)}"
    return Standalone(question=read_alone, searches=(searched, question), carried=tuple(carried), rewritten=True)


def fuse(rankings: Sequence[Sequence[ScoredPassage]], k: int) -> list[ScoredPassage]:
    """The `k` passages ranked best over `rankings` by reciprocal-rank fusion, each with its fused score."""
    scores: dict[str, float] = {}
    first: dict[str, ScoredPassage] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking):
            scores[hit.passage_id] = scores.get(hit.passage_id, 0.0) + 1.0 / (FUSION_K + rank + 1)
            first.setdefault(hit.passage_id, hit)
    best = sorted(scores, key=lambda pid: -scores[pid])[:k]
    return [ScoredPassage(first[pid].passage, round(scores[pid], 6)) for pid in best]


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
            results.append(rankings[0] if len(rankings) == 1 else fuse(rankings, k))
        return results
