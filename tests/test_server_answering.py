"""What the native and OpenAI routes share, and OpenAI's formatting, without a server: the answering context
(typedrag.server.answering) in process through httpx's ASGI transport, so an error inside the answer is seen on
both protocols at once; the pure formatting functions and renderers (typedrag.server.openai_format, the native
Server-Sent Events) fed an answer directly."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi import HTTPException

pytest.importorskip("fastapi", reason="fastapi is a dependency of typedrag: pip install -e .")

from test_server import COMPARISON, classifier, in_process, offline_pipeline, sse_events  # noqa: E402,F401  (tests/ is on sys.path)

from typedrag import FunctionRetriever  # noqa: E402
from typedrag.config import Settings  # noqa: E402
from typedrag.engines.offline import OfflineEngine  # noqa: E402
from typedrag.index.base import IndexUnusableError  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.result import AnswerResult  # noqa: E402
from typedrag.server.app import create_app  # noqa: E402
from typedrag.server.openai_format import (  # noqa: E402
    DONE,
    ChatMessage,
    Chunks,
    completion,
    conversation_of,
    knowledge_of,
    method_of,
    model_names,
    with_sources,
)
from typedrag.server.routes.native import ServerSentEvents  # noqa: E402

# --- the answering context: one error, the same status and message on both protocols ----------------------------


def data_lines(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize(
    ("error", "status", "message"),
    [
        (IndexUnusableError("its files were removed"), 503, "the index is unusable: its files were removed"),
        (RuntimeError("a bug"), 500, "internal error; request id {id}"),
    ],
)
async def test_an_error_inside_the_answer_is_the_same_status_and_message_on_both_protocols(
    classifier, error, status, message
):
    def search(query: str, k: int):
        raise error

    app = create_app(
        Settings(cache_dir=None), Pipeline(OfflineEngine(), FunctionRetriever(search), classifier=classifier)
    )
    ask = {"question": "Why did Rome fall?", "method": "rag"}
    chat = {"model": "typedrag-rag", "messages": [{"role": "user", "content": "Why did Rome fall?"}]}
    async with in_process(app) as client:
        native = await client.post("/v1/answer", json=ask, headers={"X-Request-ID": "native"})
        native_stream = await client.post("/v1/answer/stream", json=ask, headers={"X-Request-ID": "native-stream"})
        openai = await client.post("/v1/chat/completions", json=chat, headers={"X-Request-ID": "openai"})
        openai_stream = await client.post(
            "/v1/chat/completions", json={**chat, "stream": True}, headers={"X-Request-ID": "openai-stream"}
        )
        slots = app.state.service.slots.used
    for response, request_id in ((native, "native"), (openai, "openai")):
        assert response.status_code == status, response.text
        assert response.json()["error"]["message"] == message.format(id=request_id)
    # a stream has begun (200) before the answer fails: its last event says how
    assert native_stream.status_code == 200 and openai_stream.status_code == 200
    assert sse_events(native_stream)[-1] == ("error", {"status": status, "message": message.format(id="native-stream")})
    *_, failure, done = data_lines(openai_stream.text)
    assert done == "[DONE]" and json.loads(failure)["error"]["message"] == message.format(id="openai-stream")
    assert json.loads(failure)["error"]["type"] == ("overloaded" if status == 503 else "server_error")
    assert slots == 0  # every answer gave its slot back, however it ended


async def test_a_question_checked_before_its_slot_is_taken_on_both_protocols(offline_pipeline, small_index):
    """Bad input is a 4xx before anything is spent: 422 on the native API, 400 (OpenAI's status) on chat."""
    app = create_app(Settings(index=small_index, cache_dir=None), offline_pipeline)
    async with in_process(app) as client:
        native = await client.post("/v1/answer/stream", json={"question": "  "})
        openai = await client.post(
            "/v1/chat/completions",
            json={"model": "typedrag-rag", "stream": True, "messages": [{"role": "user", "content": "  "}]},
        )
        assert app.state.service.slots.used == 0
    assert native.status_code == 422 and openai.status_code == 400
    assert native.json()["error"]["message"] == openai.json()["error"]["message"]
    assert native.json()["error"]["message"].startswith("the question is empty")


# --- the renderers, fed an answer's events -----------------------------------------------------------------


@pytest.fixture(scope="module")
def answered(offline_pipeline) -> tuple[list[tuple[str, object]], AnswerResult]:
    """A typed answer and the events it emitted on the way (type, plan, aspects, tokens, citations, sources)."""
    events: list[tuple[str, object]] = []
    result = asyncio.run(
        offline_pipeline.answer(COMPARISON, "typed", on_event=lambda name, data: events.append((name, data)))
    )
    return events, result


def rendered(renderer, events, result) -> list[str]:
    lines = renderer.opening()
    for name, data in events:
        lines += renderer.event(name, data)
    return lines + renderer.result(result) + renderer.closing()


@pytest.mark.parametrize("asked_for_usage", [False, True])
def test_chunks_carry_the_text_the_events_and_the_usage_once(answered, asked_for_usage):
    events, result = answered
    base = {"id": "chatcmpl-1", "created": 1, "model": "typedrag-typed"}
    lines = rendered(Chunks(base, asked_for_usage=asked_for_usage), events, result)
    assert lines[-1] == DONE
    chunks = [json.loads(line) for line in data_lines("".join(lines[:-1]))]
    assert all(chunk.items() >= {**base, "object": "chat.completion.chunk"}.items() for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == with_sources(result) and result.answer and text.startswith(result.answer)
    assert [c["typedrag_event"]["event"] for c in chunks if "typedrag_event" in c] == [
        name for name, _ in events if name != "token"
    ]
    stop = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"] == "stop"]
    assert len(stop) == 1 and AnswerResult.model_validate(stop[0]["typedrag"]) == result
    with_usage = [c for c in chunks if "usage" in c]
    assert (
        len(with_usage) == 1
        and with_usage[0]["usage"]["total_tokens"] == result.usage.prompt_tokens + result.usage.completion_tokens
    )
    assert (with_usage[0]["choices"] == []) is asked_for_usage and (with_usage[0] is chunks[-1])


def test_chunks_say_a_restart_in_the_text_and_an_error_as_openai_does():
    chunks = Chunks({"id": "chatcmpl-1", "created": 1, "model": "m"})
    [restart] = chunks.event("restart", {"reason": "the plan failed\x1b[2J"})
    delta = json.loads(data_lines(restart)[0])["choices"][0]["delta"]
    assert delta == {"content": "\n\n[the plan failed\\x1b[2J]\n\n"}  # deltas cannot be taken back: said in the text
    error = json.loads(data_lines(chunks.error(502, "the LLM endpoint failed"))[0])
    assert error["error"] == {"message": "the LLM endpoint failed", "type": "upstream_error", "code": None}


def test_server_sent_events_end_with_the_answer_and_the_result(answered):
    events, result = answered
    lines = rendered(ServerSentEvents(), events, result)
    assert (
        len(lines) == len(events) + 2
        and lines[-2] == f"event: answer\ndata: {json.dumps({'text': result.answer}, ensure_ascii=False)}\n\n"
    )
    assert lines[-1] == f"event: result\ndata: {result.model_dump_json()}\n\n"
    assert ServerSentEvents().error(503, "busy") == 'event: error\ndata: {"status": 503, "message": "busy"}\n\n'


def test_a_completion_holds_the_text_with_sources_the_usage_and_the_result(answered):
    _, result = answered
    made = completion({"id": "chatcmpl-1", "created": 1, "model": "typedrag-typed"}, result)
    assert made["object"] == "chat.completion" and made["id"] == "chatcmpl-1"
    assert made["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": with_sources(result)}, "finish_reason": "stop"}
    ]
    assert made["usage"]["total_tokens"] == result.usage.prompt_tokens + result.usage.completion_tokens
    assert AnswerResult.model_validate(made["typedrag"]) == result


# --- the request ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "named"),
    [
        ("typedrag-typed", ("typed", None, None)),
        ("typedrag-rag", ("rag", None, None)),
        ("typedrag-llm", ("llm", None, None)),
        ("typedrag-typed:debate", ("typed", "debate", None)),
        ("typedrag:manuals", ("typed", None, "manuals")),
        ("typedrag-rag:manuals", ("rag", None, "manuals")),
    ],
)
def test_the_model_name_picks_method_type_and_collection(model, named):
    assert method_of(model) == named


@pytest.mark.parametrize("model", ["gpt-4o", "typedrag:", "typedrag-rag:", "typedrag"])
def test_a_model_that_is_not_ours_is_404(model):
    with pytest.raises(HTTPException) as caught:
        method_of(model)
    assert caught.value.status_code == 404 and f"unknown model {model!r}" in caught.value.detail


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"n": 2}, "n must be 1"),
        ({"n": True}, "n must be 1"),
        ({"n": 1.0}, "n must be 1"),
        ({"tools": [{"type": "function"}], "tool_choice": "auto"}, "remove tools, tool_choice from the request"),
        ({"response_format": {"type": "json_object"}}, "response_format 'json_object' cannot be honoured"),
        (
            {"knowledge": "x" * 100},
            "knowledge must be one of documents, labelled (got 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…)",
        ),
    ],
)
def test_what_typedrag_cannot_honour_is_400(extra, message):
    with pytest.raises(HTTPException) as caught:
        knowledge_of(extra)
    assert caught.value.status_code == 400 and message in caught.value.detail


def test_other_options_are_accepted_and_knowledge_is_read():
    assert (
        knowledge_of({"n": 1, "temperature": 0.3, "max_tokens": 5, "response_format": {"type": "text"}, "tools": []})
        is None
    )
    assert knowledge_of({"knowledge": "labelled"}) == "labelled"


def test_the_last_user_message_is_the_question_and_the_messages_before_it_the_conversation():
    messages = [
        ChatMessage.model_validate(m)
        for m in [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": "Answer in French."},
            {"role": "user", "content": "Why is the sky blue?"},
            {"role": "tool", "content": "a tool's result"},
            {"role": "assistant", "content": ""},
            {"role": "assistant", "content": "Scattering."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "And at"},
                    {"type": "image_url"},
                    {"type": "text", "text": "sunset?"},
                ],
            },
            {"role": "assistant", "content": "after the question"},
        ]
    ]
    question, history = conversation_of(messages)
    assert question == "And at sunset?"
    assert [(t.role, t.content) for t in history] == [
        ("system", "Be brief."),
        ("system", "Answer in French."),
        ("user", "Why is the sky blue?"),
        ("assistant", "Scattering."),
    ]
    with pytest.raises(HTTPException, match="string 'text'"):
        conversation_of([ChatMessage(role="user", content=[{"type": "text", "text": 3}])])


def test_the_models_listed_follow_what_the_caller_may_read():
    assert model_names(["COMPARISON"], ["manuals"], default_readable=True) == [
        "typedrag-typed",
        "typedrag-rag",
        "typedrag-llm",
        "typedrag-typed:comparison",
        "typedrag:manuals",
        "typedrag-rag:manuals",
    ]
    assert model_names(["COMPARISON"], [], default_readable=False) == ["typedrag-llm"]
