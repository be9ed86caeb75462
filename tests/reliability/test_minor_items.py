"""Issue 13, item 9 (outside the service): the judge's timeout, a full disk under the cache, symlinks
leaving a corpus folder, and question ids that survive editing the question file."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from typedrag.batch import answer_file, content_id, read_questions
from typedrag.config import load_settings
from typedrag.corpus import iter_documents
from typedrag.engines.offline import OfflineEngine
from typedrag.llm.cache import ResponseCache
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.pipeline import Pipeline
from typedrag.testing.openai_stub import OpenAIStubServer, Reply


@pytest.fixture
def no_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "typedrag.toml").write_text("")
    monkeypatch.setenv("TYPEDRAG_CONFIG", str(tmp_path / "typedrag.toml"))
    return tmp_path


def test_judge_timeout_follows_typedrag_timeout(no_config):
    settings = load_settings({"judge.model": "big"}, env={"TYPEDRAG_TIMEOUT": "7"})
    assert settings.llm.timeout == 7 and settings.judge.timeout == 7
    (no_config / "typedrag.toml").write_text("[judge]\ntimeout = 30\n")
    assert load_settings(env={"TYPEDRAG_TIMEOUT": "7"}).judge.timeout == 30  # set separately: kept


# --- full disk --------------------------------------------------------------------------------------


def fill_up(cache: ResponseCache) -> None:
    """SQLite's own SQLITE_FULL, "database or disk is full": no page may be added to the file."""
    db = cache._connection()
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")


async def test_a_full_disk_degrades_to_no_caching_and_the_answer_returns(tmp_path, caplog):
    cache = ResponseCache(tmp_path)
    fill_up(cache)
    with OpenAIStubServer(lambda r: Reply(content="An answer long enough. " * 200)) as server:
        model = OpenAIChatModel(model="m", base_url=server.base_url, max_retries=0, cache=cache)
        first = await model.complete([{"role": "user", "content": "q"}], role="answer")
        second = await model.complete([{"role": "user", "content": "q2"}], role="answer")
    assert first.text.startswith("An answer") and second.text.startswith("An answer")
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings  # said once, not per answer
    assert "disk is full" in warnings[0] and "delete" not in warnings[0]
    assert cache.warning and "disk is full" in cache.warning


# --- corpus symlinks --------------------------------------------------------------------------------


def test_symlinks_out_of_a_corpus_folder_are_skipped_and_reported(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "inside.txt").write_text("# Inside\nKept.")
    secret = tmp_path / "secret.txt"
    secret.write_text("# Secret\nNever indexed.")
    (corpus / "passwd.txt").symlink_to("/etc/passwd")
    (corpus / "secret.txt").symlink_to(secret)
    (corpus / "alias.txt").symlink_to(corpus / "inside.txt")  # inside the folder: fine
    problems = []
    docs = list(iter_documents([corpus], problems=problems))
    assert sorted(d.doc_id for d in docs) == ["alias.txt", "inside.txt"]
    reasons = {p.location.split(":")[0].rsplit("/", 1)[-1]: p.reason for p in problems}
    assert set(reasons) == {"passwd.txt", "secret.txt"}
    assert all("outside the corpus folder" in r for r in reasons.values())


# --- question ids -----------------------------------------------------------------------------------


def test_txt_ids_are_content_based_and_survive_edits(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text("Why did Rome fall?\nHow do I bake bread?\n")
    before = dict(read_questions(path))
    path.write_text("How does photosynthesis work?\n\nWhy did Rome fall?\n  How do I  bake bread?\n")
    after = dict(read_questions(path))
    assert set(before) <= set(after)  # the same questions keep their ids wherever they move
    assert content_id("How do I bake bread?") in after


def test_duplicates_are_reported_and_skipped(tmp_path, caplog):
    path = tmp_path / "q.jsonl"
    path.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {"id": "a", "question": "Why did Rome fall?"},
                {"id": "a", "question": "How do I bake bread?"},
                {"question": "Why is the sky blue?"},
            ]
        )
    )
    items = read_questions(path)
    assert [i for i, _ in items] == ["a", content_id("Why is the sky blue?")]
    assert any("duplicate id 'a'" in r.getMessage() and "q.jsonl:2" in r.getMessage() for r in caplog.records)


def test_editing_the_file_between_runs_answers_each_question_once(tmp_path, retriever):
    pipeline = Pipeline(OfflineEngine(), retriever)
    questions, out = tmp_path / "q.txt", tmp_path / "answers.jsonl"
    questions.write_text("Why did Rome fall?\nHow do I bake bread?\n")
    assert asyncio.run(answer_file(pipeline, questions, out, "rag", None, 2)) == (2, 0)
    questions.write_text(
        "How does photosynthesis work?\nWhy did Rome fall?\nHow do I bake bread?\n"
    )  # one added on top
    assert asyncio.run(answer_file(pipeline, questions, out, "rag", None, 2)) == (1, 0)
    answered = [json.loads(line)["question"] for line in out.read_text().splitlines()]
    assert sorted(answered) == sorted(["Why did Rome fall?", "How do I bake bread?", "How does photosynthesis work?"])


def test_an_old_log_with_line_ids_is_still_honoured(tmp_path, retriever):
    pipeline = Pipeline(OfflineEngine(), retriever)
    questions, out = tmp_path / "q.txt", tmp_path / "answers.jsonl"
    questions.write_text("Why did Rome fall?\nHow do I bake bread?\n")
    out.write_text(json.dumps({"id": "line-1", "question": "Why did Rome fall?", "result": {}}) + "\n")
    assert asyncio.run(answer_file(pipeline, questions, out, "rag", None, 2)) == (1, 0)
