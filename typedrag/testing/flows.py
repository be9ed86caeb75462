"""Running a strategy's flow with no engine, retriever or server: a test answers its steps.

`play(flow, answer)` drives a flow to its end as typedrag.driver would, without I/O: numbering, notes,
events, the plan, query expansion, a debate's weighing and a follow-up's rewrite (none, as offline) are handled here as
the driver handles them, and every other step (Plan, Search, Rank, Write, ReadFollowUp; Weigh and RewriteFollowUp too
with `model=True`, as with an engine's model) gets the outcome `answer(step)` returns. An exception `answer` raises is thrown into the flow, as a
failing step's is. Together's flows are played one after another, in order, so a test is deterministic.

    >>> from typedrag.steps import Search, Number
    >>> def flow():
    ...     [hits] = yield Search(["why?"], 3)
    ...     sources = yield Number(hits)
    ...     return len(sources)
    >>> play(flow(), lambda step: [[]]).outcome
    0
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from typedrag.driver import SourceBook
from typedrag.result import Fallback, Source
from typedrag.steps import Expand, Flow, Note, Number, Planned, RewriteFollowUp, Step, Tell, Together, Weigh

__all__ = ["Played", "play"]


@dataclass
class Played:
    """What playing a flow gave: every step it (and its Together flows) yielded, in order; the notes and
    events it recorded; the plan it told; its numbered sources; and its outcome."""

    steps: list[Step] = field(default_factory=list)
    notes: list[Fallback] = field(default_factory=list)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    planned: BaseModel | None = None
    book: SourceBook = field(default_factory=SourceBook)
    outcome: Any = None

    @property
    def sources(self) -> list[Source]:
        return self.book.sources

    def of(self, kind: type) -> list[Any]:
        """The steps of one kind, in order."""
        return [step for step in self.steps if isinstance(step, kind)]


def play(flow: Flow[Any], answer: Callable[[Step], Any], *, model: bool = False) -> Played:
    """Drive `flow` to its end, `answer` giving the outcome of each Plan, Search, Rank and Write step (and
    Weigh and RewriteFollowUp with `model`, as for an engine with a model)."""
    played = Played()
    played.outcome = _follow(flow, answer, played, model)
    return played


def _follow(flow: Flow[Any], answer: Callable[[Step], Any], played: Played, model: bool) -> Any:
    sent: Any = None
    thrown: Exception | None = None
    while True:
        try:
            step = flow.throw(thrown) if thrown is not None else flow.send(sent)
        except StopIteration as done:
            return done.value
        played.steps.append(step)
        sent, thrown = None, None
        try:
            sent = _outcome(step, answer, played, model)
        except Exception as error:
            thrown = error


def _outcome(step: Step, answer: Callable[[Step], Any], played: Played, model: bool) -> Any:
    match step:
        case Number():
            return played.book.add(step.hits)
        case Note():
            played.notes.append(Fallback(step=step.step, reason=step.reason))
        case Tell():
            played.events.append((step.event, dict(step.data)))
        case Planned():
            played.planned = step.plan
            played.events.append(("plan", {"plan": step.plan.model_dump()}))
        case Together():
            return tuple(_follow(sub, answer, played, model) for sub in step.flows)
        case Expand():  # as offline: the question is searched as it is
            return []
        case Weigh() | RewriteFollowUp() if not model:  # as offline: no model weighs a debate or rewrites a follow-up
            return None
        case _:
            return answer(step)
    return None
