"""Issue 57 P6 and P7: question files read by six commands. A line that is not UTF-8, JSON nested too deep or a
field of the wrong kind is one line naming the file and the line, exit 2, before any model is called; text from
the file reaches the terminal as text (never rich markup, never a control sequence the terminal obeys), and a
comparison that finished always writes its report."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from typedrag.cli import app
from typedrag.index import build_index

runner = CliRunner()
GOOD = {
    "question": "Why do comets have tails?",
    "id": "q1",
    "references": [{"text": "Sunlight heats their ice.", "grade": 2}],
}


@pytest.fixture(scope="module")
def comets_index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("comets")
    (folder / "docs").mkdir()
    (folder / "docs" / "comets.txt").write_text(
        "Comets have tails because sunlight heats their ice, which releases gas and dust.\n\n"
        "The solar wind pushes a comet's tail away from the Sun.\n",
        encoding="utf-8",
    )
    build_index([folder / "docs"], folder / "index", show_progress=False, retrieval="bm25")
    return folder / "index"


def commands(path, index, tmp_path) -> dict[str, list[str]]:
    """The six commands that read a question file, offline where they can be (a model is never reached)."""
    return {
        "ask --file": ["ask", "--file", str(path), "--index", str(index), "--out", str(tmp_path / "answers.jsonl")],
        "classify --file": ["classify", "--file", str(path)],
        "eval": [
            "eval",
            "--dataset",
            str(path),
            "--methods",
            "rag",
            "--index",
            str(index),
            "--out",
            str(tmp_path / "run"),
        ],
        "eval compare": [
            "eval",
            "compare",
            str(path),
            "--a",
            "rag",
            "--b",
            "typed",
            "--index",
            str(index),
            "--out",
            str(tmp_path / "cmp"),
        ],
        "eval retrieval": [
            "eval",
            "retrieval",
            "--questions",
            str(path),
            "--index",
            str(index),
            "--out",
            str(tmp_path / "r.html"),
        ],
        "eval questions": [
            "eval",
            "questions",
            str(tmp_path),
            "--out",
            str(path),
            "--llm",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
    }


BAD_FILES = {
    "not UTF-8": (json.dumps(GOOD) + "\n").encode() + b'{"question": "Why \xff\xfe?"}\n',
    "deep JSON": (json.dumps(GOOD) + "\n" + "[" * 100_000 + "\n").encode(),
    "a number as the question": (
        json.dumps(GOOD) + "\n" + json.dumps({"question": 42, "type": "REASON"}) + "\n"
    ).encode(),
}


@pytest.mark.parametrize("bad", sorted(BAD_FILES))
@pytest.mark.parametrize(
    "command", ["ask --file", "classify --file", "eval", "eval compare", "eval retrieval", "eval questions"]
)
def test_a_bad_line_of_a_question_file_is_one_line_naming_the_file_and_line(command, bad, comets_index, tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_bytes(BAD_FILES[bad])
    run = runner.invoke(app, commands(path, comets_index, tmp_path)[command])
    assert run.exit_code == 2, (run.output, run.exception)
    lines = [line for line in run.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and f"{path}:2" in " ".join(run.output.split()), run.output
    assert "Traceback" not in run.output


def test_a_type_that_is_no_text_fails_eval_compare_before_any_answer(comets_index, tmp_path):
    """Before, `"type": 3` crashed the comparison after every question was answered and judged: no report."""
    path = tmp_path / "questions.jsonl"
    path.write_text(
        json.dumps(GOOD) + "\n" + json.dumps({"question": "Why do comets glow?", "type": 3}) + "\n", encoding="utf-8"
    )
    run = runner.invoke(app, commands(path, comets_index, tmp_path)["eval compare"])
    assert run.exit_code == 2 and "`type` must be text or null" in run.output, run.output
    assert not (tmp_path / "cmp" / "answers.jsonl").exists()  # nothing was answered


HOSTILE_TYPES = ["how-to [/]", "[bold red]loud[/bold red]", "clear \u001b[2J screen"]


def test_eval_retrieval_shows_a_files_types_as_text_and_writes_its_report(comets_index, tmp_path):
    """Before, "how-to [/]" raised rich.errors.MarkupError (no report) and ESC sequences reached the terminal."""
    path = tmp_path / "questions.jsonl"
    path.write_text(
        "".join(json.dumps({**GOOD, "id": f"q{i}", "type": t}) + "\n" for i, t in enumerate(HOSTILE_TYPES)),
        encoding="utf-8",
    )
    run = runner.invoke(app, commands(path, comets_index, tmp_path)["eval retrieval"])
    assert run.exit_code == 0, (run.output, run.exception)
    assert (tmp_path / "r.html").is_file() and (tmp_path / "r.json").is_file()
    flat = " ".join(run.output.split())
    assert "HOW-TO [/]" in flat and "[BOLD RED]LOUD[/BOLD RED]" in flat and "\\X1B[2J" in flat.upper()
    assert "\u001b" not in run.output


def test_eval_compare_shows_a_files_types_as_text_and_writes_its_report(comets_index, tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text(
        "".join(json.dumps({**GOOD, "id": f"q{i}", "type": t}) + "\n" for i, t in enumerate(HOSTILE_TYPES)),
        encoding="utf-8",
    )
    run = runner.invoke(app, commands(path, comets_index, tmp_path)["eval compare"])
    assert run.exit_code == 0, (run.output, run.exception)
    assert (tmp_path / "cmp" / "report.html").is_file()
    out = run.output.lower()
    assert "how-to-[/]" in out and "[bold-red]loud[/bold-red]" in out and "\\x1b[2j" in out and "\u001b" not in out


# --- P8: eval retrieval in bounded batches, questions as long as `ask` takes them ---------------------------------


def test_eval_retrieval_searches_in_bounded_batches_and_keeps_every_question_in_order():
    """Before, every question went to one `search_many` call: 100,000 questions held 4.8 GB at once."""
    from typedrag import ListRetriever
    from typedrag.evaluation.retrieval import SEARCH_BATCH, RetrievalQuestion, evaluate

    calls: list[int] = []

    class Counting(ListRetriever):
        def search_many(self, queries, k=10):
            calls.append(len(queries))
            return super().search_many(queries, k)

    questions = [
        RetrievalQuestion(question=f"comet tail {i}", id=str(i), type="REASON") for i in range(SEARCH_BATCH * 2 + 7)
    ]
    report = evaluate(
        questions, {"bm25": Counting(["Comets have tails of gas and dust.", "Planets orbit the Sun."])}, k=2
    )
    assert calls == [SEARCH_BATCH, SEARCH_BATCH, 7]
    assert [scored.question.id for scored in report.modes["bm25"]] == [q.id for q in questions]


def test_eval_retrieval_refuses_a_question_longer_than_ask_takes(comets_index, tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({"question": "why " * 3_000_000}) + "\n", encoding="utf-8")
    run = runner.invoke(app, commands(path, comets_index, tmp_path)["eval retrieval"])
    assert (
        run.exit_code == 2 and f"{path}:2" in " ".join(run.output.split()) and "over the limit of 2000" in run.output
    ), run.output
