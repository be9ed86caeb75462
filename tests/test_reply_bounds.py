"""Issue 57 P9: a model reply's size is bounded (a setting; a longer one is cut, and its call says so), the repair
request shows the model a bounded excerpt of its reply, and the judges' logs keep bounded excerpts. Against a real
OpenAI-protocol server on loopback."""

from __future__ import annotations

import json

from typedrag.config import load_settings
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.llm.structured import REPAIR_EXCERPT_CHARS
from typedrag.strategies.decomposed import SubQueryPlan
from typedrag.testing.openai_stub import OpenAIStubServer, Reply

MESSAGES = [{"role": "user", "content": "Question: Why do leaves change colour in autumn?"}]
HUGE = "leaf " * 400_000  # 2 MB: what a server that ignores max_tokens sends


def model_for(server: OpenAIStubServer, **kwargs) -> OpenAIChatModel:
    return OpenAIChatModel(
        model="stub-model", base_url=server.base_url, api_key="sk-test", timeout=30, max_retries=0, **kwargs
    )


async def test_a_reply_over_the_bound_is_cut_and_its_call_says_so():
    with OpenAIStubServer(lambda r: Reply(content=HUGE)) as server:
        completion = await model_for(server, max_reply_chars=5_000).complete(MESSAGES, role="answer")
    assert len(completion.text) == 5_000 and completion.text == HUGE[:5_000]
    assert completion.call.finish_reason.startswith("cut: 2,000,000 characters, over max_reply_chars 5,000")


async def test_a_streamed_reply_over_the_bound_stops_being_read():
    heard: list[str] = []
    with OpenAIStubServer(lambda r: Reply(content="leaf " * 3_000)) as server:
        completion = await model_for(server, max_reply_chars=1_000).complete(
            MESSAGES, role="answer", on_text=heard.append
        )
    assert len(completion.text) <= 1_000 and "".join(heard) == completion.text
    assert completion.call.finish_reason.startswith("cut:")


async def test_the_repair_request_carries_a_bounded_excerpt_of_the_rejected_reply():
    """Before, a 2 MB reply that did not validate was sent back whole in the repair request."""
    replies = iter([Reply(content="{" + HUGE), Reply(content=json.dumps({"sub_queries": ["sunlight", "chlorophyll"]}))])
    with OpenAIStubServer(lambda r: next(replies)) as server:
        completion = await model_for(server).complete(MESSAGES, role="plan:reason", schema=SubQueryPlan)
    assert completion.parsed is not None
    shown = server.requests[1].messages[-2]
    assert shown["role"] == "assistant" and len(shown["content"]) <= REPAIR_EXCERPT_CHARS + 100
    assert "characters left out" in shown["content"] and shown["content"].startswith("{leaf")


def test_the_bound_is_a_setting():
    assert load_settings({}).llm.max_reply_chars == 100_000
    assert load_settings({"llm.max_reply_chars": 20_000}).llm.max_reply_chars == 20_000
