"""What a strategy asks for, as frozen values: the steps of its flow. `typedrag.driver` performs them.

A flow is a generator (httpx's `Auth.auth_flow` is the model): it yields a step, the driver sends back the
step's outcome, and what the flow returns is its own outcome. A step that fails is thrown into the flow at
its `yield`, so a flow catches what it can live with (an aspect whose generation failed is dropped) and lets
the rest end it. A flow does no I/O, holds no context and calls no engine, so a test runs it by sending
results into it (`typedrag.testing.flows`).

    step                        what the driver does                               what it sends back
    Plan(task, question)        the engine fills the task's schema                 the validated plan
    Expand(task, question)      an LLM writes more queries for the question        the queries ([] offline or off)
    Weigh(task, question)       an LLM weighs a debate's cases (never offline)     the Weighing (None offline)
    RewriteFollowUp(task, q, n) an LLM rewrites a follow-up to stand alone         Rewritten (None offline)
    ReadFollowUp(q, dialogue)   reads it alone from the conversation's own words   the Standalone question
    Search(queries, k)          the retriever searches each query                  one list of hits per query
    Rank(queries, hits, k)      the reranker orders the hits for each query        one ranked list per query
    Number(hits)                numbers passages the first time a run sees them    the hits as numbered sources
    Write(task, final=...)      the engine writes (abstention, streaming: below)   Written
    Classify(question)          the classifier types the question (or it is forced) its TypePrediction
    Check(task)                 the checker reads a "not in the sources" step      Written
    Cite(answer)                settles the answer's citation markers              Cited
    Mentioned(question)         the retriever says which names no passage holds    the unmentioned names
    Together(*flows)            runs the flows at once; one failing stops the rest each flow's outcome, in order
    Planned(plan, aspects)      tells the plan; keeps it should the run fall back  None
    Note(step, reason)          records a fallback in the trace                    None
    Tell(event, data)           tells a streaming client                           None

A step that performs work names its span (`span`, Haystack's one span per component run) and what its outcome
adds to it (`described`): the driver opens that span around the step and nothing else writes span attributes,
so what a trace says of a step is read here, beside the step.

A `Write` marked `final` writes the answer: its text streams to a listening client, and when the abstention
policy (typedrag.abstain) finds its sources do not answer, the run's answer is an abstention (what the flow
returns is set aside). Any other `Write` the policy turns down comes back `declined`, with the reason, for
the flow to drop.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from typedrag.depths import Depths
from typedrag.engines.base import Combined, PlanT, PlanTask, WriteTask
from typedrag.records import ScoredPassage
from typedrag.result import Aspect, Citation

__all__ = [
    "Attributes",
    "Check",
    "Cite",
    "Classify",
    "Cited",
    "Depths",
    "Expand",
    "Flow",
    "Mentioned",
    "Note",
    "Number",
    "Plan",
    "Planned",
    "Rank",
    "ReadFollowUp",
    "RewriteFollowUp",
    "Rewritten",
    "Search",
    "Span",
    "Step",
    "Strategy",
    "StrategyOutput",
    "Tell",
    "Together",
    "Weigh",
    "Write",
]

T = TypeVar("T")
PREFIX = "typedrag."  # typedrag's own attributes and spans (telemetry.PREFIX; the steps import no telemetry)
RETRIEVAL = "retrieval"  # the GenAI conventions' gen_ai.operation.name of a retrieval


@dataclass(frozen=True)
class Attributes:
    """Span attributes by their OpenTelemetry names (None values are left out); those named in `content` hold
    text from the question, the documents or a model, recorded only when the user opts in."""

    values: Mapping[str, Any] = field(default_factory=dict)
    content: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Span:
    """The span a step is performed in: its name and the attributes it opens with."""

    name: str
    attributes: Attributes = field(default_factory=Attributes)


def ours(content: Iterable[str] = (), /, **values: Any) -> Attributes:
    """typedrag's own attributes, `typedrag.<key>`; the keys in `content` are text (recorded on opt-in only)."""
    return Attributes(
        {PREFIX + key: value for key, value in values.items()}, frozenset(PREFIX + key for key in content)
    )


def _passage_ids(hit_lists: Iterable[Iterable[ScoredPassage]]) -> list[str]:
    return list(dict.fromkeys(hit.passage_id for hits in hit_lists for hit in hits))


class _Untraced:
    """A step with no span of its own: bookkeeping (numbering, notes, events) or a frame of other steps."""

    def span(self, by: str) -> Span | None:
        return None

    def described(self, outcome: Any) -> Attributes:
        return Attributes()


@dataclass(frozen=True)
class Plan(Generic[PlanT]):
    """Fill `task`'s schema for `question`; PlanFailed (or LLMError) is thrown in when no valid plan comes."""

    task: PlanTask[PlanT]
    question: str

    def span(self, by: str) -> Span | None:
        """`typedrag.plan`, with the task's role and the engine (`by`) that fills it."""
        return Span(PREFIX + "plan", ours(role=self.task.role, engine=by))

    def described(self, outcome: Any) -> Attributes:
        return Attributes()


@dataclass(frozen=True)
class Expand:
    """More queries for `question`'s own search, written by the engine's model from `task` (a rewrite, and a
    hypothetical answer passage, HyDE): what the driver sends back is a list of queries, empty offline, when
    the pipeline's settings turn expansion off, or when the model fails (recorded)."""

    task: PlanTask[Any]
    question: str

    def span(self, by: str) -> Span | None:
        """A plan span, as the queries are a plan the engine's model fills (only when it is asked)."""
        return Span(PREFIX + "plan", ours(role=self.task.role, engine=by))

    def described(self, outcome: Any) -> Attributes:
        return Attributes()


@dataclass(frozen=True)
class RewriteFollowUp:
    """A follow-up rewritten to stand alone by the engine's model from `task` (the conversation's `turns` in
    its prompt): the driver sends back the `Rewritten` question, or None from an engine with no model;
    PlanFailed (or LLMError) is thrown in when the model gives no valid rewrite."""

    task: PlanTask[Any]
    question: str
    turns: int

    def span(self, by: str) -> Span | None:
        return Span(PREFIX + "rewrite", ours(history_turns=self.turns))

    def described(self, outcome: Rewritten) -> Attributes:
        changed = outcome.question.casefold() != self.question.casefold()
        return ours(
            ["rewritten_question"],
            rewrite_by=outcome.by,
            rewritten=changed,
            rewritten_question=outcome.question if changed else self.question,
        )


@dataclass(frozen=True)
class Rewritten:
    """A `RewriteFollowUp`'s outcome: the question as the model rewrote it, and the engine that did."""

    question: str
    by: str


@dataclass(frozen=True)
class ReadFollowUp:
    """A follow-up read to stand alone from the conversation's own words (`dialogue`, typedrag.followup): the
    subject of the questions before it carried in where the index finds the follow-up leans on them, within
    `max_chars`. The driver sends back the `Standalone` question, what to search for it and what it carried."""

    question: str
    dialogue: tuple[Any, ...]  # the conversation's turns (typedrag.history.Turn)
    max_chars: int

    def span(self, by: str) -> Span | None:
        return Span(PREFIX + "rewrite", ours(history_turns=len(self.dialogue)))

    def described(self, outcome: Any) -> Attributes:
        return ours(
            ["rewritten_question"],
            rewrite_by="offline",
            rewritten=outcome.rewritten,
            rewritten_question=outcome.question,
        )


@dataclass(frozen=True)
class Weigh:
    """Whether the sources favour one side of a debate, by the engine's model from the perspectives' cases
    (`task`'s prompt holds them): the driver sends back the `Weighing`, or None from an engine with no model
    (offline nothing is weighed); PlanFailed (or LLMError) is thrown in when the model gives no valid one."""

    task: PlanTask[Any]
    question: str

    def span(self, by: str) -> Span | None:
        """A plan span, as the weighing is a plan the engine's model fills (only when it is asked)."""
        return Span(PREFIX + "plan", ours(role=self.task.role, engine=by))

    def described(self, outcome: Any) -> Attributes:
        return ours(leaning=getattr(outcome, "leaning", None))


@dataclass(frozen=True)
class Search:
    """The top `k` passages for each query (several queries are searched side by side)."""

    queries: tuple[str, ...]
    k: int

    def __init__(self, queries: list[str] | tuple[str, ...], k: int) -> None:
        object.__setattr__(self, "queries", tuple(queries))
        object.__setattr__(self, "k", k)

    def span(self, by: str) -> Span | None:
        """`typedrag.retrieve`, a GenAI retrieval span (`gen_ai.operation.name` "retrieval",
        `gen_ai.retrieval.top_k`; the query text only on opt-in)."""
        texts = list(self.queries)
        values = {
            "gen_ai.operation.name": RETRIEVAL,
            "gen_ai.retrieval.top_k": self.k,
            PREFIX + "queries": len(texts),
            PREFIX + "k": self.k,
            PREFIX + "query_texts": texts,
        }
        content = {PREFIX + "query_texts"}
        if len(texts) == 1:
            values["gen_ai.retrieval.query.text"] = texts[0]
            content.add("gen_ai.retrieval.query.text")
        return Span(PREFIX + "retrieve", Attributes(values, frozenset(content)))

    def described(self, outcome: list[list[ScoredPassage]]) -> Attributes:
        """The passages found: their ids (each once, in order), how many per query; with text recorded also
        `gen_ai.retrieval.documents` (id and score of each, the conventions' opt-in attribute)."""
        documents = [{"id": hit.passage_id, "score": float(hit.score)} for hits in outcome for hit in hits]
        return Attributes(
            {
                PREFIX + "hits": [len(hits) for hits in outcome],
                PREFIX + "passage_ids": _passage_ids(outcome),
                "gen_ai.retrieval.documents": json.dumps(documents),
            },
            frozenset({"gen_ai.retrieval.documents"}),
        )


@dataclass(frozen=True)
class Rank:
    """`hits` ordered by the reranker for each query, best first: the `k` best (None: all of them)."""

    queries: tuple[str, ...]
    hits: tuple[ScoredPassage, ...]
    k: int | None = None

    def __init__(
        self,
        queries: list[str] | tuple[str, ...],
        hits: list[ScoredPassage] | tuple[ScoredPassage, ...],
        k: int | None = None,
    ) -> None:
        object.__setattr__(self, "queries", tuple(queries))
        object.__setattr__(self, "hits", tuple(hits))
        object.__setattr__(self, "k", k)

    def span(self, by: str) -> Span | None:
        """`typedrag.rerank`, by the reranker named `by`."""
        k = len(self.hits) if self.k is None else self.k
        return Span(PREFIX + "rerank", ours(reranker=by, queries=len(self.queries), candidates=len(self.hits), k=k))

    def described(self, outcome: list[list[ScoredPassage]]) -> Attributes:
        """The passages kept, best first."""
        return ours(passage_ids=_passage_ids(outcome))


@dataclass(frozen=True)
class Number(_Untraced):
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

    def span(self, by: str) -> Span | None:
        """`typedrag.write` (an aspect's answer, the overview, a type's final answer), or `typedrag.aggregate` /
        `typedrag.mediate` for combining aspects, as a `Combined` task's `combine` says; `by` is the engine."""
        task = self.task
        name = task.combine if isinstance(task, Combined) else "write"
        attributes = ours(
            ["aspect"],
            role=task.role,
            engine=by,
            aspect=self.aspect,
            parts=len(task.parts) if isinstance(task, Combined) and task.parts else None,
            passage_ids=[source.passage_id for source in task.sources],
        )
        return Span(PREFIX + name, attributes)

    def described(self, outcome: Any) -> Attributes:
        """What the step gave (a `Written`): its length, the text on opt-in, and whether it was declined (the
        reason may quote a model's words: it is in the trace, not the span)."""
        return ours(
            ["output"], output_chars=len(outcome.text), output=outcome.text, declined=outcome.declined is not None
        )


@dataclass(frozen=True)
class Classify:
    """The question's type, which routes it to a strategy: `forced_type` if given, else the classifier's
    (`decided`: a type already decided, as batch evaluation decides once per question). Sent back the
    `TypePrediction` (typedrag.classify.base)."""

    question: str
    forced_type: str | None = None
    decided: Any = None

    def span(self, by: str) -> Span | None:
        return Span(PREFIX + "classify")

    def described(self, outcome: Any) -> Attributes:
        """The verdict: type, confidence and who decided (classifier, LLM or forced)."""
        return ours(
            **{
                "question.type": str(outcome.label),
                "question.type_confidence": round(outcome.confidence, 4),
                "question.type_source": outcome.source,
            }
        )


@dataclass(frozen=True)
class FillGap(Write):
    """knowledge = "labelled": what the passages found for the part a final step's model would answer from its own
    knowledge say about it, written as the engine writes it (no abstention gate or checker reads it: an empty reply
    keeps the model's part). The driver performs it after such a step (never a flow); its span is a write's."""


@dataclass(frozen=True)
class Check:
    """A model's "not in the sources" for a partial answer, checked: `task` (a `Grounded` step over the same
    passages) written by the checker, the extractive engine beside the model, whose reader says whether a
    sentence of them answers. The driver performs it for a declined aspect or overview (never a flow)."""

    task: WriteTask

    def span(self, by: str) -> Span | None:
        """`typedrag.check`, with the role and the checker (`by`)."""
        return Span(
            PREFIX + "check",
            ours(role=self.task.role, engine=by, passage_ids=[s.passage_id for s in self.task.sources]),
        )

    def described(self, outcome: Any) -> Attributes:
        """Whether the checker found a sentence that answers (then the step is answered with what it quotes)."""
        return ours(supported=outcome.supported, best=outcome.best)


@dataclass(frozen=True)
class Mentioned:
    """The names `question` uses ("Proxmox", "pgBackRest") that no passage of the documents holds, as the
    retriever says (typedrag.abstain.unmentioned_names): the unknown-name check of the offline abstention
    policy, which the pipeline asks of the driver before the question's policy is set. Sent back: those names."""

    question: str

    def span(self, by: str) -> Span | None:
        return Span(PREFIX + "names", ours(retriever=by))

    def described(self, outcome: list[str]) -> Attributes:
        return ours(["unmentioned"], unmentioned_count=len(outcome), unmentioned=outcome)


@dataclass(frozen=True)
class Cite:
    """The answer's citations: a model's markers settled against the run's sources (repaired or removed),
    each cited sentence resolved to its passages. The driver cites the answer of every run that answers."""

    answer: str

    def span(self, by: str) -> Span | None:
        return Span(PREFIX + "cite")

    def described(self, outcome: Cited) -> Attributes:
        """Cited sentences, the passages they cite, markers repaired or removed."""
        ids = list(dict.fromkeys(pid for citation in outcome.citations for pid in citation.passage_ids))
        return ours(citations=len(outcome.citations), cited_passage_ids=ids, repairs=len(outcome.notes))


@dataclass(frozen=True)
class Cited:
    """A `Cite`'s outcome: the answer as settled, its citations, and what settling it repaired or removed."""

    text: str
    citations: list[Citation]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Together(_Untraced):
    """Run `flows` at once; their outcomes come back in order. When one fails, the others are cancelled
    (and waited for) and its error is thrown into the flow that asked."""

    flows: tuple[Flow[Any], ...]

    def __init__(self, *flows: Flow[Any]) -> None:
        object.__setattr__(self, "flows", flows)


@dataclass(frozen=True)
class Planned(_Untraced):
    """The plan a typed flow follows, and the aspects it will fill in: told to a streaming client, and kept in
    the result (marked unused) should the run fall back to plain RAG or abstain."""

    plan: BaseModel
    aspects: list[Aspect] = field(default_factory=list)


@dataclass(frozen=True)
class Note(_Untraced):
    """A recorded degradation: `step` fell back or dropped something, for `reason`."""

    step: str
    reason: str


@dataclass(frozen=True)
class Tell(_Untraced):
    """Progress for a streaming client: `event` with its `data` (an aspect answered or dropped)."""

    event: str
    data: Mapping[str, Any]


Step = (
    Plan[Any]
    | Expand
    | Weigh
    | RewriteFollowUp
    | ReadFollowUp
    | Classify
    | Mentioned
    | Search
    | Rank
    | Number
    | Write
    | FillGap
    | Check
    | Cite
    | Together
    | Planned
    | Note
    | Tell
)
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
