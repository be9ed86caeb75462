"""A blind pairwise judge: which of two answers to one question helps the asker more.

The judge sees the question and two answers labelled A and B, never which system wrote them. Each
pair is judged twice, once in each order (which one is shown first is drawn per question), so a judge
that favours a position cancels out: a system wins an item only when the two orders together favour
it, and orders that contradict each other make a tie. For each answer the judge also says whether it
alone would satisfy the asker, and counts its sentences that answer and its noise sentences (off-topic,
misleading or nonsensical), so a reader sees what an added sentence bought and what it cost.

The verdict is a pydantic model asked for as structured output: a reply that does not validate gets
one repair request (typedrag.llm.structured); if that fails too, the round is a recorded judge failure,
never a guessed verdict, and it is asked afresh on the next run (invalid replies are not cached).
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from typedrag.llm.base import ChatModel, LLMCall
from typedrag.phrasing.words import TIE_WORDS
from typedrag.prompts import DATA_RULE, Prompt, delimit, reply_format

JUDGE_ROLE = "judge:pairwise"
JUDGE_MAX_TOKENS = 700
REASON_CHARS = 800
READING = (
    "answer {label}: satisfies (would it alone satisfy the asker), answering (how many of its sentences and bullets "
    "answer the question), noise (how many are off-topic, misleading or nonsensical)"
)
Z_95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


class AnswerReading(BaseModel):
    """What the judge found in one answer."""

    satisfies: bool = Field(description="true when this answer alone would satisfy the person who asked")
    answering: int = Field(ge=0, le=200, description="how many of its sentences and bullets answer what was asked")
    noise: int = Field(
        ge=0, le=200, description="how many of its sentences and bullets are off-topic, misleading or nonsensical"
    )


class PairVerdict(BaseModel):
    """The judge's reply for one ordering of a pair: both readings, then the reason, then the decision."""

    answer_a: AnswerReading = Field(description=READING.format(label="A"))
    answer_b: AnswerReading = Field(description=READING.format(label="B"))
    reason: str = Field(min_length=1, max_length=REASON_CHARS, description="one or two sentences: what decided it")
    winner: Literal["A", "B", "tie"] = Field(
        description="A or B for the answer that helps more; tie only when neither does"
    )

    @field_validator("winner", mode="before")
    @classmethod
    def _loose(cls, value: object) -> object:
        """Models write "a", "Answer B", "TIE", "neither": accept what is unambiguous."""
        if not isinstance(value, str):
            return value
        text = value.strip().lower().removeprefix("answer").strip(" .:")
        if text in ("a", "b"):
            return text.upper()
        if text in TIE_WORDS:
            return "tie"
        return value


PAIRWISE_JUDGE = Prompt(
    "pairwise_judge",
    "You compare two answers to the same question as the demanding person who asked it would. Both were "
    "written by automatic systems; which one is shown first is random and means nothing. " + DATA_RULE,
    "Question: {question}\n\n{answer_a}\n\n{answer_b}\n\n"
    "Which answer helps the asker more? Weigh, in this order: (1) does it answer what was asked (the facts, "
    "the reason, the steps, the difference, the recommendation, or the sides of a debate); (2) is every "
    "sentence and bullet correct and on topic: an off-topic, misleading or nonsensical one counts against its "
    "answer; (3) completeness; (4) readability. Length alone is neither good nor bad. For each answer, say "
    "whether it alone would satisfy the asker, and count its sentences and bullets that answer the question "
    "and those that are noise. Choose tie only when neither answer helps more.\n{reply_format}",
)


def prompt_fingerprint() -> str:
    """A short hash of the judge's prompt and reply schema: verdicts from an older judge are not reused."""
    text = PAIRWISE_JUDGE.system + PAIRWISE_JUDGE.user + reply_format(PairVerdict)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def judge_messages(question: str, first: str, second: str) -> list:
    """The judge's prompt with `first` shown as answer A and `second` as answer B."""
    return PAIRWISE_JUDGE.messages(
        question=question,
        answer_a=delimit("candidate", first or "(no answer)", label="A"),
        answer_b=delimit("candidate", second or "(no answer)", label="B"),
        reply_format=reply_format(PairVerdict),
    )


@dataclass
class Judgment:
    """One ordering's outcome: the verdict (None when the reply stayed invalid after the repair) and its call."""

    verdict: PairVerdict | None
    reply: str
    call: LLMCall


class PairwiseJudge:
    """A chat model judging pairs with PAIRWISE_JUDGE, at temperature 0 (each ordering is asked once)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.name = model.name

    async def judge(self, question: str, first: str, second: str) -> Judgment:
        """One ordering; LLMError (the endpoint failed) propagates and the round is asked again next run."""
        completion = await self.model.complete(
            judge_messages(question, first, second),
            role=JUDGE_ROLE,
            schema=PairVerdict,
            max_tokens=JUDGE_MAX_TOKENS,
            temperature=0.0,
        )
        return Judgment(completion.parsed, completion.text, completion.call)


def first_shown(question_id: str, seed: int = 0) -> str:
    """Which system ("a" or "b") is shown first in round 1 of a question (round 2 swaps them): drawn from a
    hash of the id and the seed, so every run and every process shows the same question the same way."""
    rng = random.Random(hashlib.sha256(f"{seed}:{question_id}".encode()).hexdigest())
    return "a" if rng.random() < 0.5 else "b"


def winner_of(verdict_winner: str, shown_first: str) -> str:
    """The system ("a", "b") or "tie" a round's A/B/tie verdict names, given which system was shown as A."""
    if verdict_winner == "tie":
        return "tie"
    other = "b" if shown_first == "a" else "a"
    return shown_first if verdict_winner == "A" else other


def combine(round_winners: list[str]) -> str:
    """An item's outcome from its rounds' winners: each round counts +1 for b, -1 for a, 0 for a tie; the sign
    of the sum decides. Both orders for one side wins; one order and a tie wins; contradicting orders tie."""
    score = sum({"b": 1, "a": -1}.get(w, 0) for w in round_winners)
    return "b" if score > 0 else "a" if score < 0 else "tie"


@dataclass(frozen=True)
class Interval:
    """A share and its 95% interval."""

    share: float | None
    low: float | None
    high: float | None

    def excludes_half(self) -> bool:
        return self.low is not None and (self.low > 0.5 or self.high < 0.5)


def wilson(successes: int, trials: int, z: float = Z_95) -> Interval:
    """The Wilson score interval of a share (Wilson 1927): sound for small counts and shares near 0 or 1,
    where the normal approximation gives bounds outside [0, 1]. No trials: no share."""
    if trials <= 0:
        return Interval(None, None, None)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half))


@dataclass
class Tally:
    """Wins, ties and failures of a group of items, with the answer and noise counts of each side."""

    items: int = 0
    wins: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0})
    ties: int = 0
    identical: int = 0  # ties because both answers were the same text (not asked)
    failures: int = 0  # no verdict in one order or both: not counted as a tie
    consistent: int = 0  # judged items whose two orders named the same outcome
    satisfies: dict[str, float] = field(default_factory=lambda: {"a": 0.0, "b": 0.0})
    answering: dict[str, float] = field(default_factory=lambda: {"a": 0.0, "b": 0.0})
    noise: dict[str, float] = field(default_factory=lambda: {"a": 0.0, "b": 0.0})

    @property
    def decided(self) -> int:
        return self.wins["a"] + self.wins["b"]

    @property
    def judged(self) -> int:
        return self.decided + self.ties

    def share_b(self) -> Interval:
        """b's share of the items one side won (ties left out), with its Wilson 95% interval."""
        return wilson(self.wins["b"], self.decided)

    def as_dict(self) -> dict:
        interval = self.share_b()
        return {
            "items": self.items,
            "wins_a": self.wins["a"],
            "wins_b": self.wins["b"],
            "ties": self.ties,
            "identical": self.identical,
            "failures": self.failures,
            "consistent_orders": self.consistent,
            "share_b_of_decided": interval.share,
            "share_b_low": interval.low,
            "share_b_high": interval.high,
            "separated": interval.excludes_half(),
            "satisfies_a": self.satisfies["a"],
            "satisfies_b": self.satisfies["b"],
            "answering_a": self.answering["a"],
            "answering_b": self.answering["b"],
            "noise_a": self.noise["a"],
            "noise_b": self.noise["b"],
        }
