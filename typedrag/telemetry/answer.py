"""The spans of one answer and its steps: `typedrag.answer`, and a child per step (`typedrag.classify`,
`typedrag.rewrite`, `typedrag.plan`, `typedrag.retrieve`, `typedrag.rerank`, `typedrag.write`,
`typedrag.aggregate` or `typedrag.mediate`, `typedrag.cite`), with fallbacks and abstentions as events."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from typedrag.telemetry.base import (
    _OFF,
    PREFIX,
    _clean,
    _trace,
    content_recorded,
    describe,
    recording,
    span,
    step,
    tracing,
)
from typedrag.telemetry.events import _tell

W = TypeVar("W")  # a step's Written (typedrag.engines.base), not imported: the engines import nothing from here
RETRIEVAL = "retrieval"  # the GenAI conventions' gen_ai.operation.name of a retrieval

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
    """What the answer span says once the answer is done: type, strategy, fallbacks, passages, usage."""
    if not recording(span_):
        return
    kind = result.type
    describe(
        span_,
        strategy=result.strategy,
        **({"question.type": kind.type, "question.type_confidence": kind.confidence, "question.type_source": kind.source} if kind else {}),
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


def classified(span_: Any, decision: Any) -> None:
    """The classify span's verdict: type, confidence and who decided (classifier, LLM or forced)."""
    describe(span_, **{"question.type": str(decision.label), "question.type_confidence": round(decision.confidence, 4),
                       "question.type_source": decision.source})


def rewriting(turns: int) -> Any:
    """The span of rewriting a follow-up question into a stand-alone one from the conversation's earlier
    `turns`. The hook for conversations: the rewrite step runs inside it, then calls `rewritten`."""
    return step("rewrite", history_turns=turns)


def rewritten(span_: Any, question: str, *, by: str | None = None, changed: bool | None = None) -> None:
    """The rewrite step's outcome: who read the follow-up alone (a model, or "offline"), whether its words changed."""
    describe(span_, rewrite_by=by, rewritten=changed, rewritten_question=question if content_recorded() else None)


def retrieving(queries: Sequence[str], k: int) -> Any:
    """The span of one retrieval step: one or several queries (searched side by side), k passages each. It is
    a GenAI retrieval span (`gen_ai.operation.name` "retrieval", `gen_ai.retrieval.top_k`; the query text
    only on opt-in), named as typedrag's other steps are."""
    if not tracing():
        return _OFF
    texts = list(queries) if content_recorded() else None
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": RETRIEVAL,
        "gen_ai.retrieval.top_k": k,
        PREFIX + "queries": len(queries),
        PREFIX + "k": k,
        PREFIX + "query_texts": texts,
    }
    if texts is not None and len(texts) == 1:
        attributes["gen_ai.retrieval.query.text"] = texts[0]
    return span(PREFIX + "retrieve", attributes)


def found(span_: Any, hit_lists: Sequence[Sequence[Any]]) -> None:
    """The passages a retrieval step found: their ids (each once, in order) and how many per query; with text
    recorded also `gen_ai.retrieval.documents` (id and score of each, the conventions' opt-in attribute)."""
    if recording(span_):
        describe(span_, hits=[len(hits) for hits in hit_lists], passage_ids=_ids(hit_lists))
        if content_recorded():
            documents = [{"id": hit.passage_id, "score": float(hit.score)} for hits in hit_lists for hit in hits]
            span_.set_attribute("gen_ai.retrieval.documents", json.dumps(documents))


def reranking(reranker: str, queries: int, candidates: int, k: int) -> Any:
    return step("rerank", reranker=reranker, queries=queries, candidates=candidates, k=k)


def kept(span_: Any, hit_lists: Sequence[Sequence[Any]]) -> None:
    """The passages a rerank step kept, best first."""
    if recording(span_):
        describe(span_, passage_ids=_ids(hit_lists))


def _ids(hit_lists: Sequence[Sequence[Any]]) -> list[str]:
    return list(dict.fromkeys(hit.passage_id for hits in hit_lists for hit in hits))


def writing(task: Any, engine: str, aspect: str | None = None, *, name: str = "write") -> Any:
    """The span of one generation step, `typedrag.<name>`: `write` (an aspect's answer, the overview, a type's
    final answer), or `aggregate` / `mediate` for combining aspects (typedrag.driver names it by the step)."""
    if not tracing():
        return _OFF
    return step(
        name,
        role=task.role,
        engine=engine,
        aspect=aspect if content_recorded() else None,
        parts=len(getattr(task, "parts", ())) or None,  # a Combined step's aspects
        passage_ids=[source.passage_id for source in task.sources],
    )


async def written(task: Any, engine: str, writes: Awaitable[W], aspect: str | None = None, *, name: str = "write") -> W:
    """`await writes` (a step's Written) inside its writing span, `typedrag.<name>`."""
    with writing(task, engine, aspect, name=name) as span_:
        result = await writes
        text = result.text  # type: ignore[attr-defined]
        describe(span_, output_chars=len(text), output=text if content_recorded() else None)
        return result


def citing() -> Any:
    return step("cite")


def cited(span_: Any, citations: Sequence[Any], notes: int) -> None:
    """The cite step's outcome: cited sentences, the passages they cite, markers repaired or removed."""
    if recording(span_):
        ids = list(dict.fromkeys(pid for citation in citations for pid in citation.passage_ids))
        describe(span_, citations=len(citations), cited_passage_ids=ids, repairs=notes)


def fallback(step_name: str, reason: str) -> None:
    """A recorded degradation, as an event on the current span (the step it happened in)."""
    if tracing():
        current = _trace.get_current_span()
        if current.is_recording():
            if content_recorded():
                current.add_event("typedrag.fallback", {"typedrag.fallback.step": step_name, "typedrag.fallback.reason": reason})
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
            current.add_event("typedrag.abstain", _clean({"typedrag.abstain.reason": reason, "typedrag.question.type": question_type}))
    _tell("abstention", reason=reason, question_type=question_type)


