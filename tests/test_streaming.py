"""Streaming the answer as it is written: the chat model, the engines, the pipeline, the HTTP routes,
the CLI, and cancellation when the client leaves. The LLM path runs against the loopback stub, which
trickles its tokens like a real server."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from typedrag.engines.base import sentence_pieces, trimmed
from typedrag.engines.llm_engine import LLMEngine
from typedrag.engines.offline import OfflineEngine
from typedrag.llm.cache import ResponseCache
from typedrag.llm.openai_chat import OpenAIChatModel, replay_chunks
from typedrag.pipeline import Pipeline
from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_content

pytest.importorskip("fastapi", reason="fastapi and uvicorn are dependencies of typedrag: pip install -e .")

from test_server import classifier, in_process, offline_pipeline, openai_client, serving, sse_events  # noqa: E402,F401

from typedrag.config import Settings  # noqa: E402
from typedrag.server.app import create_app  # noqa: E402

MESSAGES = [{"role": "user", "content": "Question: Why do leaves change colour in autumn?"}]
QUESTIONS = {
    "evidence-based": "How does photosynthesis work?",
    "comparison": "What is the difference between a crocodile and an alligator?",
    "experience": "What advice would you give a beginner learning guitar?",
    "reason": "Why did the Western Roman Empire fall?",
    "instruction": "How do I bake bread?",
    "debate": "Is nuclear power a good idea?",
}


def model(stub: OpenAIStubServer, **kwargs) -> OpenAIChatModel:
    return OpenAIChatModel(**{"model": "stub", "base_url": stub.base_url, "max_retries": 0, "timeout": 20, **kwargs})


def comparable(result) -> dict:
    """A result without what differs from run to run (timings, latencies, the order of concurrent calls)."""
    data = result.model_dump(exclude={"timings_ms"})
    data["llm_calls"] = sorted(
        (c["role"], c["prompt_tokens"], c["completion_tokens"], c["requests"], c["cached"], c["structured"])
        for c in data["llm_calls"]
    )
    data["steps"] = sorted((s["step"], s["role"], s["engine"], s["error"] or "") for s in data["steps"])
    return data


# --- pieces that concatenate back --------------------------------------------------------------


@given(st.lists(st.text(alphabet=" \n\tab.[1]", max_size=6), max_size=12))
def test_trimmed_pieces_concatenate_to_the_stripped_text(pieces):
    heard: list[str] = []
    feed = trimmed(heard.append)
    for piece in pieces:
        feed(piece)
    assert "".join(heard) == "".join(pieces).strip() and all(heard)


@given(st.text(alphabet="ab .!?[]1\n\t", max_size=60))
def test_sentence_pieces_and_replay_chunks_concatenate_to_the_text(text):
    assert "".join(sentence_pieces(text)) == text
    assert "".join(replay_chunks(text)) == text


def test_sentence_pieces_cut_after_sentences_and_their_citations():
    text = "Rome fell in 476. [1] [2] Taxes rose.\n- Goths invaded [3]."
    assert sentence_pieces(text) == ["Rome fell in 476. [1] [2] ", "Taxes rose.\n", "- Goths invaded [3]."]


# --- the chat model ----------------------------------------------------------------------------


async def test_a_streamed_reply_arrives_in_pieces_with_its_usage(stub):
    server = stub(lambda r: Reply(content="Leaves lose chlorophyll in autumn [1]."))
    heard: list[str] = []
    completion = await model(server).complete(MESSAGES, role="answer", on_text=heard.append)
    assert server.requests[0].body["stream"] is True
    assert heard == ["Leaves ", "lose ", "chlorophyll ", "in ", "autumn ", "[1]."]
    assert completion.text == "".join(heard) and completion.call.completion_tokens == 6
    assert completion.call.prompt_tokens > 0


async def test_a_cached_reply_streams_in_chunks_without_a_request(stub, tmp_path):
    content = "Leaves lose their green chlorophyll, and yellow carotenoids show through [1]."
    server = stub(lambda r: Reply(content=content))
    chat = model(server, cache=ResponseCache(tmp_path))
    first = await chat.complete(MESSAGES, role="answer", on_text=lambda piece: None)
    heard: list[str] = []
    again = await chat.complete(MESSAGES, role="answer", on_text=heard.append)
    assert len(server.requests) == 1 and again.call.cached and again.call.requests == 0
    assert len(heard) > 1 and "".join(heard) == first.text == again.text == content


async def test_an_api_key_split_across_pieces_is_masked_in_the_stream(stub):
    key = "sk-secret-0123456789"
    pieces = ["The key is sk-sec", "ret-0123", "456789 and", " that is all."]
    server = stub(lambda r: Reply(pieces=pieces))
    heard: list[str] = []
    completion = await model(server, api_key=key).complete(MESSAGES, role="answer", on_text=heard.append)
    assert "".join(heard) == completion.text == "The key is *** and that is all."
    assert not any("sk-" in piece for piece in heard)


async def test_an_endpoint_that_refuses_stream_options_streams_without_them(stub):
    def responder(request):
        if "stream_options" in request.body:
            return Reply(status=400, content="Unrecognized request argument supplied: stream_options")
        return Reply(content="Chlorophyll breaks down [1].")

    server = stub(responder)
    heard: list[str] = []
    completion = await model(server).complete(MESSAGES, role="answer", on_text=heard.append)
    assert "".join(heard) == completion.text == "Chlorophyll breaks down [1]." and len(server.requests) == 2


async def test_a_stream_that_breaks_off_is_an_llm_error_saying_so(stub):
    from typedrag.llm.base import LLMError

    server = stub(lambda r: Reply(content="one two three four five", break_after=2))
    heard: list[str] = []
    with pytest.raises(LLMError, match="stream broke off after 8 characters"):
        await model(server).complete(MESSAGES, role="answer", on_text=heard.append)
    assert heard == ["one ", "two "]


async def test_plans_are_never_streamed(stub):
    from typedrag.strategies.decomposed import SubQueryPlan

    server = stub()
    completion = await model(server).complete(
        [{"role": "user", "content": 'Question: Why? Reply with {"sub_queries": [...]}'}],
        role="plan",
        schema=SubQueryPlan,
    )
    assert completion.parsed is not None and "stream" not in server.requests[0].body


# --- the pipeline ------------------------------------------------------------------------------


async def both_ways(pipeline: Pipeline, type_: str):
    """(the unstreamed result, the streamed result, the events heard while streaming) for one question."""
    plain = await pipeline.answer(QUESTIONS[type_], "typed", type_)
    events: list[tuple[str, dict]] = []
    streamed = await pipeline.answer(QUESTIONS[type_], "typed", type_, on_event=lambda n, d: events.append((n, d)))
    return plain, streamed, events


@pytest.mark.parametrize("type_", list(QUESTIONS))
async def test_streamed_answer_and_trace_equal_the_unstreamed_ones(stub, type_, retriever):
    server = stub(token_rate=0)
    plain, streamed, events = await both_ways(Pipeline(LLMEngine(model(server)), retriever), type_)
    tokens = [d["text"] for n, d in events if n == "token"]
    assert len(tokens) >= 3 and "".join(tokens) == streamed.answer == plain.answer
    assert comparable(streamed) == comparable(plain)
    assert [d for n, d in events if n == "citation"] == [c.model_dump() for c in streamed.citations]
    final_requests = [r for r in server.requests if r.body.get("stream")]
    assert len(final_requests) == 1  # only the last step streams; plans and aspects do not


@pytest.mark.parametrize("type_", list(QUESTIONS))
async def test_the_offline_engine_streams_a_sentence_at_a_time(type_, retriever):
    plain, streamed, events = await both_ways(Pipeline(OfflineEngine(), retriever), type_)
    tokens = [d["text"] for n, d in events if n == "token"]
    assert len(tokens) >= 2 and "".join(tokens) == streamed.answer == plain.answer
    assert comparable(streamed) == comparable(plain)


async def test_a_typed_answer_that_breaks_mid_stream_restarts_visibly_as_plain_rag(stub, retriever):
    streams = []

    def responder(request):
        if request.body.get("stream"):
            streams.append(request)
            if len(streams) == 1:  # the aggregator's stream breaks; plain RAG's succeeds
                return Reply(content="Taxes rose [1] and then the", break_after=3)
        return Reply(content=default_content(request))

    server = stub(responder)
    events: list[tuple[str, dict]] = []
    result = await Pipeline(LLMEngine(model(server)), retriever).answer(
        QUESTIONS["reason"], "typed", "reason", on_event=lambda n, d: events.append((n, d))
    )
    names = [n for n, _ in events]
    restart = names.index("restart")
    assert "token" in names[:restart] and "broke off" in events[restart][1]["reason"]
    assert "".join(d["text"] for n, d in events[restart:] if n == "token") == result.answer
    assert result.strategy == "rag" and any(f.step == "reason" and "broke off" in f.reason for f in result.fallbacks)


# --- HTTP: the native stream, chat completions, disconnects ------------------------------------


@pytest.fixture
async def offline_app(offline_pipeline, small_index):
    async with in_process(create_app(Settings(index=small_index, cache_dir=None), offline_pipeline)) as client:
        yield client


async def test_offline_chat_stream_gives_content_deltas_for_a_multi_aspect_answer(offline_app):
    stream = await openai_client(offline_app).chat.completions.create(
        model="typedrag-typed:reason", messages=[{"role": "user", "content": QUESTIONS["reason"]}], stream=True
    )
    chunks = [chunk async for chunk in stream]
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    result = next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop").model_extra["typedrag"]
    assert result["strategy"] == "reason" and len(result["plan"]["sub_queries"]) >= 2
    assert len(deltas) >= 3 and "".join(deltas).startswith(result["answer"])


async def test_offline_native_stream_gives_tokens_before_the_result(offline_app):
    body = {"question": QUESTIONS["debate"], "type": "debate"}
    names = [name for name, _ in sse_events(await offline_app.post("/v1/answer/stream", json=body))]
    assert names.count("token") >= 3 and names.index("token") < names.index("result")


async def test_a_model_name_forces_the_question_type(offline_app):
    client = openai_client(offline_app)
    listed = [m.id for m in (await client.models.list()).data]
    assert {f"typedrag-typed:{t}" for t in QUESTIONS} <= set(listed)
    completion = await client.chat.completions.create(
        model="typedrag-typed:debate", messages=[{"role": "user", "content": "How do I bake bread?"}]
    )
    result = completion.model_extra["typedrag"]
    assert result["strategy"] == "debate" and result["type"]["source"] == "forced"
    with pytest.raises(openai.NotFoundError, match="unknown question type 'poem'"):
        await client.chat.completions.create(
            model="typedrag-typed:poem", messages=[{"role": "user", "content": "Why?"}]
        )


HANG = 300  # seconds: a guard against waiting forever for something that never happens, never a measure


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + HANG
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("leave_after", ["plan", "token"])
def test_a_client_that_leaves_cancels_every_llm_call(stub, small_index, classifier, leave_after):
    """Leaving after the plan cancels the aspects' calls in flight; leaving mid-answer closes the stream. The stub
    holds the calls in flight until the server has given up the answer (its slot freed), so what is asserted is
    the order of events, not how fast a loaded machine gets there."""
    release = threading.Event()

    def responder(request):
        if request.body.get("stream"):  # the final answer: its first word goes out, the rest waits
            return Reply(content="word " * 60 + "[1].", hold=release, hold_after=1)
        if (
            leave_after == "plan" and "Partial answers" not in request.last_user and request.schema_name is None
        ):  # an aspect or the overview
            release.wait(HANG)  # in flight as the client leaves, until the server has given the answer up
        return Reply(content=default_content(request))

    server = stub(responder, token_rate=20)
    pipeline = Pipeline(LLMEngine(model(server, timeout=HANG)), open_index(small_index), classifier=classifier)
    app = create_app(Settings(index=small_index, cache_dir=None), pipeline)
    try:
        with serving(app) as url:
            body = {"question": QUESTIONS["reason"], "type": "reason"}
            with httpx.stream("POST", f"{url}/v1/answer/stream", json=body, timeout=HANG) as response:
                for line in response.iter_lines():
                    if line == f"event: {leave_after}":
                        break
            seen = len(server.requests)
            wait_until(lambda: app.state.service.slots.used == 0, "the server gave up the answer")
            release.set()  # the calls held in flight may now end: the answer they belonged to is gone
            wait_until(lambda: server.waiting == 0 and server.open_streams == 0, "the stub done with every call")
            # A request cancelled between its headers and its body reaches the stub with no body: it never left whole.
            late = [r for r in server.requests[seen:] if r.body]
            if leave_after == "plan":  # calls on their way as the client left (aspects, the overview) may still land
                assert not any("Partial answers" in r.last_user for r in server.requests)  # never combined
                assert not any(r.body.get("stream") for r in server.requests)  # no final answer begun
            else:
                assert late == []
                assert server.abandoned_streams == 1  # the held answer's stream was closed by the server, not finished
    finally:
        release.set()


def open_index(path):
    from typedrag.index import open_retriever

    return open_retriever(path)


def test_a_reply_held_for_a_test_that_is_over_ends_when_the_shared_stub_is_reset(stub):
    """The session's one stub is reset before each test. A streamed reply held for a test that never let it go
    (it failed first) is ended by the reset, so no stream of that test is still open in the next."""
    server = stub(lambda r: Reply(content="one two three", hold=threading.Event(), hold_after=1))
    heard: list[str] = []

    def listen() -> None:
        body = {"model": "stub", "messages": MESSAGES, "stream": True}
        try:
            with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body, timeout=HANG) as response:
                heard.extend(line for line in response.iter_lines() if line.startswith("data: {"))
        except httpx.HTTPError:  # the stub ends the stream unfinished
            pass

    listener = threading.Thread(target=listen)
    listener.start()
    wait_until(lambda: server.open_streams == 1 and len(server.requests) == 1, "the reply held")
    stub()  # the next test's reset
    assert server.open_streams == 0 and server.requests == []
    listener.join(HANG)
    assert not listener.is_alive() and not any('"three"' in line for line in heard)  # never let go


# --- the command line --------------------------------------------------------------------------


def test_ask_prints_the_answer_while_it_is_written(stub, small_index, tmp_path):
    """The first words are on the terminal while the stub still holds the rest of the reply back: printed as
    they came, not at the end (an order of events, not a duration)."""
    words = " ".join(f"word{i}" for i in range(20)) + " [1]."
    release = threading.Event()
    server = stub(lambda r: Reply(content=words, hold=release, hold_after=5))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "typedrag.cli",
            "ask",
            "How does photosynthesis work?",
            "--method",
            "rag",
            "--index",
            str(small_index),
            "--llm",
            "stub",
            "--base-url",
            server.base_url,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, "TYPEDRAG_CACHE_DIR": str(tmp_path)},
    )
    printed: list[bytes] = []
    shown_while_held = threading.Event()

    def read() -> None:
        while chunk := os.read(process.stdout.fileno(), 64):
            printed.append(chunk)
            if b"word0" in b"".join(printed) and not release.is_set():
                shown_while_held.set()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert shown_while_held.wait(HANG), "the first words were not printed while the rest of the reply was held"
    finally:
        release.set()
        process.wait(HANG)
        reader.join(HANG)
    output = b"".join(printed).decode()
    assert process.returncode == 0, process.stderr.read().decode()
    assert output.startswith("How does photosynthesis work?\n" + words)
    assert "Sources" in output and "answered by openai-compatible:stub" in output
