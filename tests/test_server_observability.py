"""Issue 34 on the service: `/metrics` read by prometheus_client's own parsers (the app called in process), and
`typedrag serve` continuing a caller's W3C trace, on a real uvicorn server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from opentelemetry.trace import SpanKind
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from typedrag import OfflineEngine, Pipeline, telemetry
from typedrag.config import Settings
from typedrag.engines.llm_engine import LLMEngine
from typedrag.index import open_retriever
from typedrag.index.tantivy import sync_index
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.server.app import create_app
from typedrag.server.metrics import RequestObserver, ServiceMetrics
from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_responder

from conftest import write_corpus
from test_server import classifier, in_process, serving  # noqa: F401  (tests/ is on sys.path, as for conftest)
from otel_fixtures import ancestors, by_name, no_provider, spans  # noqa: F401

COMPARISON = "What is the difference between a crocodile and an alligator?"
REASON = "Why did the Western Roman Empire fall?"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def offline_app(index: Path, classifier):
    return create_app(
        Settings(index=index, cache_dir=None), Pipeline(OfflineEngine(), open_retriever(index), classifier=classifier)
    )


async def scrape(client: httpx.AsyncClient) -> dict[str, object]:
    """The metric families of a /metrics scrape, by name, as prometheus_client's parser reads them."""
    response = await client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def value(family, **labels) -> float:
    """The sample of `family` with exactly these labels (the counter's `_total`, a gauge's value)."""
    found = [s.value for s in family.samples if s.labels == labels and not s.name.endswith("_created")]
    assert len(found) == 1, (labels, family.samples)
    return found[0]


def histogram_count(family, **labels) -> float:
    return next(s.value for s in family.samples if s.name.endswith("_count") and s.labels == labels)


# ---------------------------------------------------------------- /metrics


async def test_metrics_count_requests_by_route_and_status_with_latency_histograms(small_index, classifier):
    async with in_process(offline_app(small_index, classifier)) as client:
        assert (await client.post("/v1/answer", json={"question": COMPARISON})).status_code == 200
        assert (await client.post("/v1/answer", json={"question": REASON, "method": "rag"})).status_code == 200
        assert (await client.post("/v1/answer", json={"question": ""})).status_code == 422
        assert (await client.get("/no/such/page")).status_code == 404
        assert (await client.get("/healthz")).status_code == 200
        families = await scrape(client)

    requests = families["typedrag_http_requests"]
    assert requests.type == "counter"
    assert value(requests, route="/v1/answer", method="POST", status="200") == 2
    assert value(requests, route="/v1/answer", method="POST", status="422") == 1
    assert value(requests, route="unmatched", method="GET", status="404") == 1  # never the path itself
    assert value(requests, route="/healthz", method="GET", status="200") == 1
    latency = families["typedrag_http_request_duration_seconds"]
    assert latency.type == "histogram" and histogram_count(latency, route="/v1/answer", method="POST") == 3
    buckets = [s for s in latency.samples if s.name.endswith("_bucket") and s.labels.get("route") == "/v1/answer"]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 3

    answers = families["typedrag_answers"]
    assert value(answers, method="typed", type="COMPARISON", strategy="comparison") == 1
    assert value(answers, method="rag", type="none", strategy="rag") == 1
    by_type = families["typedrag_answer_duration_seconds"]
    assert by_type.type == "histogram" and histogram_count(by_type, method="typed", type="COMPARISON") == 1
    assert value(families["typedrag_answer_slots_in_use"]) == 0 and value(families["typedrag_answer_slots"]) == 32
    assert value(families["typedrag_index_reloads"]) == 0
    assert "process_cpu_seconds" in families  # the process's own, as every Prometheus target has


async def test_metrics_count_llm_calls_tokens_and_errors_by_role_and_model(small_index, classifier):
    def failing_answers(request):  # plans are fine, every written answer fails
        return default_responder(request) if request.schema_name else Reply(status=500, content="down")

    with OpenAIStubServer(failing_answers) as stub:
        model = OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0, timeout=20)
        app = create_app(
            Settings(index=small_index, cache_dir=None),
            Pipeline(LLMEngine(model), open_retriever(small_index), classifier=classifier),
        )
        async with in_process(app) as client:
            failed = await client.post("/v1/answer", json={"question": COMPARISON, "type": "comparison"})
            assert failed.status_code == 502
            families = await scrape(client)
    calls, tokens, errors = (
        families["typedrag_llm_calls"],
        families["typedrag_llm_tokens"],
        families["typedrag_llm_errors"],
    )
    assert value(calls, role="plan:comparison", model="stub") == 1
    assert value(tokens, role="plan:comparison", model="stub", token_type="input") > 0
    assert value(tokens, role="plan:comparison", model="stub", token_type="output") > 0
    # the comparison's answer failed, then plain RAG's answer (the fallback) did too
    assert value(errors, role="answer:comparison", model="stub", error_type="LLMError") == 1
    assert value(errors, role="answer:rag", model="stub", error_type="LLMError") == 1
    # the question's search widened, on by default: the comparison's, then plain RAG's
    assert value(calls, role="expand:query", model="stub") == 2
    assert histogram_count(families["typedrag_llm_queue_wait_seconds"], model="stub") == 5
    assert value(families["typedrag_http_requests"], route="/v1/answer", method="POST", status="502") == 1


async def test_metrics_count_fallbacks_abstentions_and_index_reloads(tmp_path, classifier):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    index = tmp_path / "index"
    sync_index([corpus], index, passage_words=40, show_progress=False)
    async with in_process(offline_app(index, classifier)) as client:
        assert value((await scrape(client))["typedrag_index_reloads"]) == 0
        (tmp_path / "more.jsonl").write_text(
            json.dumps({"id": "tea", "title": "Tea", "text": "Tea is brewed from leaves."}) + "\n"
        )
        sync_index([corpus, tmp_path / "more.jsonl"], index, passage_words=40, show_progress=False)
        assert (
            await client.post("/v1/answer", json={"question": "How is tea brewed?", "method": "rag"})
        ).status_code == 200
        # a question the offline engine cannot type with confidence falls back to plain RAG, recorded
        assert (await client.post("/v1/answer", json={"question": "Photosynthesis"})).status_code == 200
        unanswered = {"question": "Which band played music on the deck of the Titanic?", "type": "reason"}
        abstained = (await client.post("/v1/answer", json=unanswered)).json()
        families = await scrape(client)
    assert value(families["typedrag_index_reloads"]) == 1
    assert value(families["typedrag_fallbacks"], step="route") == 1
    assert (
        abstained["abstained"] and abstained["abstention"]["by"] == "unmentioned name"
    )  # no passage mentions the Titanic
    assert value(families["typedrag_abstentions"], type="REASON") == 1  # that answer's, and no other


async def test_metrics_speak_openmetrics_to_a_scraper_that_asks(small_index, classifier):
    async with in_process(offline_app(small_index, classifier)) as client:
        response = await client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    names = {family.name for family in openmetrics_families(response.text)}
    assert {"typedrag_http_requests", "typedrag_answer_slots_in_use"} <= names


async def test_static_files_count_under_their_mount_not_as_unmatched(small_index, classifier):
    """Issue 41 #9: the page's assets are served by the /static mount, and counted so."""
    async with in_process(offline_app(small_index, classifier)) as client:
        assert (await client.get("/static/app.js")).status_code == 200
        assert (await client.get("/static/no-such-file.js")).status_code == 404
        assert (await client.get("/")).status_code == 200
        families = await scrape(client)
    requests = families["typedrag_http_requests"]
    assert value(requests, route="/static", method="GET", status="200") == 1
    assert value(requests, route="/static", method="GET", status="404") == 1
    assert value(requests, route="/", method="GET", status="200") == 1
    assert not [s for s in requests.samples if s.labels.get("route") == "unmatched"]


def test_every_label_takes_its_values_from_a_known_set():
    """Issue 41 #9: a fallback's step is its kind (an aspect's label is the question's words), and a step, a
    type or a strategy nobody listed counts as "other"; labels with no fixed list (model names) stop growing."""
    from typedrag.result import AnswerResult

    metrics = ServiceMetrics()
    result = AnswerResult.model_validate({
        "question": "q", "method": "typed", "strategy": "made-up-strategy", "answer": "a",
        "type": {"type": "MADE-UP-TYPE", "confidence": 1.0, "source": "forced"},
        "fallbacks": [{"step": "aspect:What the asker typed", "reason": "r"}, {"step": "route", "reason": "r"},
                      {"step": "reason", "reason": "r"}, {"step": "brand-new-step", "reason": "r"}],
        "engines": {"generator": "offline-extractive"}, "prompt_version": "v",
    })  # fmt: skip
    metrics.answered(result, 0.1)
    steps = {s.labels["step"]: s.value for s in metrics.fallbacks.collect()[0].samples if s.name.endswith("_total")}
    assert steps == {"aspect": 1, "route": 1, "reason": 1, "other": 1}
    (answer,) = [s.labels for s in metrics.answers.collect()[0].samples if s.name.endswith("_total")]
    assert answer == {"method": "typed", "type": "other", "strategy": "other"}

    class Call:
        prompt_tokens = completion_tokens = requests = 1
        latency_ms = queued_ms = 1.0

    for n in range(200):
        metrics.llm_call(role=f"plan:custom{n}", model=f"model-{n}", call=Call(), error=f"Error{n}")
    metrics.llm_call(role="not a role at all", model="model-0", call=Call(), error=None)
    samples = [s.labels for s in metrics.llm_calls.collect()[0].samples if s.name.endswith("_total")]
    assert len({s["model"] for s in samples}) <= 33 and len({s["role"] for s in samples}) <= 129
    assert {"role": "other", "model": "model-0"} in samples and {"role": "other", "model": "other"} in samples


# ---------------------------------------------------------------- the caller's trace continues


@pytest.mark.parametrize("route", ["/v1/answer", "/v1/answer/stream", "/v1/chat/completions"])
def test_serve_continues_the_callers_traceparent_and_its_request_span_holds_the_answer(
    spans, small_index, classifier, route
):
    body = (
        {"model": "typedrag-typed", "messages": [{"role": "user", "content": COMPARISON}]}
        if "chat" in route
        else {"question": COMPARISON}
    )
    with serving(offline_app(small_index, classifier)) as url:
        response = httpx.post(
            f"{url}{route}", json=body, timeout=60, headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
        )
        assert response.status_code == 200 and response.text
    finished = spans.get_finished_spans()
    (request,) = [s for s in finished if s.kind is SpanKind.SERVER]
    assert request.name == f"POST {route}" and request.attributes["http.route"] == route
    assert request.attributes["http.response.status_code"] == 200
    assert format(request.context.trace_id, "032x") == TRACE_ID and format(request.parent.span_id, "016x") == PARENT_ID
    (answer,) = by_name(finished)["typedrag.answer"]
    assert f"POST {route}" in ancestors(answer, finished)
    assert ancestors(by_name(finished)["typedrag.plan"][0], finished)[0] == "typedrag.answer"
    assert {s.context.trace_id for s in finished} == {int(TRACE_ID, 16)}


def test_without_a_traceparent_each_request_starts_its_own_trace(spans, small_index, classifier):
    with serving(offline_app(small_index, classifier)) as url:
        for _ in range(2):
            assert httpx.post(f"{url}/v1/answer", json={"question": COMPARISON}, timeout=60).status_code == 200
    requests = [s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert len(requests) == 2 and all(r.parent is None for r in requests)
    assert requests[0].context.trace_id != requests[1].context.trace_id


def test_the_request_observer_opens_the_server_span_where_the_framework_does_not(spans):
    """An older FastAPI (or plain Starlette) opens no request span: typedrag's middleware does, named by route."""

    async def answer(request):
        with telemetry.step("answer"):
            await asyncio.sleep(0)
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/v1/answer", answer, methods=["POST"])])
    metrics = ServiceMetrics()
    with serving(RequestObserver(app, metrics, trace_requests=True)) as url:
        assert (
            httpx.post(f"{url}/v1/answer", headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}).status_code == 200
        )
        assert httpx.post(f"{url}/v1/answer/nothing").status_code == 404
    finished = spans.get_finished_spans()
    served, missing = sorted((s for s in finished if s.kind is SpanKind.SERVER), key=lambda s: s.start_time)
    assert served.name == "POST /v1/answer" and format(served.parent.span_id, "016x") == PARENT_ID
    assert format(served.context.trace_id, "032x") == TRACE_ID and served.attributes["http.response.status_code"] == 200
    (inner,) = by_name(finished)["typedrag.answer"]
    assert inner.parent.span_id == served.context.span_id
    assert (
        missing.name == "POST" and missing.attributes["http.response.status_code"] == 404
    )  # no route: no path in the name
    assert (
        metrics.registry.get_sample_value(
            "typedrag_http_requests_total", {"route": "unmatched", "method": "POST", "status": "404"}
        )
        == 1
    )
