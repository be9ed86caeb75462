"""Issue 13, item 6: one bad judge or classifier reply never aborts an eval run, and the response
cache never replays a reply that failed to parse."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from typedrag.evaluation.judges import LLMJudge
from typedrag.evaluation.linkage import parse_verdict
from typedrag.llm.cache import ResponseCache
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.strategies.decomposed import SubQueryPlan
from typedrag.testing.openai_stub import ChatRequest, OpenAIStubServer, Reply, default_content

from test_eval import REFS, eval_app, write_dataset

HUGE = "[[" + "9" * 5000 + "]]"


@pytest.mark.parametrize(
    ("reply", "position"),
    [
        (HUGE, None),  # int() would raise "Exceeds the limit (4300 digits)"
        ("[[" + "0" * 4999 + "2]]", None),  # absurdly long even if small
        ("Rank: [[2]]", 2),
        ("Rank: [[2]]  \n", 2),
        ("[[1]] is what the prompt says; my verdict: [[3]]", None),  # several verdicts: unusable
        ("[[2]] because it is good", None),  # not at the end
        ("Between [[1]] and [[2]]. [[2]]", None),
        ("[[-1]]", None),
        (None, None),
    ],
)
def test_parse_verdict_takes_exactly_one_verdict_at_the_end(reply, position):
    assert parse_verdict(reply, 4) == position


def judge_reply(bad: str):
    """Generator: the stub's defaults; the judge: `bad` for the first question, a good verdict otherwise."""

    def responder(request: ChatRequest) -> Reply:
        if "Candidate answer:" not in request.last_user and "[[k]]" not in request.last_user:
            return Reply(content=default_content(request))
        prompt = "\n".join(m["content"] for m in request.messages)
        return Reply(content=bad if "Roman" in prompt else "Fine. [[2]]")

    return responder


@pytest.mark.parametrize(
    "bad", [HUGE, "[[1]] or [[2]]", "\x00" * 10, "[[2]] hmm"], ids=["huge", "two", "nul", "not-last"]
)
def test_a_bad_judge_reply_is_a_recorded_failure_not_an_abort_and_is_not_replayed(
    tmp_path, small_index, monkeypatch, bad
):
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))
    dataset = write_dataset(tmp_path / "data")
    with OpenAIStubServer(judge_reply(bad)) as server:

        def run(out: Path):
            args = [
                "--dataset", str(dataset), "--index", str(small_index), "--out", str(out), "--methods", "rag",
                "--llm", "gen", "--base-url", server.base_url, "--judge", "judge", "--judge-base-url", server.base_url,
                "--rounds", "1", "--no-progress",
            ]  # fmt: skip
            return CliRunner().invoke(eval_app(), args)

        first = run(tmp_path / "run1")
        assert first.exit_code == 0, first.output
        summary = json.loads((tmp_path / "run1" / "summary.json").read_text())
        assert summary["per_method"]["rag"]["judge_failures"] == 1
        assert summary["per_method"]["rag"]["scored"] == 2
        judged_before = sum(1 for r in server.requests if r.body["model"] == "judge")
        second = run(tmp_path / "run2")  # a new run with the same cache: the unusable replies are asked again
        assert second.exit_code == 0, second.output
        asked_again = sum(1 for r in server.requests if r.body["model"] == "judge") - judged_before
    assert asked_again == 2  # the failed round (first try and its follow-up); good verdicts came from the cache


def test_an_unparsable_llm_classification_does_not_abort_eval(tmp_path, small_index, monkeypatch):
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))
    dataset = write_dataset(tmp_path / "data")

    def responder(request: ChatRequest) -> Reply:
        if request.schema_name == "TypeVerdict" and "Roman" in request.prompt:
            return Reply(content="no idea, sorry")
        if "Candidate answer:" in request.last_user:
            return Reply(content="Fine. [[2]]")
        return Reply(content=default_content(request))

    with OpenAIStubServer(responder) as server:
        args = [
            "--dataset", str(dataset), "--index", str(small_index), "--out", str(tmp_path / "run"), "--methods", "typed",
            "--llm", "gen", "--base-url", server.base_url, "--judge", "judge", "--judge-base-url", server.base_url,
            "--classifier", "llm", "--rounds", "1", "--no-progress",
        ]  # fmt: skip
        result = CliRunner().invoke(eval_app(), args)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["configuration"]["questions_selected"] == 2  # the unclassifiable one is skipped...
    assert any("classify q0" in e for e in summary["errors_this_run"])  # ...and reported
    assert summary["configuration"]["classifier"].startswith("llm:")


async def test_schema_replies_that_fail_validation_are_not_cached(tmp_path):
    replies = iter(["not json", "still not json", '{"sub_queries": ["a", "b"]}'])
    with OpenAIStubServer(lambda r: Reply(content=next(replies))) as server:
        model = OpenAIChatModel(model="m", base_url=server.base_url, max_retries=0, cache=ResponseCache(tmp_path))
        messages = [{"role": "user", "content": "plan it"}]
        failed = await model.complete(messages, role="plan", schema=SubQueryPlan)
        assert failed.parsed is None
        again = await model.complete(messages, role="plan", schema=SubQueryPlan)
        assert again.parsed is not None and not again.call.cached  # asked again, not replayed
        third = await model.complete(messages, role="plan", schema=SubQueryPlan)
        assert third.call.cached and third.parsed == again.parsed  # the good reply is cached
    assert len(server.requests) == 3


async def test_a_poisoned_cache_entry_from_an_older_version_is_asked_again(tmp_path):
    with OpenAIStubServer(lambda r: Reply(content="Good. [[2]]")) as server:
        cache = ResponseCache(tmp_path)
        model = OpenAIChatModel(model="judge", base_url=server.base_url, max_retries=0, cache=cache)
        judge = LLMJudge(model)
        first = await judge.place("Q?", REFS, "an answer", 1)
        assert first.position == 2
        # overwrite the cached reply with an unusable one, as an older typedrag stored it
        import sqlite3

        with sqlite3.connect(cache.path) as db:
            db.execute("UPDATE responses SET value = ?", (json.dumps({"text": HUGE}),))
        second = await judge.place("Q?", REFS, "an answer", 1)
    assert second.position == 2 and not second.retried
    assert len(server.requests) == 2


def test_retry_prompt_differs_from_the_first(tmp_path):
    """The follow-up asking for just [[k]] is a different request, so a different cache key."""
    from typedrag.evaluation.linkage import VERDICT_REMINDER

    assert re.search(r"\[\[k\]\]", VERDICT_REMINDER)
