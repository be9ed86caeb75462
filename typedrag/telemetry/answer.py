"""The spans of one answer and its steps: `typedrag.answer`, and a child per step (`typedrag.classify`,
`typedrag.rewrite`, `typedrag.plan`, `typedrag.names`, `typedrag.retrieve`, `typedrag.rerank`, `typedrag.write`,
`typedrag.check`, `typedrag.aggregate` or `typedrag.mediate`, `typedrag.cite`), with fallbacks and abstentions as events.

A step names its own span and what its outcome adds (typedrag.steps: `span`, `described`); the driver opens
it (`performing`) and describes it (`performed`), so nothing here knows one step from another."""

from __future__ import annotations

from typing import Any

from typedrag.telemetry.base import (
    _OFF,
    _clean,
    _trace,
    content_recorded,
    describe,
    opened,
    recording,
    said,
    step,
    tracing,
)
from typedrag.telemetry.events import _tell

RETRIEVAL = "retrieval"  # the GenAI conventions' gen_ai.operation.name of a retrieval (typedrag.steps.RETRIEVAL)

# ---------------------------------------------------------------- the answer and its steps


def answering(question: str, method: str) -> Any:
    """The root span of one answer (a child of the current span: a server request, a host program's own)."""
    if not tracing():
        return _OFF
    attributes: dict[str, Any] = {"method": method}
    if content_recorded():
        attributes["question"] = question
    return step("answer", **attributes)


def answered(span_: Any, result: Any) -> None:
    """What the answer span says once the answer is done: type, strategy, fallbacks, passages, usage; an
    answer that abstains is counted (`abstained`), whether spans are recorded or not."""
    if result.abstention is not None:
        abstained(result.abstention.by, result.type.type if result.type is not None else None)
    if not recording(span_):
        return
    kind = result.type
    describe(
        span_,
        strategy=result.strategy,
        **(
            {
                "question.type": kind.type,
                "question.type_confidence": kind.confidence,
                "question.type_source": kind.source,
            }
            if kind
            else {}
        ),
        plan_used=result.plan_used,
        abstained=result.abstained,
        aspects=len(result.aspects),
        fallbacks=len(result.fallbacks),
        fallback_steps=[f.step if content_recorded() else step_kind(f.step) for f in result.fallbacks],
        passage_ids=[s.passage_id for s in result.sources],
        cited_passage_ids=list(dict.fromkeys(pid for c in result.citations for pid in c.passage_ids)),
        engine=result.engines.generator,
        retriever=result.engines.retriever,
        llm_calls=result.usage.calls,
        **{"usage.input_tokens": result.usage.prompt_tokens, "usage.output_tokens": result.usage.completion_tokens},
        answer=result.answer if content_recorded() else None,
    )


def performing(step_: Any, by: str) -> Any:
    """The span a step is performed in, as the step names it (`step.span(by)`: typedrag.steps), or none."""
    if not tracing():
        return _OFF
    return opened(step_.span(by))


def performed(span_: Any, step_: Any, outcome: Any) -> None:
    """What the step's outcome adds to its span (`step.described(outcome)`), read only while it records."""
    if recording(span_):
        said(span_, step_.described(outcome))


def fallback(step_name: str, reason: str) -> None:
    """A recorded degradation, as an event on the current span (the step it happened in)."""
    if tracing():
        current = _trace.get_current_span()
        if current.is_recording():
            if content_recorded():
                current.add_event(
                    "typedrag.fallback", {"typedrag.fallback.step": step_name, "typedrag.fallback.reason": reason}
                )
            else:
                current.add_event("typedrag.fallback", {"typedrag.fallback.step": step_kind(step_name)})


def step_kind(step_name: str) -> str:
    """A fallback's step without what follows its colon: "aspect:<label>" names an aspect by text that
    comes from the question, and a reason may quote a model's reply, so both are content."""
    return step_name.split(":", 1)[0]


def abstained(reason: str, question_type: str | None = None) -> None:
    """Count an answer typedrag declined to give (the service's `typedrag_abstentions_total`), and mark it
    on the current span. Whatever decides to abstain calls this once per abstention."""
    if tracing():
        current = _trace.get_current_span()
        if current.is_recording():
            current.add_event(
                "typedrag.abstain", _clean({"typedrag.abstain.reason": reason, "typedrag.question.type": question_type})
            )
    _tell("abstention", reason=reason, question_type=question_type)
