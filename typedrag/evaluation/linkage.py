"""LINKAGE (Yang et al., EMNLP Findings 2024): rank a candidate answer inside a list of graded references.

For each question we keep one reference per quality grade, best grade first (n references). The
judge names the position k in 1..n+1 the candidate would take in that list: k means "better than
reference k and all after it", n+1 means "worse than all of them". Verdicts store that raw
position; a rank convention turns it into a rank only when scoring, so one set of verdicts serves
both conventions:

- `linkage` (the original): rank = k, so a candidate worse than all n references ranks n+1.
- `typed-rag` (the Typed-RAG paper's variant): rank = min(k, n), so worse-than-all ranks n.

Several judge rounds are run per answer; the answer's rank is the median of the rounds whose
verdict parsed (after one bounded retry each). If no round parsed, the answer counts as a judge
failure: reported, never given an imputed rank.
"""

from __future__ import annotations

import hashlib
import random
import re
import statistics
from enum import StrEnum

from typedrag.evaluation.datasets import EvalQuestion, Reference
from typedrag.llm.base import Message
from typedrag.prompts import DATA_RULE, Prompt, delimit

LINKAGE_JUDGE = Prompt(
    "linkage_judge",
    "You judge the quality of answers to questions that need explanation rather than a single fact. " + DATA_RULE,
    "Question: {question}\n\n"
    "Here are {count} reference answers to it, already ranked from best (1) to worst ({count}):\n"
    "{references}\n\n"
    "Candidate answer:\n{candidate}\n\n"
    "Where does the candidate belong in this ranking? Weigh correctness, how fully it answers the question, "
    "and how useful it is to the person asking; ignore length and style. Position k means the candidate is "
    "better than reference k and every reference after it; position {last} means it is worse than all of "
    "them. Give at most two sentences of reasoning, then end your reply with the position written once as "
    "[[k]], for example [[2]].\n(Assessment {round}.)",
)

# Sent once, after the judge's own reply, when that reply carried no usable [[k]].
VERDICT_REMINDER = (
    "That reply has no usable position. Reply with only the position as [[k]], where k is a whole "
    "number from 1 to {last}."
)

_FINAL_VERDICT = re.compile(r"\[\[\s*(\d{1,6})\s*\]\]\s*\Z")  # at most 6 digits: never a huge int()


class RankConvention(StrEnum):
    """How a judged position becomes a rank: original LINKAGE (n+1) or the Typed-RAG paper's (n)."""

    LINKAGE = "linkage"
    TYPED_RAG = "typed-rag"


def select_references(question: EvalQuestion) -> list[Reference]:
    """One reference per grade, best first; within a grade the pick is seeded by the question id.

    The seed is a sha256 of the id (not Python's salted `hash`), so every method and every run
    is judged against exactly the same references.
    """
    by_grade: dict[int, list[Reference]] = {}
    for reference in question.references:
        by_grade.setdefault(reference.grade, []).append(reference)
    rng = random.Random(hashlib.sha256(question.id.encode()).hexdigest())
    return [rng.choice(by_grade[grade]) for grade in sorted(by_grade, reverse=True)]


def judge_messages(question: str, references: list[Reference], candidate: str, round_: int) -> list[Message]:
    """The judge prompt; the round number makes each round a separate request (and cache entry)."""
    listed = "\n".join(delimit("reference", r.text, rank=i) for i, r in enumerate(references, 1))
    return LINKAGE_JUDGE.messages(
        question=question,
        count=str(len(references)),
        last=str(len(references) + 1),
        references=listed,
        candidate=delimit("candidate", candidate),
        round=str(round_),
    )


def parse_verdict(text: str | None, count: int) -> int | None:
    """The position k of the reply's one verdict `[[k]]`, which must end the reply, if 1 <= k <= count + 1;
    else None (unusable: the judge is asked once more, then the round is a recorded judge failure).

    Exactly one `[[...]]` in the whole reply and nothing after it: a reply that names several
    positions, or whose verdict is followed by more text, has no verdict in its required place (and
    a candidate answer quoting `[[1]]` cannot choose its own rank). Never raises.
    """
    if not isinstance(text, str):
        return None
    if text.count("[[") != 1:
        return None
    match = _FINAL_VERDICT.search(text)
    if match is None:
        return None
    position = int(match.group(1))
    return position if 1 <= position <= count + 1 else None


def to_rank(position: int, count: int, convention: RankConvention) -> int:
    """The rank a judged position scores as under `convention` (see the module docstring)."""
    return min(position, count) if convention is RankConvention.TYPED_RAG else position


def question_rank(positions: list[int | None], count: int, convention: RankConvention) -> float | None:
    """The answer's rank: median over the rounds whose verdict parsed (a half rank when an even
    number parsed), each position first ranked under `convention`; None when no round parsed."""
    ranks = [to_rank(p, count, convention) for p in positions if p is not None]
    return statistics.median(ranks) if ranks else None
