"""Endpoint faults: what each does to one request against the loopback stub, and what the pipeline makes of it.

Every fault has one expected outcome: a retry with backoff, a repair, or a degradation recorded in
the result; never a crash, never a silent fallback, never a wait beyond the configured timeout.
The transport is tested where it acts, one request at a time: each fault of the pipeline's table
becomes an LLMError, a failed plan or a usable text (`test_each_fault_reaches_the_pipeline_as_its_outcome`).
What the pipeline does with each outcome, at each step, is then tested in process, a model scripted to
give it: the plan, one aspect, or every call.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from typedrag.engines.llm_engine import LLMEngine
from typedrag.llm.base import LLMError, StructuredOutcome
from typedrag.llm.structured import parse_structured
from typedrag.nfq import NFQType
from typedrag.pipeline import Pipeline
from typedrag.strategies.decomposed import SubQueryPlan
from typedrag.testing import ScriptedChatModel
from typedrag.testing.openai_stub import Reply, default_content

from .conftest import PATIENT, RETRIES, TIMEOUT, assert_clean_failure, run_cli, stub_model, stub_pipeline

MESSAGES = [{"role": "user", "content": "Question: Why do leaves change colour in autumn?"}]
PLAN = '{"sub_queries": ["chlorophyll breakdown in autumn", "anthocyanin production"]}'
OVER_LONG = "lorem [ipsum] {dolor} sit amet " * 80_000  # 2.4 MB, brackets everywhere


def replies(*sequence: Reply):
    """A responder that plays `sequence` and then repeats its last reply."""
    queue = list(sequence)
    return lambda request: queue.pop(0) if len(queue) > 1 else queue[0]


GUARD = (
    4 * PATIENT
)  # seconds: a generous outer limit, so a client that waits forever fails the test instead of hanging it


async def outcome(coroutine):
    """The call's result or its LLMError. The guard is no measure of speed: the client's own deadline
    bounds each call, and these tests check what it reports (the error, the attempts it made)."""
    try:
        return await asyncio.wait_for(coroutine, GUARD)
    except LLMError as error:
        return error


# --- one request -----------------------------------------------------------------------------


def refusing_url() -> str:
    """An endpoint on a loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


async def test_connection_refused_is_an_llm_error_within_the_bound():
    error = await outcome(stub_model(refusing_url()).complete(MESSAGES, role="answer"))
    assert isinstance(error, LLMError) and "cannot reach" in str(error)


@pytest.mark.parametrize(
    "reply",
    [Reply(content="too late", delay=5), Reply(content="a reply that never quite arrives", drip=0.05)],
    ids=["hang", "drip"],
)
async def test_no_reply_in_time_is_a_timeout_within_the_bound(stub, reply):
    server = stub(lambda r: reply)
    error = await outcome(stub_model(server.base_url, timeout=TIMEOUT).complete(MESSAGES, role="answer"))
    assert isinstance(error, LLMError) and "timed out" in str(error), error
    assert 1 <= len(server.requests) <= RETRIES + 1  # gave up after its attempts, never asked again


async def test_429_waits_for_retry_after_then_succeeds(stub):
    server = stub(replies(Reply(status=429, headers={"Retry-After": "1"}), Reply(content="Fine.")))
    started = time.perf_counter()
    completion = await outcome(stub_model(server.base_url).complete(MESSAGES, role="answer"))
    waited = time.perf_counter() - started
    assert completion.text == "Fine." and completion.call.requests == 1 and len(server.requests) == 2
    assert waited >= 0.9  # it honoured Retry-After (a lower bound: how long it waited at least)


async def test_429_asking_to_wait_past_the_budget_gives_up_within_the_bound(stub):
    server = stub(lambda r: Reply(status=429, headers={"Retry-After": "60"}))
    error = await outcome(stub_model(server.base_url, timeout=TIMEOUT).complete(MESSAGES, role="answer"))
    assert isinstance(error, LLMError), error  # before the guard: the budget is cut, not waited out


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_are_retried_then_succeed_or_fail_clearly(stub, status):
    fault = Reply(status=status, content="upstream exploded")
    server = stub(replies(fault, Reply(content="Recovered.")))
    completion = await stub_model(server.base_url).complete(MESSAGES, role="answer")
    assert completion.text == "Recovered." and len(server.requests) == 2
    server = stub(lambda r: fault)
    error = await outcome(stub_model(server.base_url).complete(MESSAGES, role="answer"))
    assert isinstance(error, LLMError) and f"HTTP {status}" in str(error)
    assert len(server.requests) == RETRIES + 1


async def test_dropped_connection_is_retried_then_fails_clearly(stub):
    server = stub(replies(Reply(drop=True), Reply(content="Second try.")))
    completion = await stub_model(server.base_url).complete(MESSAGES, role="answer")
    assert completion.text == "Second try."
    server = stub(lambda r: Reply(drop=True))
    error = await outcome(stub_model(server.base_url).complete(MESSAGES, role="answer"))
    assert isinstance(error, LLMError) and "cannot reach" in str(error)
    assert len(server.requests) == RETRIES + 1


async def test_empty_content_is_an_error_for_text_and_a_failed_repair_for_structure(stub):
    server = stub(lambda r: Reply(content=""))
    model = stub_model(server.base_url)
    with pytest.raises(LLMError, match="empty reply"):
        await model.complete(MESSAGES, role="answer")
    completion = await model.complete(MESSAGES, role="plan:reason", schema=SubQueryPlan)
    assert completion.parsed is None and completion.call.structured is StructuredOutcome.FAILED
    assert completion.call.requests == 2 and completion.call.error


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (b"<html>502 Bad Gateway</html>", None),
        (b'{"id": "x", "choices": [{"message": {"content": "cut', None),
        (b"[]", None),
        (b'{"choices": [{"message": {"role": "assistant", "content": ["not", "text"]}}]}', None),
        (b'{"choices": [{"message": {"content": "Fine."}}], "usage": "lots"}', "Fine."),
    ],
    ids=["html", "truncated-body", "list", "content-not-text", "usage-not-object"],
)
async def test_malformed_response_body_is_an_llm_error_not_a_crash(stub, body, text):
    server = stub(lambda r: Reply(raw=body))
    model = stub_model(server.base_url)
    if text is None:
        with pytest.raises(LLMError, match="malformed response|empty reply"):
            await model.complete(MESSAGES, role="answer")
    else:
        completion = await model.complete(MESSAGES, role="answer")
        assert completion.text == text and completion.call.prompt_tokens == 0
    try:
        completion = await model.complete(MESSAGES, role="plan", schema=SubQueryPlan)
    except LLMError as error:
        assert "malformed response" in str(error)
    else:
        assert completion.call.structured is StructuredOutcome.FAILED


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (PLAN[:30], PLAN, StructuredOutcome.REPAIRED),  # truncated JSON
        ("Chlorophyll breaks down; anthocyanins form.", PLAN, StructuredOutcome.REPAIRED),  # prose
        ('{"answer": "chlorophyll", "confidence": 0.9}', PLAN, StructuredOutcome.REPAIRED),  # wrong schema
        ('{"answer": "chlorophyll"}', '{"queries": ["a", "b"]}', StructuredOutcome.FAILED),
        (OVER_LONG, OVER_LONG, StructuredOutcome.FAILED),
        ("[" * 100_000, "{" * 100_000, StructuredOutcome.FAILED),  # nesting deeper than the JSON parser's stack
    ],
    ids=["truncated-json", "prose", "wrong-schema", "wrong-schema-twice", "over-long", "deep-nesting"],
)
async def test_bad_structured_output_gets_one_repair(stub, first, second, expected):
    server = stub(replies(Reply(content=first), Reply(content=second)))
    model = stub_model(server.base_url)
    completion = await outcome(model.complete(MESSAGES, role="plan:reason", schema=SubQueryPlan))
    assert not isinstance(completion, LLMError), completion
    assert completion.call.structured is expected and completion.call.requests == 2
    assert (completion.parsed is None) == (expected is StructuredOutcome.FAILED)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text()
    | st.lists(st.sampled_from(['{"sub_queries": [', '"a"', ", ", "]", "}", "[", "{", "```json\n", "```", "x"])).map(
        "".join
    )
)
def test_reply_parser_only_ever_rejects_with_value_error(text):
    try:
        plan = parse_structured(text, SubQueryPlan)
    except ValueError:  # includes pydantic's ValidationError: the caller repairs or falls back
        return
    # the schema asks for two to five; validation accepts one (a small model's duplicates removed)
    assert 1 <= len(plan.sub_queries) <= 5
    assert all(query.strip() for query in plan.sub_queries)


async def test_format_ladder_survives_concurrent_rejections(stub):
    """Regression: concurrent 400s each advanced the ladder, past its end (IndexError)."""

    def responder(request):
        if "response_format" in request.body:
            return Reply(status=400, content="response_format is not supported by this server")
        return Reply(content=PLAN)

    server = stub(responder)
    model = stub_model(server.base_url)
    results = await asyncio.gather(*(model.complete(MESSAGES, role="plan", schema=SubQueryPlan) for _ in range(6)))
    assert all(r.parsed is not None for r in results)


async def test_lone_surrogates_in_a_reply_become_replacement_characters(stub, retriever):
    """Regression: a "\\ud800" escape in a reply could not be sent on to the aggregator nor printed as JSON."""

    def responder(request):
        content = "Because \ud800 of taxes [1]." if not request.schema_name else default_content(request)
        completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
        return Reply(raw=json.dumps(completion).encode())  # json.dumps escapes the surrogate as \ud800

    server = stub(responder)
    result = await stub_pipeline(server.base_url, retriever).answer(QUESTION, "typed", NFQType.REASON)
    assert result.strategy == "reason" and [f for f in result.fallbacks if not f.step.startswith("aspect:")] == []
    assert "Because \ufffd of taxes" in server.requests[-1].last_user  # the aggregator got every aspect
    result.model_dump_json()


# --- what each fault reaches the pipeline as, and what the pipeline makes of it ---------------------

FAULTS = {
    "hang": lambda r: Reply(content="too late", delay=5),
    "drip": lambda r: Reply(content=default_content(r), drip=0.05),
    "429": lambda r: Reply(status=429, headers={"Retry-After": "60"}),
    "500": lambda r: Reply(status=500, content="internal error"),
    "503": lambda r: Reply(status=503, headers={"Retry-After": "0"}),
    "drop": lambda r: Reply(drop=True),
    "bad-body": lambda r: Reply(raw=b"<html>502 Bad Gateway</html>"),
    "empty": lambda r: Reply(content=""),
    "truncated": lambda r: Reply(content=default_content(r)[:20]),
    "prose": lambda r: Reply(content="There are several reasons, mostly economic."),
    "wrong-schema": lambda r: Reply(content='{"answer": "economic decline", "confidence": 0.9}'),
    "over-long": lambda r: Reply(content=OVER_LONG),
}
# The faults the client's deadline must cut (a hang, a drip, a Retry-After past it): the only ones run with
# the short TIMEOUT.
DEADLINE_CUT = {"hang", "drip", "429"}
# What the client hands on after its retries and its repair round, for a writing request and for a plan.
ERROR, FAILED, TEXT = "LLMError", "a failed plan", "text"
REACHES = {
    "hang": (ERROR, ERROR),
    "drip": (ERROR, ERROR),
    "429": (ERROR, ERROR),
    "500": (ERROR, ERROR),
    "503": (ERROR, ERROR),
    "drop": (ERROR, ERROR),
    "bad-body": (ERROR, ERROR),
    "empty": (ERROR, FAILED),
    "truncated": (TEXT, FAILED),
    "prose": (TEXT, FAILED),
    "wrong-schema": (TEXT, FAILED),
    "over-long": (TEXT, FAILED),
}
QUESTION = "Why did the Western Roman Empire fall?"
SUB_QUERIES = ["economic troubles taxation", "Germanic invasions frontiers", "political instability"]
BROKEN = SUB_QUERIES[1]
TARGETS = {
    "plan": lambda r: r.schema_name is not None,
    "aspect": lambda r: f"Answer only this part of it: {BROKEN}" in r.last_user,
    "all": lambda r: True,
}


def reached(outcome_) -> str:
    if isinstance(outcome_, LLMError):
        return ERROR
    if outcome_.call.structured is StructuredOutcome.FAILED:
        return FAILED
    return TEXT if outcome_.parsed is None else "a plan"


@pytest.mark.parametrize("fault", FAULTS)
async def test_each_fault_reaches_the_pipeline_as_its_outcome(stub, fault):
    server = stub(FAULTS[fault])
    model = stub_model(server.base_url, timeout=TIMEOUT if fault in DEADLINE_CUT else PATIENT)
    written = await outcome(model.complete(MESSAGES, role="answer"))
    planned = await outcome(model.complete(MESSAGES, role="plan:reason", schema=SubQueryPlan))
    assert (reached(written), reached(planned)) == REACHES[fault]


def faulty(fault: str, target: str) -> ScriptedChatModel:
    """A model whose calls at `target` give what `fault` reaches the pipeline as; the others answer well."""

    def script(call):
        request = call.as_request()
        if TARGETS[target](request):
            if REACHES[fault][call.schema is not None] == ERROR:
                raise LLMError(f"the endpoint failed: {fault}")
            return FAULTS[fault](request).content  # a usable text, or a plan that stays invalid
        if request.schema_name == "SubQueryPlan":
            return json.dumps({"sub_queries": SUB_QUERIES})
        return default_content(request)

    return ScriptedChatModel(script)


def assert_degradations_recorded(result) -> None:
    """No silent fallback: every failed step of the trace has a matching entry in result.fallbacks."""
    steps = [f.step for f in result.fallbacks]
    if result.strategy != "reason":
        assert "reason" in steps
    for aspect in result.aspects:
        if aspect.error:
            assert f"aspect:{aspect.label}" in steps
    if any(c.structured is StructuredOutcome.FAILED for c in result.llm_calls):
        assert "reason" in steps
    if any(
        c.role == "expand:query" and (c.error or c.structured is StructuredOutcome.FAILED) for c in result.llm_calls
    ):
        assert "expand:query" in steps  # the question was searched alone, and that is said


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fault", FAULTS)
async def test_pipeline_answers_or_fails_cleanly_under_each_fault(retriever, fault, target):
    model = faulty(fault, target)
    result = await outcome(Pipeline(LLMEngine(model), retriever).answer(QUESTION, "typed", NFQType.REASON))

    no_text = REACHES[fault][0] == ERROR
    if target == "all" and no_text:  # nothing can answer: a clear error, not a crash
        assert isinstance(result, LLMError)
        return
    assert result.answer.strip()
    assert_degradations_recorded(result)
    if target == "aspect" and not no_text:  # any text is a usable answer: kept as data
        assert result.strategy == "reason" and [f for f in result.fallbacks if not f.step.startswith("aspect:")] == []
    elif target == "aspect":
        assert result.strategy == "reason"
        assert BROKEN in [a.label for a in result.aspects if a.error]
        assert f"aspect:{BROKEN}" in [f.step for f in result.fallbacks]
        assert all(f.step.startswith("aspect:") for f in result.fallbacks)
        assert BROKEN not in model.calls[-1].user  # dropped from the aggregation
    else:  # the plan failed: plain RAG, and the reason recorded
        assert result.strategy == "rag" and result.plan is None
        # The overview, begun beside the plan, may record its own fault before the plan's failure is known.
        # An expansion (on by default) meets the same fault and is recorded as its own step.
        first = next(f for f in result.fallbacks if not f.step.startswith(("aspect:", "expand:")))
        assert first.step == "reason" and first.reason.startswith(("PlanFailed", "LLMError"))


def test_typedrag_ask_records_a_failed_plan_and_fails_cleanly_when_the_endpoint_is_down(stub, small_index, tmp_path):
    config = tmp_path / "typedrag.toml"
    config.write_text(f"[llm]\ntimeout = {TIMEOUT}\nmax_retries = {RETRIES}\n", encoding="utf-8")
    env = {"TYPEDRAG_CONFIG": str(config), "TYPEDRAG_CACHE_DIR": str(tmp_path / "cache")}
    args = ["ask", QUESTION, "--index", str(small_index), "--type", "reason", "--llm", "stub", "--json"]

    def prose_plans(request):
        return Reply(content="Taxes, mostly." if request.schema_name else default_content(request))

    server = stub(prose_plans)
    proc = run_cli(*args, "--base-url", server.base_url, env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["strategy"] == "rag" and result["answer"].startswith("Stub answer")
    steps = [f["step"] for f in result["fallbacks"]]
    assert [s for s in steps if s != "expand:query"] == [
        "reason"
    ] and "expand:query" in steps  # prose for its schema too

    url = refusing_url()
    proc = run_cli(*args, "--base-url", url, env=env)
    assert_clean_failure(proc, f"cannot reach {url}")
