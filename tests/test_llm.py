"""The LLM layer against a real OpenAI-protocol HTTP server on loopback."""

from __future__ import annotations

import json

import pytest

from typedrag.llm.base import LLMError, StructuredOutcome
from typedrag.llm.cache import ResponseCache
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.llm.structured import extract_json, parse_structured
from typedrag.strategies.debate import DebatePlan
from typedrag.strategies.decomposed import SubQueryPlan
from typedrag.testing.openai_stub import OpenAIStubServer, Reply

MESSAGES = [{"role": "user", "content": "Question: Why do leaves change colour in autumn?"}]


def model_for(server: OpenAIStubServer, **kwargs) -> OpenAIChatModel:
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("timeout", 5)
    return OpenAIChatModel(model="stub-model", base_url=server.base_url, api_key="sk-test", **kwargs)


async def test_structured_output_is_requested_with_the_schema_and_parsed():
    reply = {"sub_queries": ["chlorophyll breakdown in autumn", "anthocyanin production in leaves"]}
    with OpenAIStubServer(lambda r: Reply(content=json.dumps(reply))) as server:
        completion = await model_for(server).complete(MESSAGES, role="plan:reason", schema=SubQueryPlan)
    assert completion.parsed == SubQueryPlan(**reply)
    assert completion.call.structured is StructuredOutcome.OK
    fmt = server.requests[0].body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "SubQueryPlan"
    assert fmt["json_schema"]["schema"]["properties"]["sub_queries"]["minItems"] == 2


async def test_fenced_and_preambled_json_is_recovered_without_a_second_request():
    text = 'Sure! Here is the plan:\n```json\n{"sub_queries": ["a cause", "another cause"]}\n```\nHope it helps.'
    with OpenAIStubServer(lambda r: Reply(content=text)) as server:
        completion = await model_for(server).complete(MESSAGES, role="plan:reason", schema=SubQueryPlan)
    assert completion.parsed.sub_queries == ["a cause", "another cause"]
    assert len(server.requests) == 1


def test_single_line_json_list_parses_regression_for_official_str2list():
    # The authors' str2list never returned a value, so every list-shaped plan failed.
    plan = parse_structured('["why is the sea salty", "minerals in river water"]', SubQueryPlan)
    assert plan.sub_queries == ["why is the sea salty", "minerals in river water"]


def test_valid_debate_plan_is_accepted_regression_for_official_isinstance_check():
    text = '{"topic": "nuclear power", "perspectives": [{"name": "advocates", "sub_query": "nuclear power low carbon"}, {"name": "opponents", "sub_query": "nuclear waste accidents risk"}]}'
    plan = parse_structured(text, DebatePlan)
    assert [p.name for p in plan.perspectives] == ["advocates", "opponents"]


def test_extract_json_rejects_prose():
    with pytest.raises(ValueError):
        extract_json("I think the answer is that there are several causes.")


async def test_invalid_output_gets_one_repair_request_then_is_marked_repaired():
    replies = iter(
        [Reply(content="Causes: sunlight, chlorophyll."), Reply(content='{"sub_queries": ["sunlight", "chlorophyll"]}')]
    )
    with OpenAIStubServer(lambda r: next(replies)) as server:
        completion = await model_for(server).complete(MESSAGES, role="plan:reason", schema=SubQueryPlan)
    assert completion.call.structured is StructuredOutcome.REPAIRED
    assert completion.call.requests == 2
    repair_prompt = server.requests[1].messages[-1]["content"]
    assert "could not be used" in repair_prompt and "sub_queries" in repair_prompt
    assert server.requests[1].messages[-2] == {"role": "assistant", "content": "Causes: sunlight, chlorophyll."}


async def test_still_invalid_after_repair_is_marked_failed_not_retried_forever():
    with OpenAIStubServer(lambda r: Reply(content='{"sub_queries": []}')) as server:
        completion = await model_for(server).complete(MESSAGES, role="plan:reason", schema=SubQueryPlan)
    assert completion.parsed is None
    assert completion.call.structured is StructuredOutcome.FAILED
    assert "at least 1" in completion.call.error
    assert len(server.requests) == 2


async def test_endpoint_without_json_schema_support_falls_back_to_json_mode():
    def responder(request):
        if (request.body.get("response_format") or {}).get("type") == "json_schema":
            return Reply(status=400, content="response_format json_schema is not supported")
        return Reply(content='{"sub_queries": ["a", "b"]}')

    with OpenAIStubServer(responder) as server:
        completion = await model_for(server).complete(MESSAGES, role="plan", schema=SubQueryPlan)
    assert completion.parsed.sub_queries == ["a", "b"]
    assert [r.body["response_format"]["type"] for r in server.requests] == ["json_schema", "json_object"]


async def test_429_with_retry_after_is_retried_then_succeeds():
    replies = iter([Reply(status=429, headers={"Retry-After": "0"}), Reply(content="Fine answer.")])
    with OpenAIStubServer(lambda r: next(replies)) as server:
        completion = await model_for(server).complete(MESSAGES, role="answer")
    assert completion.text == "Fine answer."
    assert len(server.requests) == 2


async def test_persistent_503_raises_a_clear_error_after_bounded_retries():
    with OpenAIStubServer(lambda r: Reply(status=503, headers={"Retry-After": "0"})) as server:
        with pytest.raises(LLMError, match="HTTP 503"):
            await model_for(server, max_retries=2).complete(MESSAGES, role="answer")
    assert len(server.requests) == 3


async def test_timeout_raises_llm_error():
    with OpenAIStubServer(lambda r: Reply(content="late", delay=2.0)) as server:
        with pytest.raises(LLMError, match="timed out"):
            await model_for(server, timeout=0.3, max_retries=0).complete(MESSAGES, role="answer")


async def test_connection_refused_names_the_endpoint():
    model = OpenAIChatModel(model="m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=2)
    with pytest.raises(LLMError, match="cannot reach http://127.0.0.1:9/v1"):
        await model.complete(MESSAGES, role="answer")


async def test_cache_hit_makes_no_request(tmp_path):
    with OpenAIStubServer() as server:
        first = await model_for(server, cache=ResponseCache(tmp_path)).complete(MESSAGES, role="answer")
        second = await model_for(server, cache=ResponseCache(tmp_path)).complete(MESSAGES, role="answer")
    assert len(server.requests) == 1
    assert second.text == first.text
    assert second.call.cached and second.call.requests == 0


async def test_api_key_never_appears_in_errors_or_cache(tmp_path):
    key = "sk-planted-secret-123456"
    with OpenAIStubServer(lambda r: Reply(status=401, content=f"bad key {r.headers.get('authorization')}")) as server:
        model = OpenAIChatModel(
            model="m", base_url=server.base_url, api_key=key, max_retries=0, cache=ResponseCache(tmp_path)
        )
        with pytest.raises(LLMError) as info:
            await model.complete(MESSAGES, role="answer")
    assert key not in str(info.value)
    assert "***" in str(info.value)
    assert key.encode() not in (tmp_path / "llm-cache.sqlite").read_bytes()


async def test_usage_tokens_are_recorded():
    with OpenAIStubServer() as server:
        completion = await model_for(server).complete(MESSAGES, role="answer")
    assert completion.call.prompt_tokens > 0 and completion.call.completion_tokens > 0
    assert completion.call.latency_ms > 0


def test_one_model_serves_several_event_loops():
    # Regression: the HTTP pool was bound to the first loop, so a second asyncio.run failed.
    import asyncio

    with OpenAIStubServer() as server:
        model = model_for(server)
        for _ in range(2):
            completion = asyncio.run(model.complete(MESSAGES, role="answer"))
            assert completion.text.startswith("Stub answer")


async def test_requests_started_together_leave_whole_one_after_another(monkeypatch):
    # Regression: each request wrote its headers, yielded, and its body waited until every other request
    # had been built, so the first of five aspect requests reached the server as late as the last.
    import asyncio

    from typedrag.llm import openai_chat

    events: list[str] = []
    build, trace = OpenAIChatModel._body, openai_chat._Turn.trace

    def recorded_build(self, params):
        events.append("built")
        return build(self, params)

    async def recorded_trace(self, event, info):
        if event.endswith("send_request_body.complete"):
            events.append("written")
        await trace(self, event, info)

    monkeypatch.setattr(OpenAIChatModel, "_body", recorded_build)
    monkeypatch.setattr(openai_chat._Turn, "trace", recorded_trace)
    with OpenAIStubServer() as server:
        model = model_for(server)
        await model.complete(MESSAGES, role="answer")  # opens the pool: its first connection is not the point
        events.clear()
        await asyncio.gather(
            *(model.complete([{"role": "user", "content": f"Question {i}?"}], role="answer") for i in range(5))
        )
    assert events == ["built", "written"] * 5


async def test_a_request_that_fails_or_is_cancelled_hands_its_turn_on():
    import asyncio

    replies = iter([Reply(drop=True), Reply(content="late", delay=30), Reply(content="Fine answer.")])
    with OpenAIStubServer(lambda r: next(replies)) as server:
        model = model_for(server, max_retries=0)
        with pytest.raises(LLMError):
            await model.complete(MESSAGES, role="answer")
        assert not model._sending.locked()
        waiting = asyncio.ensure_future(model.complete(MESSAGES, role="answer"))
        while not server.waiting:
            await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not model._sending.locked()
        assert (await model.complete(MESSAGES, role="answer")).text == "Fine answer."
