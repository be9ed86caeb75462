"""What a strategy asks for, as frozen values: the steps of its flow. `typedrag.driver` performs them.

A flow is a generator (httpx's `Auth.auth_flow` is the model): it yields a step, the driver sends back the
step's outcome, and what the flow returns is its own outcome. A step that fails is thrown into the flow at
its `yield`, so a flow catches what it can live with (an aspect whose generation failed is dropped) and lets
the rest end it. A flow does no I/O, holds no context and calls no engine, so a test runs it by sending
results into it (`typedrag.testing.flows`).

    step                        what the driver does                               what it sends back
    Plan(task, question)        the engine fills the task's schema                 the validated plan
    Expand(task, question)      an LLM writes more queries for the question        the queries ([] offline or off)
    Search(queries, k)          the retriever searches each query                  one list of hits per query
    Rank(queries, hits, k)      the reranker orders the hits for each query        one ranked list per query
    Number(hits)                numbers passages the first time a run sees them    the hits as numbered sources
    Write(task, final=...)      the engine writes (abstention, streaming: below)   Written
    Together(*flows)            runs the flows at once; one failing stops the rest each flow's outcome, in order
    Planned(plan, aspects)      tells the plan; keeps it should the run fall back  None
    Note(step, reason)          records a fallback in the trace                    None
    Tell(event, data)           tells a streaming client                           None

A `Write` marked `final` writes the answer: its text streams to a listening client, and when the abstention
policy (typedrag.abstain) finds its sources do not answer, the run's answer is an abstention (what the flow
returns is set aside). Any other `Write` the policy turns down comes back `declined`, with the reason, for
the flow to drop.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from typedrag.depths import Depths
from typedrag.engines.base import PlanT, PlanTask, WriteTask
from typedrag.records import ScoredPassage
from typedrag.result import Aspect

__all__ = [
    "Depths",
    "Expand",
    "Flow",
    "Note",
    "Number",
    "Plan",
    "Planned",
    "Rank",
    "Search",
    "Step",
    "Strategy",
    "StrategyOutput",
    "Tell",
    "Together",
    "Write",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Plan(Generic[PlanT]):
    """Fill `task`'s schema for `question`; PlanFailed (or LLMError) is thrown in when no valid plan comes."""

    task: PlanTask[PlanT]
    question: str


@dataclass(frozen=True)
class Expand:
    """More queries for `question`'s own search, written by the engine's model from `task` (a rewrite, and a
    hypothetical answer passage, HyDE): what the driver sends back is a list of queries, empty offline, when
    the pipeline's settings turn expansion off, or when the model fails (recorded)."""

    task: PlanTask[Any]
    question: str


@dataclass(frozen=True)
class Search:
    """The top `k` passages for each query (several queries are searched side by side)."""

    queries: tuple[str, ...]
    k: int

    def __init__(self, queries: list[str] | tuple[str, ...], k: int) -> None:
        object.__setattr__(self, "queries", tuple(queries))
        object.__setattr__(self, "k", k)


@dataclass(frozen=True)
class Rank:
    """`hits` ordered by the reranker for each query, best first: the `k` best (None: all of them)."""

    queries: tuple[str, ...]
    hits: tuple[ScoredPassage, ...]
    k: int | None = None

    def __init__(self, queries: list[str] | tuple[str, ...], hits: list[ScoredPassage] | tuple[ScoredPassage, ...], k: int | None = None) -> None:
        object.__setattr__(self, "queries", tuple(queries))
        object.__setattr__(self, "hits", tuple(hits))
        object.__setattr__(self, "k", k)


@dataclass(frozen=True)
class Number:
    """`hits` as numbered sources: a passage keeps the number it got when the run first saw it, so [n] means
    the same passage in every step, whatever order concurrent steps end in."""

    hits: tuple[ScoredPassage, ...]

    def __init__(self, hits: list[ScoredPassage] | tuple[ScoredPassage, ...]) -> None:
        object.__setattr__(self, "hits", tuple(hits))


@dataclass(frozen=True)
class Write:
    """Write `task`. `final`: the answer itself (streamed; abstains when its sources do not answer).
    `aspect` names the aspect a partial answer is for, in its span and in notes about its citations."""

    task: WriteTask
    final: bool = False
    aspect: str | None = None


@dataclass(frozen=True)
class Together:
    """Run `flows` at once; their outcomes come back in order. When one fails, the others are cancelled
    (and waited for) and its error is thrown into the flow that asked."""

    flows: tuple[Flow[Any], ...]

    def __init__(self, *flows: Flow[Any]) -> None:
        object.__setattr__(self, "flows", flows)


@dataclass(frozen=True)
class Planned:
    """The plan a typed flow follows, and the aspects it will fill in: told to a streaming client, and kept in
    the result (marked unused) should the run fall back to plain RAG or abstain."""

    plan: BaseModel
    aspects: list[Aspect] = field(default_factory=list)


@dataclass(frozen=True)
class Note:
    """A recorded degradation: `step` fell back or dropped something, for `reason`."""

    step: str
    reason: str


@dataclass(frozen=True)
class Tell:
    """Progress for a streaming client: `event` with its `data` (an aspect answered or dropped)."""

    event: str
    data: Mapping[str, Any]


Step = Plan[Any] | Expand | Search | Rank | Number | Write | Together | Planned | Note | Tell
Flow = Generator[Step, Any, T]  # yields steps, is sent their outcomes, returns its own


@dataclass
class StrategyOutput:
    """What a strategy's flow returns: the answer, the plan it followed and its aspects."""

    answer: str
    plan: BaseModel | None = None
    aspects: list[Aspect] = field(default_factory=list)


@runtime_checkable
class Strategy(Protocol):
    """Answers questions of one type. `name` appears in results as `strategy`."""

    @property
    def name(self) -> str: ...

    def flow(self, question: str, depths: Depths) -> Flow[StrategyOutput]:
        """The steps that answer `question`; raise StrategyError (or let PlanFailed end it) to fall back to plain RAG."""
        ...
