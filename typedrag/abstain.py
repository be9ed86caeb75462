"""Abstention: telling a question its documents answer from one they do not.

Two signals, one per kind of engine, so an answer never quotes passages as if they answered:

- Offline, a relevance bar (`support`): the question against every sentence of its passages (MiniLM
  cosine); below the bar, no sentence says what the question asks. It stands in for the reader model
  until that lands: `support` is the one function to switch to the reader's scores. MiniLM reads
  English: a question in another script is not judged (`readable`).
- An LLM says so itself. The writing prompts let the model reply with only the JSON object
  `{"not_in_sources": "<what the sources lack>"}`; `said_not_in_sources` recognises that reply as a
  whole, validated against `NotInSourcesReply`: a structured signal, never words found inside prose
  (an answer that says "the sources do not mention X" is an answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from typedrag.citations import strip_markers
from typedrag.embed import Embedder, default_embedder
from typedrag.text import split_sentences

# Below this cosine between the question and its passages' best sentence, typedrag abstains. Advice and
# stances are worded far from the questions that ask for them, so those types have bars of their own.
# Calibrated on the tune half of bench/data/conversations.jsonl (unanswerable turns) and the key-term sets
# (answerable questions): BENCHMARKS.md, "Conversations and abstention".
SUPPORT_BAR = 0.50
TYPE_BARS = {"EXPERIENCE": 0.36, "DEBATE": 0.44}
# A planned aspect is narrower than its question, and its passages may sit further from the question's
# words: they are dropped only this far below the question's bar.
ASPECT_MARGIN = 0.10
# Offline, past the bar: abstain when no sentence the answer could quote reaches this chance of answering by
# the reader model (typedrag.reader). Chosen on the conversational set's tune half (BENCHMARKS.md section 15).
READER_BAR = 0.15
MIN_SENTENCE_WORDS = 4  # shorter pieces (a heading, "See also") say nothing a question asks
MAX_SIGNAL_CHARS = 400  # a reply still open after this much text is an answer, not the signal
_FENCE = re.compile(r"^```(?:json|JSON)?\s*(.*?)\s*```$", re.DOTALL)


@dataclass(frozen=True)
class Support:
    """Whether passages answer a question: the best sentence's similarity to it, against the bar."""

    answered: bool
    score: float
    bar: float


def readable(question: str) -> bool:
    """Whether the bar's model can judge `question`: MiniLM reads English, so a question mostly in another
    script (Korean, Arabic) is not judged at all, rather than judged unanswerable for want of reading it."""
    letters = [c for c in question if c.isalpha()]
    return not letters or sum(c < "\u0250" for c in letters) >= len(letters) / 2


def bar_for(question_type: str | None) -> float:
    """The relevance bar for a question of this type (None: not classified)."""
    return TYPE_BARS.get(str(question_type), SUPPORT_BAR) if question_type is not None else SUPPORT_BAR


def support(question: str, texts: Sequence[str], embedder: Embedder | None = None, bar: float = SUPPORT_BAR) -> Support:
    """Whether any sentence of `texts` comes close enough to `question` to answer it (no text: it does not)."""
    sentences = [
        " ".join(s.split()) for text in texts for s in split_sentences(strip_markers(text)) if len(s.split()) >= MIN_SENTENCE_WORDS
    ]
    if not sentences:
        return Support(False, 0.0, bar)
    vectors = (embedder or default_embedder()).embed([question, *sentences])
    score = round(float((vectors[1:] @ vectors[0]).max()), 4)
    return Support(score >= bar, score, bar)


class Unsupported(Exception):
    """Offline: the passages a writing step was given fall below the relevance bar (`support` says how far)."""

    def __init__(self, judged: Support) -> None:
        super().__init__(f"relevance {judged.score:.2f} below {judged.bar:.2f}")
        self.judged = judged


class ReaderUnsupported(Exception):
    """Offline: the reader model reads no sentence of a writing step's passages as an answer (`best` is the
    highest chance it gave one, below `bar`)."""

    def __init__(self, best: float, bar: float) -> None:
        super().__init__(f"the reader's best chance {best:.2f} is below {bar:.2f}")
        self.best, self.bar = best, bar


class NotInSourcesReply(BaseModel):
    """A model's whole reply when its sources do not answer: what they lack, and nothing else."""

    model_config = ConfigDict(extra="forbid")

    not_in_sources: str = Field(max_length=MAX_SIGNAL_CHARS)


class NotInSources(Exception):
    """A writing step's model said its sources do not answer; `missing` is what it said they lack."""

    def __init__(self, missing: str) -> None:
        super().__init__(missing)
        self.missing = missing


def said_not_in_sources(reply: str) -> str | None:
    """What the sources lack, when `reply` is the not-in-sources object (bare or in a code fence); else None."""
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        said = NotInSourcesReply.model_validate(json.loads(text))
    except (ValueError, ValidationError):  # json.JSONDecodeError is a ValueError
        return None
    return " ".join(said.not_in_sources.split()) or "the sources do not answer the question"


class HoldBack:
    """A streamed reply passed on to `sink`, except while it could still be the not-in-sources object
    (it opens with "{" or a code fence): that much is held until the reply shows what it is, so a client
    never sees the signal as if it were the answer. `release` passes on what is held."""

    def __init__(self, sink: Callable[[str], None]) -> None:
        self.sink = sink
        self.held = ""
        self.deciding = True

    def __call__(self, piece: str) -> None:
        if not self.deciding:
            self.sink(piece)
            return
        self.held += piece
        head = self.held.lstrip()
        if not head or (head[0] in "{`" and len(self.held) < MAX_SIGNAL_CHARS):
            return
        self.release()

    def release(self) -> None:
        self.deciding = False
        if self.held:
            held, self.held = self.held, ""
            self.sink(held)
