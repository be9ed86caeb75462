"""Issue 34: every answer an OpenTelemetry trace. Spans are read from the SDK's in-memory exporter behind a
TracerProvider set the way a host program sets its own; one test runs `typedrag ask` as a subprocess that
exports over OTLP/HTTP to a real receiver on loopback (typedrag.testing.otlp_receiver)."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from typedrag import OfflineEngine, Pipeline, telemetry
from typedrag.pipeline import PipelineSettings
from typedrag.classify import load_default_classifier
from typedrag.config import load_settings
from typedrag.engines.llm_engine import LLMEngine
from typedrag.index import open_retriever
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.steps import Search, Span, ours
from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_responder
from typedrag.testing.otlp_receiver import OTLPReceiver

from otel_fixtures import ancestors, by_name, no_provider, spans  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
REASON = "Why did the Western Roman Empire fall?"
COMPARISON = "What is the difference between a crocodile and an alligator?"


@pytest.fixture(scope="module")
def classifier():
    return load_default_classifier()


@pytest.fixture(scope="module")
def offline(small_index, classifier) -> Pipeline:
    return Pipeline(OfflineEngine(), open_retriever(small_index), classifier=classifier)


def stub_pipeline(stub: OpenAIStubServer, small_index: Path, classifier) -> Pipeline:
    model = OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0, timeout=20)
    unexpanded = PipelineSettings(
        expand_queries=False
    )  # the spans of each step's calls, counted; expansion has its own tests
    return Pipeline(LLMEngine(model), open_retriever(small_index), classifier=classifier, settings=unexpanded)


def all_text(finished) -> str:
    """Every attribute and event value of every span, as one string."""
    values = []
    for span in finished:
        values += [json.dumps(v, default=str) for v in span.attributes.values()]
        values += [json.dumps(dict(e.attributes), default=str) for e in span.events]
    return "\n".join(values)


# ---------------------------------------------------------------- one trace per answer, a span per step


def test_a_decomposing_answer_is_one_trace_with_a_span_for_each_step(spans, offline):
    result = asyncio.run(offline.answer(REASON))
    assert result.strategy == "reason"
    finished = spans.get_finished_spans()
    assert len({s.context.trace_id for s in finished}) == 1
    named = by_name(finished)
    (root,) = named["typedrag.answer"]
    assert root.parent is None
    assert {"typedrag.classify", "typedrag.plan", "typedrag.retrieve", "typedrag.rerank", "typedrag.write",
            "typedrag.aggregate", "typedrag.cite"} <= set(named)  # fmt: skip
    assert all(ancestors(s, finished)[-1:] == ["typedrag.answer"] for s in finished if s is not root)
    attributes = root.attributes
    assert attributes["typedrag.question.type"] == result.type.type == "REASON"
    assert attributes["typedrag.question.type_confidence"] == result.type.confidence
    assert attributes["typedrag.strategy"] == "reason" and attributes["typedrag.method"] == "typed"
    assert list(attributes["typedrag.passage_ids"]) == [s.passage_id for s in result.sources]
    assert attributes["typedrag.fallbacks"] == len(result.fallbacks)
    (classify,) = named["typedrag.classify"]
    assert classify.attributes["typedrag.question.type"] == "REASON"
    # each planned aspect is answered in a write span of its own, beside the overview's
    writes = named["typedrag.write"]
    assert sorted(w.attributes["typedrag.role"] for w in writes) == sorted(
        ["overview:reason"]
        + ["aspect:reason"] * sum(1 for a in result.aspects if a.label != "overview" and a.source_numbers)
    )
    retrieved = {pid for s in named["typedrag.retrieve"] for pid in s.attributes["typedrag.passage_ids"]}
    assert {s.passage_id for s in result.sources} <= retrieved


def test_the_spans_nest_in_the_trace_of_a_program_that_set_its_own_provider(spans, offline):
    tracer = trace.get_tracer("host-program")
    with tracer.start_as_current_span("handle request") as host:
        asyncio.run(offline.answer(COMPARISON))
    finished = spans.get_finished_spans()
    (answer,) = by_name(finished)["typedrag.answer"]
    assert answer.parent.span_id == host.get_span_context().span_id
    assert {s.context.trace_id for s in finished} == {host.get_span_context().trace_id}
    # the question's own search, then the two items' together
    assert [s.attributes["typedrag.queries"] for s in by_name(finished)["typedrag.retrieve"]][:2] == [1, 2]


def test_a_recorded_fallback_is_an_event_on_its_step(spans, small_index, classifier):
    def no_plan(request):
        return (
            Reply(content="no json here")
            if request.schema_name or '"sub_queries"' in request.prompt
            else default_responder(request)
        )

    with OpenAIStubServer(no_plan) as stub:
        result = asyncio.run(stub_pipeline(stub, small_index, classifier).answer(REASON, forced_type="reason"))
    assert result.strategy == "rag"  # the plan failed twice: plain RAG, recorded
    events = [
        (span.name, dict(e.attributes))
        for span in spans.get_finished_spans()
        for e in span.events
        if e.name == "typedrag.fallback"
    ]
    assert (
        "typedrag.answer",
        {"typedrag.fallback.step": "reason"},
    ) in events  # the reason may quote the reply: content
    (root,) = by_name(spans.get_finished_spans())["typedrag.answer"]
    assert root.attributes["typedrag.strategy"] == "rag" and "reason" in root.attributes["typedrag.fallback_steps"]


# ---------------------------------------------------------------- model calls: the GenAI semantic conventions


def test_every_model_call_is_a_genai_client_span_inside_its_step(spans, small_index, classifier):
    with OpenAIStubServer() as stub:
        result = asyncio.run(stub_pipeline(stub, small_index, classifier).answer(REASON))
    finished = spans.get_finished_spans()
    calls = by_name(finished)["chat stub"]
    assert len(calls) == len(result.llm_calls) >= 3  # plan, overview, aspects with passages of their own, aggregate
    port = int(stub.base_url.split(":")[2].split("/")[0])
    for span in calls:
        a = span.attributes
        assert span.kind is SpanKind.CLIENT
        assert (a["gen_ai.operation.name"], a["gen_ai.provider.name"], a["gen_ai.request.model"]) == (
            "chat",
            "openai",
            "stub",
        )
        assert (a["server.address"], a["server.port"]) == ("127.0.0.1", port)
        assert a["gen_ai.response.finish_reasons"] == ("stop",)
        record = next(c for c in result.llm_calls if c.role == a["typedrag.role"])
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["gen_ai.output.type"] == ("json" if record.role.startswith("plan:") else "text")
        step = ancestors(span, finished)[0]
        assert step == {"plan": "typedrag.plan", "aggregate": "typedrag.aggregate"}.get(
            record.role.split(":")[0], "typedrag.write"
        )
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in calls) == result.usage.prompt_tokens
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in calls) == result.usage.completion_tokens


def test_a_model_call_span_names_the_response_and_the_model_that_wrote_it(spans):
    """Issue 41 #10: gen_ai.response.id and gen_ai.response.model, as the endpoint sent them (a model alias is
    answered by a dated model), for a whole reply and a streamed one."""

    def dated(request):
        if request.body.get("stream"):
            return default_responder(request)
        completion = {"id": "chatcmpl-round5", "object": "chat.completion", "created": 0, "model": "stub-2025-01-01",
                      "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Rome fell [1]."}}],
                      "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}  # fmt: skip
        return Reply(raw=json.dumps(completion).encode(), headers={"Content-Type": "application/json"})

    with OpenAIStubServer(dated) as stub:
        model = OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0, timeout=20)
        asyncio.run(model.complete([{"role": "user", "content": "Why?"}], role="answer:rag"))
        asyncio.run(
            model.complete([{"role": "user", "content": "Why?"}], role="answer:rag", on_text=lambda piece: None)
        )
    whole, streamed = by_name(spans.get_finished_spans())["chat stub"]
    assert (whole.attributes["gen_ai.response.id"], whole.attributes["gen_ai.response.model"]) == (
        "chatcmpl-round5",
        "stub-2025-01-01",
    )
    assert (
        streamed.attributes["gen_ai.response.id"].startswith("chatcmpl-stub-")
        and streamed.attributes["gen_ai.response.model"] == "stub"
    )


def test_a_retrieval_step_is_a_genai_retrieval_span(spans, offline):
    """Issue 41 #10: the GenAI conventions' retrieval operation (semantic-conventions-genai, retrieval span):
    gen_ai.operation.name "retrieval" and gen_ai.retrieval.top_k; the query text and documents only on opt-in."""
    asyncio.run(offline.answer(REASON, method="rag"))
    (retrieval,) = by_name(spans.get_finished_spans())["typedrag.retrieve"]
    a = retrieval.attributes
    assert a["gen_ai.operation.name"] == "retrieval" and a["gen_ai.retrieval.top_k"] == a["typedrag.k"] > 0
    assert "gen_ai.retrieval.query.text" not in a and "gen_ai.retrieval.documents" not in a

    spans.clear()
    telemetry.record_content(True)
    asyncio.run(offline.answer(REASON, method="rag"))
    (retrieval,) = by_name(spans.get_finished_spans())["typedrag.retrieve"]
    assert retrieval.attributes["gen_ai.retrieval.query.text"] == REASON
    documents = json.loads(retrieval.attributes["gen_ai.retrieval.documents"])
    assert (
        documents
        and {"id", "score"} == set(documents[0])
        and documents[0]["id"] in retrieval.attributes["typedrag.passage_ids"]
    )


def test_a_failed_model_call_carries_its_error_type(spans, small_index, classifier):
    with OpenAIStubServer(lambda request: Reply(status=500, content="down")) as stub:
        with pytest.raises(Exception):
            asyncio.run(stub_pipeline(stub, small_index, classifier).answer(COMPARISON, method="llm"))
    (call,) = by_name(spans.get_finished_spans())["chat stub"]
    assert call.attributes["error.type"] == "LLMError" and call.status.status_code is StatusCode.ERROR
    (answer,) = by_name(spans.get_finished_spans())["typedrag.answer"]
    assert answer.status.status_code is StatusCode.ERROR


def test_a_framework_chat_model_call_is_a_genai_span_too(spans):
    pytest.importorskip("langchain_core")
    from langchain_core.language_models import FakeListChatModel

    from typedrag.integrations.langchain import LangChainChatModel

    model = LangChainChatModel(FakeListChatModel(responses=["Comets are icy [1]."]), name="langchain:fake-list")
    asyncio.run(model.complete([{"role": "user", "content": "Compare comets."}], role="answer:comparison"))
    (span,) = by_name(spans.get_finished_spans())["chat fake-list"]
    assert (span.attributes["gen_ai.provider.name"], span.attributes["typedrag.role"]) == (
        "langchain",
        "answer:comparison",
    )


# ---------------------------------------------------------------- text only on opt-in


def test_no_question_passage_or_answer_text_in_spans_unless_opted_in(spans, small_index, classifier):
    with OpenAIStubServer() as stub:
        pipeline = stub_pipeline(stub, small_index, classifier)
        result = asyncio.run(pipeline.answer(REASON))
        recorded = all_text(spans.get_finished_spans())
        assert "Roman" not in recorded and "Stub answer" not in recorded
        assert not any(source.text[:40] in recorded for source in result.sources)

        spans.clear()
        os.environ[telemetry.CONTENT_ENV] = "1"  # removed again by the fixture
        result = asyncio.run(pipeline.answer(REASON))
    finished = spans.get_finished_spans()
    (root,) = by_name(finished)["typedrag.answer"]
    assert root.attributes["typedrag.question"] == REASON and root.attributes["typedrag.answer"] == result.answer
    plan_call = next(s for s in by_name(finished)["chat stub"] if s.attributes["typedrag.role"] == "plan:reason")
    assert REASON in json.loads(plan_call.attributes["gen_ai.input.messages"])[-1]["parts"][0]["content"]
    assert json.loads(plan_call.attributes["gen_ai.output.messages"])[0]["role"] == "assistant"
    assert any(
        REASON in text for s in by_name(finished)["typedrag.retrieve"] for text in s.attributes["typedrag.query_texts"]
    )


def test_the_setting_and_the_environment_variable_turn_text_on(no_provider, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TYPEDRAG_CONFIG", raising=False)
    assert load_settings(env={}).trace_content is False
    assert load_settings(env={"TYPEDRAG_TRACE_CONTENT": "1"}).trace_content is True
    (tmp_path / "typedrag.toml").write_text("trace_content = true\n")
    assert load_settings(env={}).trace_content is True
    from typedrag.commands import settings_from

    assert not telemetry.content_recorded()
    settings_from()  # every command loads its settings through this
    assert telemetry.content_recorded()


def test_a_span_named_by_a_step_keeps_its_text_out_unless_opted_in(spans):
    with telemetry.answering("and the second?", "typed"):
        with telemetry.opened(Span("typedrag.rewrite", ours(history_turns=4))) as span:
            telemetry.said(
                span, ours(["rewritten_question"], rewritten_question="What is the second cause?", rewritten=True)
            )
    finished = spans.get_finished_spans()
    (rewrite,) = by_name(finished)["typedrag.rewrite"]
    assert rewrite.attributes["typedrag.history_turns"] == 4 and rewrite.attributes["typedrag.rewritten"] is True
    assert "typedrag.rewritten_question" not in rewrite.attributes
    assert ancestors(rewrite, finished) == ["typedrag.answer"]


FIRST_TURN = [
    {"role": "user", "content": "Tell me about the decline of the Western Roman Empire."},
    {"role": "assistant", "content": "Historians list many causes [1]."},
]


def test_a_follow_up_is_rewritten_inside_a_rewrite_span_before_it_is_classified(spans, small_index, classifier):
    def responder(request):
        if request.schema_name == "StandaloneQuestion":
            return Reply(content=json.dumps({"question": REASON}))
        return default_responder(request)

    with OpenAIStubServer(responder) as stub:
        result = asyncio.run(
            stub_pipeline(stub, small_index, classifier).answer("And why did it fall?", history=FIRST_TURN)
        )
    assert result.standalone_question == REASON
    finished = spans.get_finished_spans()
    named = by_name(finished)
    (rewrite,) = named["typedrag.rewrite"]
    assert ancestors(rewrite, finished) == ["typedrag.answer"]
    assert rewrite.attributes["typedrag.history_turns"] == 2
    assert (rewrite.attributes["typedrag.rewrite_by"], rewrite.attributes["typedrag.rewritten"]) == (
        result.rewrite.by,
        True,
    )
    assert "typedrag.rewritten_question" not in rewrite.attributes  # the question is content
    (call,) = [s for s in named["chat stub"] if s.attributes["typedrag.role"] == "rewrite"]
    assert ancestors(call, finished)[0] == "typedrag.rewrite"
    (classify,) = named["typedrag.classify"]
    assert rewrite.end_time <= classify.start_time


def test_an_offline_rewrite_has_its_span_and_a_question_without_history_none(spans, offline):
    result = asyncio.run(offline.answer("And why did it fall?", method="rag", history=FIRST_TURN))
    (rewrite,) = by_name(spans.get_finished_spans())["typedrag.rewrite"]
    assert rewrite.attributes["typedrag.rewrite_by"] == "offline" == result.rewrite.by
    spans.clear()
    asyncio.run(offline.answer(REASON, method="rag"))
    assert "typedrag.rewrite" not in by_name(spans.get_finished_spans())


def test_an_abstaining_answer_is_counted_once_and_marked_on_its_answer_span(spans, offline):
    heard = []
    stop = telemetry.listen("abstention", lambda **fields: heard.append(fields))
    try:
        result = asyncio.run(offline.answer("Which band played music on the deck of the Titanic?"))
        assert result.abstained
        assert heard == [
            {"reason": "unmentioned name", "question_type": result.type.type}
        ]  # no passage mentions the Titanic
        named = by_name(spans.get_finished_spans())
        (root,) = named["typedrag.answer"]
        assert root.attributes["typedrag.abstained"] is True
        assert [e.name for e in root.events].count("typedrag.abstain") == 1
        assert "typedrag.cite" not in named  # nothing was cited: the passages are the nearest ones, not an answer
        spans.clear()
        answered = asyncio.run(offline.answer(REASON))
    finally:
        stop()
    assert not answered.abstained and len(heard) == 1
    (root,) = by_name(spans.get_finished_spans())["typedrag.answer"]
    assert root.attributes["typedrag.abstained"] is False and "typedrag.abstain" not in [e.name for e in root.events]


def test_an_abstention_is_counted_by_listeners_and_marked_on_the_span(spans):
    heard = []
    stop = telemetry.listen("abstention", lambda **fields: heard.append(fields))
    try:
        with telemetry.answering("Why?", "typed"):
            telemetry.abstained("no passage supports an answer", "REASON")
    finally:
        stop()
    telemetry.abstained("after stop")
    assert heard == [{"reason": "no passage supports an answer", "question_type": "REASON"}]
    (root,) = by_name(spans.get_finished_spans())["typedrag.answer"]
    assert [e.name for e in root.events] == ["typedrag.abstain"]


# ---------------------------------------------------------------- off: no cost, nothing recorded


def test_without_a_provider_every_span_helper_is_the_shared_no_op(no_provider, offline):
    assert not telemetry.tracing()
    assert (
        telemetry.step("retrieve")
        is telemetry.answering("q", "typed")
        is telemetry.performing(Search(["q"], 3), "index")
        is telemetry._OFF
    )
    assert asyncio.run(offline.answer(REASON)).answer


def test_without_opentelemetry_installed_answers_work_untraced(no_provider, offline, monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    try:
        reload_telemetry()  # as imported where opentelemetry is absent
        assert telemetry._trace is None and not telemetry.tracing()
        assert telemetry.configure_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}).endswith(
            "needs the 'otel' extra: pip install 'typedrag[otel]'; answering without traces"
        )
        result = asyncio.run(offline.answer(REASON))
        assert result.strategy == "reason"
    finally:
        monkeypatch.undo()
        reload_telemetry()
    assert telemetry._trace is not None


def reload_telemetry() -> None:
    """typedrag.telemetry imported afresh: each of its modules, those it builds on first, then the package."""
    for name in ("base", "events", "answer", "calls", "http", "export"):
        importlib.reload(sys.modules[f"typedrag.telemetry.{name}"])
    importlib.reload(telemetry)


# ---------------------------------------------------------------- configuration by OTEL_* variables


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
        {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
    ],
)
def test_no_otel_variables_asking_for_traces_set_nothing_up(no_provider, environ):
    assert telemetry.configure_from_environment(environ) is None
    assert not telemetry.tracing()


@pytest.mark.parametrize(
    ("environ", "warning"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER=zipkin is not supported by typedrag"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            "OTEL_EXPORTER_OTLP_PROTOCOL=http/json is not supported",
        ),
    ],
)
def test_otel_variables_typedrag_cannot_honour_are_one_warning(no_provider, environ, warning):
    assert warning in telemetry.configure_from_environment(environ)
    assert not telemetry.tracing()


def test_an_otlp_endpoint_sets_up_an_sdk_provider_named_by_the_standard_variables(no_provider):
    assert telemetry.configure_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}) is None
    provider = trace.get_tracer_provider()
    try:
        assert telemetry.tracing() and provider.resource.attributes["service.name"] == "typedrag"
    finally:
        provider.shutdown()


def test_a_provider_the_program_set_is_left_alone(spans):
    own = trace.get_tracer_provider()
    assert telemetry.configure_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}) is None
    assert trace.get_tracer_provider() is own


# ---------------------------------------------------------------- the command line, over OTLP/HTTP


def test_typedrag_ask_sends_one_trace_per_answer_over_otlp_http(small_index, tmp_path):
    with OTLPReceiver() as receiver:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
               "OTEL_SERVICE_NAME": "typedrag-under-test", "TYPEDRAG_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
        env.pop(telemetry.CONTENT_ENV, None)
        out = subprocess.run([sys.executable, "-m", "typedrag.cli", "ask", REASON, "--index", str(small_index), "--json"],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["strategy"] == "reason"
        received = receiver.wait_for(5)  # sent at exit, by the time the process ended
    assert len({s.trace_id for s in received}) == 1
    assert len(received) >= 5
    names = {s.name for s in received}
    assert {"typedrag.answer", "typedrag.classify", "typedrag.plan", "typedrag.retrieve"} <= names
    assert {s.service for s in received} == {"typedrag-under-test"}
    (root,) = [s for s in received if s.name == "typedrag.answer"]
    assert root.parent_span_id == "" and root.attributes["typedrag.question.type"] == "REASON"
    assert "typedrag.question" not in root.attributes


def test_a_listeners_owner_that_is_gone_is_not_kept_alive_nor_called():
    """An app whose shutdown never ran (its metrics never closed) must not keep its pipeline alive through
    the process-wide listener list."""
    import gc
    import weakref

    class Owner:
        heard = 0

        def hear(self, **fields):
            Owner.heard += 1

    owner = Owner()
    telemetry.listen("abstention", owner.hear)
    telemetry.abstained("x")
    gone = weakref.ref(owner)
    del owner
    gc.collect()
    assert gone() is None
    telemetry.abstained("y")
    assert Owner.heard == 1
