"""Issue 52: `typedrag users` (accounts, keys, grants) and `typedrag eval export-feedback`, as a user runs them,
on the data directory's SQLite store and on PostgreSQL (`--database`); the exported file read as it is by
`typedrag eval retrieval` and `typedrag eval compare`."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from store_fixtures import postgres_server, store_url  # noqa: F401
from typedrag.cli import app
from typedrag.store import open_store

runner = CliRunner()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in (
        "TYPEDRAG_CONFIG",
        "TYPEDRAG_DATA",
        "TYPEDRAG_DATABASE",
        "TYPEDRAG_LLM",
        "TYPEDRAG_BASE_URL",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def where(store_url, tmp_path) -> list[str]:
    """The options naming the store: --data DIR for SQLite (the default file in it), --database URL for PostgreSQL."""
    if store_url.startswith("sqlite"):
        return ["--data", str(tmp_path / "data")]
    return ["--database", store_url]


def users(*args: str):
    return runner.invoke(app, ["users", *args])


def one_line_error(out) -> str:
    assert out.exit_code == 2, out.output
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out.output, out.output
    return lines[0]


def test_add_key_grant_list_revoke_and_remove(where, store_url):
    added = users("add", "alice", "--role", "editor", "--key", *where)
    assert added.exit_code == 0, added.output
    key = added.stdout.strip()
    assert key.startswith("tdk_") and "\n" not in key  # the key alone on stdout
    assert "shown this once" in added.stderr and key not in added.stderr
    assert users("grant", "alice", "docs", "--write", *where).exit_code == 0
    assert users("grant", "alice", "*", *where).exit_code == 0
    second = users("key", "create", "alice", "--label", "ci", *where)
    listed = users("list", *where)
    assert listed.exit_code == 0 and "alice" in listed.stdout and "editor" in listed.stdout
    assert "*:read, docs:write" in listed.stdout and key not in listed.stdout
    keys = users("key", "list", "alice", *where)
    assert keys.stdout.count("active") == 2 and key not in keys.stdout and second.stdout.strip() not in keys.stdout
    store = open_store(store_url)
    try:
        alice = store.authenticate(key)
        assert alice is not None and alice.name == "alice"
        assert store.access(alice, "docs") == "write" and store.access(alice, "other") == "read"
        prefix = key.split("_")[1]
        assert users("key", "revoke", "alice", f"tdk_{prefix}", *where).exit_code == 0
        assert store.authenticate(key) is None and store.authenticate(second.stdout.strip()) is not None
        assert "revoked" in users("key", "list", "alice", *where).stdout
        assert users("revoke", "alice", "docs", *where).exit_code == 0
        assert store.access(alice, "docs") == "read"  # through '*'
        assert users("disable", "alice", *where).exit_code == 0
        assert store.authenticate(second.stdout.strip()) is None
        assert users("enable", "alice", *where).exit_code == 0
        assert users("role", "alice", "admin", *where).exit_code == 0
        assert store.user("alice").role == "admin"
        removed = users("remove", "alice", *where)
        assert removed.exit_code == 0 and "removed 'alice'" in removed.stderr
        assert store.users() == []
    finally:
        store.close()


def test_bad_input_is_one_line_and_exit_2(where):
    assert users("add", "alice", *where).exit_code == 0
    cases = [
        (["add", "alice", *where], "exists already"),
        (["add", "bob", "--role", "owner", *where], "role must be one of admin, editor, reader"),
        (["add", "x" * 1_000_000, *where], "too long: 1,000,000 characters"),
        (["grant", "nobody", "docs", *where], "no user named 'nobody'"),
        (["grant", "alice", "docs", "--write", *where], "is a reader"),
        (["key", "revoke", "alice", "tdk_0123456789ab", *where], "no key with that prefix"),
        (["remove", "nobody", *where], "no user named"),
        (["list", "--database", "mysql://root:pw@localhost/x"], "not supported"),
        (["list", "--database", "postgresql://typedrag:s3cret@127.0.0.1:1/none"], "cannot be used"),
    ]
    for args, expected in cases:
        line = one_line_error(users(*args))
        assert expected in line and "s3cret" not in line, line


def test_a_name_with_markup_and_sql_prints_as_it_is(where):
    name = "[bold red]x'); DROP TABLE users; --"
    assert users("add", name, *where).exit_code == 0
    listed = users("list", *where)
    assert "[bold red]x'); DROP TABLE users;" in listed.stdout  # not read as markup (the table may wrap the rest)


def test_the_default_store_is_the_data_directorys_sqlite_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TYPEDRAG_DATA", str(tmp_path / "elsewhere"))
    line = one_line_error(users("list"))  # nothing made by a command that only reads
    assert "no store at" in line and "--data" in line and not (tmp_path / "elsewhere").exists()
    assert users("add", "alice").exit_code == 0
    assert (tmp_path / "elsewhere" / "typedrag.db").is_file()
    assert users("add", "bob", "--data", str(tmp_path / "given")).exit_code == 0
    assert (tmp_path / "given" / "typedrag.db").is_file()


# ---------------------------------------------------------------- feedback as an evaluation set


QUESTIONS = [
    ("What is the difference between a crocodile and an alligator?", "up", "clear", True),
    ("Why did the Western Roman Empire fall?", "down", "missed the economy", True),
    ("How do I bake bread at home?", "up", "", False),
]


def _rated_conversations(store_url, small_index):
    """Real answers over the small index, saved as alice's conversations, rated as QUESTIONS says."""
    from typedrag import OfflineEngine, Pipeline
    from typedrag.index import open_retriever

    pipeline = Pipeline(OfflineEngine(), open_retriever(small_index, "bm25"))
    store = open_store(store_url)
    try:
        alice = store.add_user("alice", "admin")
        marked = {}
        for question, verdict, comment, mark in QUESTIONS:
            result = asyncio.run(pipeline.answer(question, "typed"))
            conversation = store.start_conversation(alice, "demo")
            store.add_message(alice, conversation.id, "user", question)
            answer = store.add_message(
                alice, conversation.id, "assistant", result.answer, result=result, trace_id=f"t-{verdict}"
            )
            helpful = [result.sources[0].passage_id] if mark else []
            store.give_feedback(alice, answer.id, verdict, comment, helpful)
            marked[question] = helpful
        # the same question asked again and rated the other way: one row, verdict mixed
        result = asyncio.run(pipeline.answer(QUESTIONS[0][0], "rag"))
        conversation = store.start_conversation(alice, "demo")
        answer = store.add_message(alice, conversation.id, "assistant", result.answer, result=result)
        store.give_feedback(alice, answer.id, "down", "too short")
        other = store.start_conversation(alice, "elsewhere")
        store.give_feedback(alice, store.add_message(alice, other.id, "assistant", "x", result=result).id, "up")
    finally:
        store.close()
    return marked


def test_export_feedback_writes_questions_that_eval_retrieval_and_compare_read(where, store_url, small_index, tmp_path):
    marked = _rated_conversations(store_url, small_index)
    out = tmp_path / "feedback.jsonl"
    exported = runner.invoke(app, ["eval", "export-feedback", "--collection", "demo", "--out", str(out), *where])
    assert exported.exit_code == 0, exported.output
    assert "3 questions" in exported.stderr and "2 with passages marked helpful" in exported.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by_question = {row["question"]: row for row in rows}
    assert set(by_question) == {q for q, *_ in QUESTIONS}
    crocodile = by_question[QUESTIONS[0][0]]
    assert crocodile["verdict"] == "mixed" and crocodile["votes"] == {"up": 1, "down": 1}
    assert crocodile["comments"] == ["clear", "too short"] and crocodile["collection"] == "demo"
    assert crocodile["relevant"] == marked[QUESTIONS[0][0]] and crocodile["type"] == "COMPARISON"
    assert by_question[QUESTIONS[1][0]]["verdict"] == "down" and "relevant" not in by_question[QUESTIONS[2][0]]
    assert len({row["id"] for row in rows}) == 3

    retrieval = runner.invoke(app, ["eval", "retrieval", "--questions", str(out), "--index", str(small_index),
                                    "--retrieval", "bm25", "--out", str(tmp_path / "retrieval.html")])  # fmt: skip
    assert retrieval.exit_code == 0, retrieval.output
    report = json.loads((tmp_path / "retrieval.json").read_text())
    [mode] = report["questions"].values()
    scored = {q["id"]: q for q in mode}
    assert set(scored) == {row["id"] for row in rows}
    assert scored[crocodile["id"]]["recall"] == 1.0  # the passage marked helpful is found again
    assert scored[by_question[QUESTIONS[2][0]]["id"]]["recall"] is None  # no passage marked: no recall
    assert scored[crocodile["id"]]["type"] == "COMPARISON"

    compare = runner.invoke(app, ["eval", "compare", str(out), "--a", "rag", "--b", "typed", "--index", str(small_index),
                                  "--out", str(tmp_path / "compare"), "--no-progress"])  # fmt: skip
    assert compare.exit_code == 0, compare.output
    answers = [json.loads(line) for line in (tmp_path / "compare" / "answers.jsonl").read_text().splitlines()]
    assert {(a["question_id"], a["system"]) for a in answers} == {
        (row["id"], s) for row in rows for s in ("rag", "typed")
    }

    down = runner.invoke(
        app, ["eval", "export-feedback", "--verdict", "down", "--out", str(tmp_path / "down.jsonl"), *where]
    )
    assert down.exit_code == 0 and [
        json.loads(x)["verdict"] for x in (tmp_path / "down.jsonl").read_text().splitlines()
    ] == ["down"]
    everything = runner.invoke(app, ["eval", "export-feedback", "--out", str(tmp_path / "all.jsonl"), *where])
    assert everything.exit_code == 0 and "4 questions" in everything.stderr  # the other collection's too


def test_export_feedback_with_nothing_rated_says_so(where, tmp_path):
    assert users("add", "alice", *where).exit_code == 0
    line = one_line_error(runner.invoke(app, ["eval", "export-feedback", "--out", str(tmp_path / "f.jsonl"), *where]))
    assert "nobody has rated an answer yet" in line and not (tmp_path / "f.jsonl").exists()
