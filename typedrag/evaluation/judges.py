"""Judges that place a candidate answer among a question's ranked references (see linkage.py).

`LLMJudge` asks a chat model with the LINKAGE prompt. `ProxyJudge` is for machines with no judge
endpoint: an embedding-similarity placement, labelled everywhere as a proxy and never reported
next to LLM-judge numbers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from typedrag.embed import Embedder, default_embedder
from typedrag.evaluation.datasets import Reference
from typedrag.evaluation.linkage import VERDICT_REMINDER, judge_messages, parse_verdict
from typedrag.llm.base import ChatModel, Completion, LLMCall, Message

PROXY_LABEL = "proxy (embedding similarity), not an LLM judge"
# Rounds are independent samples (their median smooths the judge's variance), so not greedy decoding.
JUDGE_TEMPERATURE = 0.7
JUDGE_MAX_TOKENS = 256


@dataclass
class Verdict:
    """One round's placement (None when unusable), the judge's reply and its calls."""

    position: int | None  # 1..n+1, or None when the reply stayed unusable after the retry
    reply: str
    retried: bool = False
    calls: list[LLMCall] = field(default_factory=list)


class Judge(Protocol):
    """Places a candidate answer among a question's ranked references (one LINKAGE round)."""

    name: str
    is_proxy: bool

    async def place(self, question: str, references: list[Reference], candidate: str, round_: int) -> Verdict: ...


class LLMJudge:
    """A chat model judging with the LINKAGE prompt; one follow-up when its reply has no usable [[k]]."""

    is_proxy = False

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.name = model.name

    async def place(self, question: str, references: list[Reference], candidate: str, round_: int) -> Verdict:
        """One round; an unusable reply gets exactly one follow-up asking for just [[k]] (a Verdict with
        position None if that is unusable too: a recorded judge failure). LLMError propagates."""
        messages = judge_messages(question, references, candidate, round_)
        count = len(references)
        first = await self._complete(messages, count)
        position = parse_verdict(first.text, len(references))
        if position is not None:
            return Verdict(position, first.text, calls=[first.call])
        follow_up: list[Message] = [
            *messages,
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": VERDICT_REMINDER.format(last=len(references) + 1)},
        ]
        second = await self._complete(follow_up, count)
        return Verdict(parse_verdict(second.text, len(references)), second.text, True, [first.call, second.call])

    async def _complete(self, messages: list[Message], count: int) -> Completion:
        """Only replies with a usable verdict are cached: an unusable one (and its follow-up, a
        different request) is asked afresh by the next run, never replayed into a permanent failure."""
        return await self.model.complete(
            messages,
            role="judge:linkage",
            max_tokens=JUDGE_MAX_TOKENS,
            temperature=JUDGE_TEMPERATURE,
            accept=lambda text: parse_verdict(text, count) is not None,
        )


class ProxyJudge:
    """Place the candidate by MiniLM cosine similarity to the best (first) reference.

    Every reference gets its similarity to the best one (the best itself: 1); the candidate's
    position is 1 + the number of references more similar to the best reference than the candidate
    is. So a candidate unlike the best answer sinks to n+1, and only a near-copy of the best answer
    can take position 1: proxy ranks are pessimistic and coarse, useful to compare methods on the
    same questions, not as a measure of answer quality. Deterministic, so one round suffices.
    """

    name = PROXY_LABEL
    is_proxy = True

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    async def place(self, question: str, references: list[Reference], candidate: str, round_: int) -> Verdict:
        embedder = self._embedder or default_embedder()
        vectors = await asyncio.to_thread(embedder.embed, [candidate] + [r.text for r in references])
        best = vectors[1]
        candidate_similarity = float(vectors[0] @ best)
        similarities = [float(v @ best) for v in vectors[1:]]
        position = 1 + sum(s > candidate_similarity for s in similarities)
        reply = f"candidate {candidate_similarity:.3f}; references " + ", ".join(f"{s:.3f}" for s in similarities)
        return Verdict(position, reply)
