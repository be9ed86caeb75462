"""The abstention gate of one writing step, as two pure functions the driver calls around the engine's write:
`before`, on the step's passages as the relevance bar judged them, and `after`, on what the engine wrote.

The policy (typedrag.abstain.Policy) says what the bars are; the gate says how a step passes them, in order:
names no document mentions turn every step down; offline, passages below the relevance bar are turned down
unless the best-ranked one is filed under a question heading that reads as the question (a FAQ's entry: then
the task carries the heading, `filed_under`, as its first candidate); once written, an entry the engine read
as answering the question it is filed under stands on that, passages let past on their heading are held to
the bar they were let past, and the rest is the policy's reading of the engine's report (a model's "not in
the sources", the reader's best chance). Nothing here awaits, searches or streams: the driver does, and a
test reads the gate by calling it.
"""

from __future__ import annotations

from dataclasses import dataclass

from typedrag.abstain import Policy, Support, Verdict
from typedrag.engines.base import Written

__all__ = ["Cleared", "after", "before"]


@dataclass(frozen=True)
class Cleared:
    """A step let through to its engine: how its passages were judged (None: no relevance bar), and the
    question heading its best-ranked passage is filed under, when that entry is the answer's first candidate."""

    judged: Support | None = None
    filed_under: str | None = None


def before(policy: Policy, judged: Support | None, *, numbered: bool, combined: bool = False) -> Verdict | Cleared:
    """Whether a step is written: the verdict that turns it down, or how it was let through. `judged` is its
    passages against the policy's bar (`Policy.bar`; None: not judged), `numbered` whether the run has any
    passage, `combined` a step that combines answers (it files nothing under a heading: its parts did)."""
    unknown = policy.unknown_names()
    if unknown is not None:  # nothing the passages say is about what the question names
        return unknown
    if judged is None:
        return Cleared()
    if not judged.answered and judged.heading is None:
        return policy.below(judged, numbered=numbered)
    return Cleared(judged, judged.heading if not combined else None)


def after(
    policy: Policy, cleared: Cleared, written: Written, *, engine: str, final: bool, numbered: bool
) -> Verdict | None:
    """The verdict on a written step (None: it stands). An entry the engine read as answering the question it is
    filed under (`Written.filed_under`) stands on that; else passages whose heading made them a candidate are
    held to the relevance bar they were let past, then the policy reads what `engine` reported."""
    judged = cleared.judged
    if written.filed_under is None and judged is not None and not judged.answered:
        return policy.below(judged, numbered=numbered)
    best = None if written.filed_under is not None else written.best
    return policy.read(best, written.not_in_sources, engine, final=final)
