"""Issue 23: the LLM path with small local models, each defect against a real HTTP server on loopback.

The stub speaks the OpenAI protocol and replies as the small model did: runaway lists, JSON cut at the
token limit, paragraphs as sub-queries, no citations or citations past the last source. The llama.cpp
path with a real model is in test_llamacpp.py.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from typedrag.engines.base import PlanTask
from typedrag.engines.llm_engine import LLMEngine
from typedrag.index.memory import ListRetriever
from typedrag.llm.cache import ResponseCache
from typedrag.llm.openai_chat import OpenAIChatModel, response_format
from typedrag.llm.base import StructuredOutcome
from typedrag.nfq import NFQType
from typedrag.pipeline import Pipeline, PipelineSettings
from typedrag.records import Passage
from typedrag.strategies import comparison, debate, experience, instruction, reason
from typedrag.strategies.comparison import ComparisonPlan
from typedrag.strategies.debate import DebatePlan
from typedrag.strategies.decomposed import SubQueryPlan
from typedrag.strategies.experience import ExperiencePlan
from typedrag.strategies.plans import MAX_ASPECTS, QUERY_CHARS
from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_content

PLANS = (ComparisonPlan, DebatePlan, SubQueryPlan, ExperiencePlan)
MANUAL = [
    Passage(
        "vac#0",
        "vac",
        "Routine Vacuuming",
        "The VACUUM command reclaims storage occupied by dead tuples. Dead rows "
        "left by updates and deletes are not removed until a vacuum runs.",
        section="Recovering Disk Space",
    ),
    Passage(
        "vac#1",
        "vac",
        "Routine Vacuuming",
        "Autovacuum runs VACUUM automatically when enough rows of a table "
        "have changed, so most installations need no manual vacuuming.",
        section="The Autovacuum Daemon",
    ),
    Passage(
        "full#0",
        "full",
        "VACUUM FULL",
        "VACUUM FULL rewrites the whole table into a new file, which returns "
        "the disk space to the operating system but holds an exclusive lock.",
        section="Notes",
    ),
    Passage(
        "idx#0",
        "idx",
        "REINDEX",
        "REINDEX rebuilds an index from the table data, removing index bloat left by many updates.",
        section="Description",
    ),
    Passage(
        "stat#0",
        "stat",
        "Statistics",
        "ANALYZE collects statistics about the contents of tables for the query planner.",
        section="Updating Planner Statistics",
    ),
    Passage(
        "wrap#0",
        "wrap",
        "Routine Vacuuming",
        "Transaction ID wraparound failures are prevented by vacuuming every "
        "table at least once every two billion transactions.",
        section="Preventing Transaction ID Wraparound Failures",
    ),
    Passage(
        "fsm#0",
        "fsm",
        "Free Space Map",
        "Each table has a free space map that VACUUM updates, so new rows can reuse the space of dead tuples.",
        section="Free Space Map",
    ),
    Passage(
        "bloat#0",
        "bloat",
        "Routine Vacuuming",
        "Tables that are updated heavily bloat when dead tuples pile up faster than autovacuum removes them.",
        section="Recovering Disk Space",
    ),
    Passage(
        "cost#0",
        "cost",
        "Autovacuum",
        "The autovacuum cost delay throttles vacuum work so that it does not disturb ordinary queries.",
        section="Cost-based Vacuum Delay",
    ),
]


def pipeline(server, **model) -> Pipeline:
    chat = OpenAIChatModel(model="small", base_url=server.base_url, max_retries=0, timeout=10, **model)
    return Pipeline(
        LLMEngine(chat), ListRetriever(MANUAL), settings=PipelineSettings(expand_queries=False)
    )  # plans' requests are read


def replying(plan_reply, answer=None):
    """Plan requests get `plan_reply(request)` (a Reply); the rest `answer(request)` or the stub's default."""

    def responder(request):
        if request.schema_name or "Reply with JSON only" in request.prompt:
            return plan_reply(request)
        return answer(request) if answer else Reply(content=default_content(request))

    return responder


def plan_requests(stub) -> list:
    """The plan requests in the order they came (the overview's answer is asked beside the first)."""
    return [r for r in stub.requests if r.schema_name or "Reply with JSON only" in r.prompt]


def sources_shown(request) -> list[int]:
    return [int(n) for n in re.findall(r"^\[(\d+)\] ", request.last_user, re.M)]


# --- 1. plans that finish: limits in the schema a decoder sees ----------------------------------------


@pytest.mark.parametrize("schema", PLANS)
def test_every_list_and_phrase_sent_to_a_model_carries_its_limit(schema):
    body = json.dumps(response_format(schema, strict=False))
    sent = response_format(schema, strict=False)["json_schema"]["schema"]

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "array":
                assert "maxItems" in node, (schema.__name__, node)
            if node.get("type") == "string" and "enum" not in node:
                assert "maxLength" in node, (schema.__name__, node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(sent)
    assert '"maxItems": 5' in body or '"maxItems": 8' in body


def test_openai_gets_a_strict_schema_it_accepts():
    strict = response_format(DebatePlan, strict=True)["json_schema"]
    assert strict["strict"] is True
    text = json.dumps(strict["schema"])
    assert "maxLength" not in text and "minLength" not in text  # not in OpenAI's strict subset
    objects = [strict["schema"], strict["schema"]["$defs"]["Perspective"]]
    assert all(o["additionalProperties"] is False and set(o["required"]) == set(o["properties"]) for o in objects)
    assert "maxItems" in text


async def test_the_schema_reaches_the_server_with_its_limits():
    with OpenAIStubServer(
        replying(lambda r: Reply(content='{"sub_queries": ["dead rows vacuum", "autovacuum"]}'))
    ) as stub:
        await pipeline(stub).answer("Why does PostgreSQL need VACUUM?", "typed", NFQType.REASON)
        plan_request = next(r for r in stub.requests if r.schema_name == "SubQueryPlan")
    schema = plan_request.body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["sub_queries"]["maxItems"] == MAX_ASPECTS
    assert schema["properties"]["sub_queries"]["items"]["maxLength"] == QUERY_CHARS


async def test_a_model_with_no_grammar_that_lists_too_much_is_trimmed_and_recorded():
    runaway = {"sub_queries": [f"vacuum aspect {n}" for n in range(9)]}
    with OpenAIStubServer(replying(lambda r: Reply(content=json.dumps(runaway)))) as stub:
        result = await pipeline(stub).answer("Why does PostgreSQL need VACUUM?", "typed", NFQType.REASON)
    assert any("9 sub-queries planned, the first 5 kept" in f.reason for f in result.fallbacks)


# --- 2. errors that say what happened: a cut-off reply -------------------------------------------------


async def test_a_reply_cut_at_the_token_limit_is_reported_as_such_with_its_raw_text():
    cut = '{"sub_queries": ["Materialized view", "View", "Materialized view", "View", "Mat'
    with OpenAIStubServer(replying(lambda r: Reply(content=cut, finish_reason="length"))) as stub:
        result = await pipeline(stub).answer("Why does PostgreSQL need VACUUM?", "typed", NFQType.REASON)
        repair = plan_requests(stub)[1].last_user
    call = next(c for c in result.llm_calls if c.role == "plan:reason")
    assert call.structured is StructuredOutcome.FAILED
    assert call.finish_reason == "length"
    assert call.reply.startswith('{"sub_queries": ["Materialized view"')
    assert "cut off at the 800-token limit" in call.error and "no JSON object" not in call.error
    assert "cut off at the 800-token limit" in repair and "shorter" in repair  # the repair prompt says what was wrong
    assert result.strategy == "rag" and any("PlanFailed" in f.reason for f in result.fallbacks)


# --- 3 and 4. citations that hold; fallback messages that are true -------------------------------------


async def test_markers_past_the_sources_are_removed_and_recorded():
    def answer(request):
        if "Partial answers" in request.last_user:
            return Reply(content="Vacuum reclaims space [1]. " + " ".join(f"[{n}]" for n in range(24, 91)))
        mine = sources_shown(request)
        return Reply(content=f"VACUUM reclaims storage occupied by dead tuples [{mine[0]}] [24] [25] [26].")

    plan = {"sub_queries": ["dead tuples storage", "autovacuum daemon"]}
    with OpenAIStubServer(replying(lambda r: Reply(content=json.dumps(plan)), answer)) as stub:
        result = await pipeline(stub).answer("Why does PostgreSQL need VACUUM?", "typed", NFQType.REASON)
    numbers = {s.number for s in result.sources}
    for text in [result.answer, *(a.answer for a in result.aspects)]:
        assert {int(n) for n in re.findall(r"\[(\d+)\]", text)} <= numbers, text
    assert "[90]" not in result.answer and "[24]" not in result.answer
    assert any(f.step == "citations" and "removed 67 citation markers" in f.reason for f in result.fallbacks)
    assert any(f.step.startswith("aspect:") and "removed 3 citation markers" in f.reason for f in result.fallbacks)
    assert result.strategy == "reason"


async def test_an_uncited_aspect_is_attributed_to_the_passages_that_support_it_not_dropped():
    def answer(request):
        if "Partial answers" in request.last_user:
            return Reply(content="Dead rows stay until a vacuum runs, and autovacuum runs it automatically.")
        return Reply(content="Dead rows left by updates and deletes are not removed until a vacuum runs.")

    plan = {"sub_queries": ["dead rows updates deletes", "autovacuum automatic"]}
    with OpenAIStubServer(replying(lambda r: Reply(content=json.dumps(plan)), answer)) as stub:
        result = await pipeline(stub).answer("Why does PostgreSQL need VACUUM?", "typed", NFQType.REASON)
    assert result.strategy == "reason"
    live = [a for a in result.aspects if a.error is None]
    assert live and all(re.search(r"\[\d+\]", a.answer) for a in live)
    assert any("attributed to the passage they read closest to" in f.reason for f in result.fallbacks)
    assert result.citations  # the final answer, uncited too, attributed the same way


async def test_when_every_aspect_is_dropped_the_fallback_says_why_with_the_right_counts():
    def answer(request):
        return Reply(content="Bananas are rich in potassium and grow in tropical climates.")

    plan = {"sub_queries": ["dead rows", "autovacuum", "index bloat"]}
    with OpenAIStubServer(replying(lambda r: Reply(content=json.dumps(plan)), answer)) as stub:
        result = await pipeline(stub).answer("Why does PostgreSQL need VACUUM?", "typed", NFQType.REASON)
    reason_text = next(f.reason for f in result.fallbacks if f.step == "reason")
    assert result.strategy == "rag"
    dropped = [a for a in result.aspects if a.error]
    assert len(result.aspects) == 1 + sum(1 for a in result.aspects if a.label != "overview")
    assert (
        f"all {len(result.aspects)} aspects (the overview and {len(result.aspects) - 1} planned) were dropped"
        in reason_text
    )
    assert "neither the question nor" not in reason_text and "found on-topic passages" not in reason_text
    assert "no sentence of its answer is supported by its passages" in reason_text
    assert len(dropped) == len(result.aspects)


# --- 5. a paragraph is not a search query -------------------------------------------------------------


async def test_a_paragraph_as_a_sub_query_is_rejected_and_the_repair_says_why():
    paragraph = (
        "To reclaim disk space you should first run VACUUM on the table and then check the output "
        "carefully, because the space is only marked reusable and is not returned to the operating system"
    )
    replies = iter(
        [
            Reply(content=json.dumps({"sub_queries": [paragraph, "```sql\nVACUUM FULL;\n```"]})),
            Reply(content=json.dumps({"sub_queries": ["vacuum reclaim space", "vacuum full table rewrite"]})),
        ]
    )
    with OpenAIStubServer(replying(lambda r: next(replies))) as stub:
        result = await pipeline(stub).answer("How do I reclaim disk space in PostgreSQL?", "typed", NFQType.INSTRUCTION)
        repair = plan_requests(stub)[1].last_user
    assert "must be a short phrase of at most 100 characters, not a paragraph or an answer" in repair
    assert "one line of plain words, not code" in repair
    call = next(c for c in result.llm_calls if c.role == "plan:instruction")
    assert call.structured is StructuredOutcome.REPAIRED and call.reply and "To reclaim" in call.reply
    assert result.plan == {"sub_queries": ["vacuum reclaim space", "vacuum full table rewrite"]}


# --- 6. no example in a prompt a model could copy into its plan -------------------------------------------


def descriptions(node) -> list[str]:
    if isinstance(node, dict):
        own = [node["description"]] if isinstance(node.get("description"), str) else []
        return own + [d for v in node.values() for d in descriptions(v)]
    return [d for v in node for d in descriptions(v)] if isinstance(node, list) else []


@pytest.mark.parametrize("module", [comparison, debate, experience, instruction, reason])
def test_planner_prompts_and_schema_descriptions_hold_no_copyable_example(module):
    task: PlanTask = module.PLAN
    for text in [task.prompt.system, task.prompt.user, *descriptions(task.schema.model_json_schema())]:
        assert not re.search(r"\be\.g\.|for example|for instance|such as", text, re.I), text
        assert not re.search(r"['\"“‘][^'\"”’{}]{3,}['\"”’]", text), text  # a quoted phrase to copy


# --- 7. the cache names the model, not a random port ---------------------------------------------------------


async def test_a_cache_keyed_by_model_identity_serves_a_rerun_on_another_port(tmp_path):
    cache = ResponseCache(tmp_path, namespace="v")
    messages = [{"role": "user", "content": "Why vacuum?"}]
    with OpenAIStubServer() as first, OpenAIStubServer() as second:
        one = OpenAIChatModel(model="m", base_url=first.base_url, cache=cache, cache_identity="local:/m.gguf#sha256:ab")
        two = OpenAIChatModel(
            model="m", base_url=second.base_url, cache=cache, cache_identity="local:/m.gguf#sha256:ab"
        )
        await one.complete(messages, role="answer")
        again = await two.complete(messages, role="answer")
        assert again.call.cached and len(second.requests) == 0
        other = OpenAIChatModel(
            model="m", base_url=second.base_url, cache=cache, cache_identity="local:/m.gguf#sha256:cd"
        )
        assert not (await other.complete(messages, role="answer")).call.cached  # another model file: asked afresh


def test_the_cache_remembers_a_model_files_hash(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + bytes(1000))
    cache = ResponseCache(tmp_path / "cache")
    digest = cache.file_sha256(model)
    assert digest == cache.file_sha256(model) and len(digest) == 64
    model.write_bytes(b"GGUF" + bytes(999) + b"x")
    assert cache.file_sha256(model) != digest  # changed file, new hash


# --- 8. a fallback keeps the typed work, marked as not used -----------------------------------------------------


async def test_a_fallback_keeps_the_plan_and_the_aspects_it_wrote():
    plan = {"sub_queries": ["dead rows vacuum", "autovacuum daemon"]}

    def answer(request):
        if "Partial answers" in request.last_user:
            return Reply(status=500, content="aggregator crashed")
        return Reply(content=default_content(request))

    with OpenAIStubServer(replying(lambda r: Reply(content=json.dumps(plan)), answer)) as stub:
        result = await pipeline(stub).answer("Why does PostgreSQL need VACUUM?", "typed", NFQType.REASON)
    assert result.strategy == "rag"
    assert result.plan == plan and result.plan_used is False
    assert [a.label for a in result.aspects] == ["overview", *plan["sub_queries"]]
    assert all(a.used is False and a.answer.startswith("Stub answer") for a in result.aspects)


# --- 9. latency: in flight apart from queued ------------------------------------------------------------


async def test_calls_queued_behind_one_slot_report_their_wait_apart_from_their_time_in_flight():
    with OpenAIStubServer(delay=0.3) as stub:
        model = OpenAIChatModel(model="m", base_url=stub.base_url, max_concurrency=1)
        calls = await asyncio.gather(
            *(model.complete([{"role": "user", "content": f"q{n}"}], role="answer") for n in range(4))
        )
    assert stub.most_waiting == 1  # one at a time, as a single-slot server takes them
    calls = sorted((c.call for c in calls), key=lambda c: c.queued_ms)
    assert all(c.latency_ms >= 300 for c in calls)
    assert [c.queued_ms >= 300 * n for n, c in enumerate(calls)] == [True] * 4  # the n-th waited for n replies


# --- 10. the source layout small models cite ------------------------------------------------------------


async def test_answer_prompts_number_each_source_on_a_line_and_end_asking_for_citations():
    with OpenAIStubServer() as stub:
        await pipeline(stub).answer("What does VACUUM do?", "rag")
        prompt = stub.requests[-1].last_user
    assert re.search(r"\n\[\d\] Routine Vacuuming › Recovering Disk Space: The VACUUM command reclaims storage", prompt)
    assert "<source" not in prompt
    assert prompt.rstrip().endswith("Cite the sources you use by their numbers in square brackets, like [1].")


# --- 11. the model's timeout and concurrency on the command line ----------------------------------------------


def test_ask_eval_and_serve_take_the_llm_timeout_and_concurrency(tmp_path):
    from typer.testing import CliRunner

    from typedrag.cli import app

    for command in ("ask", "eval", "serve"):
        shown = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "250"}).output
        assert "--llm-timeout" in shown and "--llm-concurrency" in shown, command


async def test_cli_llm_timeout_cuts_a_slow_endpoint(small_index, tmp_path):
    import subprocess
    import sys
    import os

    with OpenAIStubServer(delay=5) as stub:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))}
        proc = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "typedrag.cli",
                "ask",
                "Why?",
                "--index",
                str(small_index),
                "--method",
                "llm",
                "--llm",
                "m",
                "--base-url",
                stub.base_url,
                "--llm-timeout",
                "0.5",
                "--llm-concurrency",
                "1",
            ],
            capture_output=True,
            text=True,
            env={**clean, "TYPEDRAG_CACHE_DIR": str(tmp_path)},
            timeout=120,
        )
    assert proc.returncode == 2 and "timed out" in proc.stderr, proc.stderr
