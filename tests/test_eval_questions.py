"""`typedrag eval questions`: an LLM writes questions of each type from the user's documents, validated and
deduplicated, against a real OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
from collections import Counter

from typer.testing import CliRunner

from conftest import write_corpus
from typedrag.evaluation.command import eval_app
from typedrag.evaluation.question_writer import KINDS
from typedrag.testing.openai_stub import ChatRequest, OpenAIStubServer, Reply, default_content


def invoke(args, tmp_path, monkeypatch):
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TYPEDRAG_API_KEY", "test")
    return CliRunner().invoke(eval_app(), ["questions", *args])


def writing(server: OpenAIStubServer) -> list[ChatRequest]:
    return [r for r in server.requests if r.schema_name == "WrittenQuestions"]


def test_questions_of_every_type_then_a_rerun_asks_nothing(stub, tmp_path, monkeypatch):
    corpus, out = write_corpus(tmp_path / "corpus.jsonl"), tmp_path / "questions.jsonl"
    server = stub()
    args = [str(corpus), "--out", str(out), "--llm", "writer", "--base-url", server.base_url, "--per-type", "2"]
    result = invoke(args, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert Counter(r["type"] for r in rows) == {kind: 2 for kind in KINDS}
    assert len({r["id"] for r in rows}) == len(rows) and len({r["question"] for r in rows}) == len(rows)
    assert all(r["question"].endswith("?") and r["about"] and r["classified_as"] for r in rows)
    prompts = writing(server)
    assert all("Kind: " in p.last_user and "[1] " in p.last_user for p in prompts)
    sent = len(server.requests)
    again = invoke(args, tmp_path, monkeypatch)
    assert again.exit_code == 0 and len(server.requests) == sent and "0 questions added" in again.output
    more = invoke([*args[:-1], "3", "--types", "reason,debate"], tmp_path, monkeypatch)
    assert more.exit_code == 0, more.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    counts = Counter(r["type"] for r in rows)
    assert counts["REASON"] == counts["DEBATE"] == 3 and counts["COMPARISON"] == 2


def test_repeats_are_dropped_and_the_model_is_asked_once_more(stub, tmp_path, monkeypatch):
    def repeating(request: ChatRequest) -> Reply:
        if request.schema_name != "WrittenQuestions":
            return Reply(content=default_content(request))
        same = [
            {"question": "Why did the Western Roman Empire fall?", "passage": 1},
            {"question": "why did the western roman empire fall", "passage": 1},  # invalid: no question mark
            {"question": "Why did the Western Roman Empire fall ?", "passage": 1},
        ]
        return Reply(content=json.dumps({"questions": same}))

    corpus, out = write_corpus(tmp_path / "corpus.jsonl"), tmp_path / "q.jsonl"
    server = stub(repeating)
    args = [
        str(corpus),
        "--out",
        str(out),
        "--llm",
        "writer",
        "--base-url",
        server.base_url,
        "--per-type",
        "2",
        "--types",
        "reason",
    ]
    result = invoke(args, tmp_path, monkeypatch)
    asked = writing(server)
    assert result.exit_code == 0, result.output
    # The invalid question fails validation: one repair per request, and the repair's reply is the same, so nothing
    # validates; both attempts for the type end as recorded failures, nothing is written.
    assert len(asked) == 4 and "could not be used" in asked[1].messages[-1]["content"]
    assert not out.exists() or out.read_text() == ""
    assert "not written: REASON" in result.output


def test_near_duplicates_are_dropped(stub, tmp_path, monkeypatch):
    def repeating(request: ChatRequest) -> Reply:
        if request.schema_name != "WrittenQuestions":
            return Reply(content=default_content(request))
        return Reply(
            content=json.dumps(
                {
                    "questions": [
                        {"question": "Why did the Western Roman Empire fall?", "passage": 1},
                        {"question": "Why did the Western Roman Empire fall apart?", "passage": 1},
                        {"question": "Why is bread dough left to rise twice?", "passage": 9},  # names no passage shown
                    ]
                }
            )
        )

    corpus, out = write_corpus(tmp_path / "corpus.jsonl"), tmp_path / "q.jsonl"
    server = stub(repeating)
    args = [
        str(corpus),
        "--out",
        str(out),
        "--llm",
        "writer",
        "--base-url",
        server.base_url,
        "--per-type",
        "3",
        "--types",
        "reason",
    ]
    result = invoke(args, tmp_path, monkeypatch)
    asked = writing(server)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["question"] for r in rows] == ["Why did the Western Roman Empire fall?"]
    assert len(asked) == 2  # short after the first request, asked once more, then it stops
    assert "nearly repeats a kept question" in result.output or "repeats a question word for word" in result.output
    assert "names no passage shown" in result.output


def test_writing_questions_offline_says_it_needs_an_llm(tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    monkeypatch.delenv("TYPEDRAG_LLM", raising=False)
    result = invoke([str(corpus), "--out", str(tmp_path / "q.jsonl"), "--llm", "offline"], tmp_path, monkeypatch)
    assert result.exit_code == 2 and "writing questions needs an LLM" in " ".join(result.output.split())
