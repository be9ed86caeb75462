"""`typedrag eval compare`: two systems answer, a blind pairwise judge reads each pair in both orders.

End to end against a real OpenAI-compatible HTTP server on loopback (typedrag.testing.openai_stub): its
default judge prefers the answer with more cited sentences, so a typed answer that cites more wins.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from typedrag.evaluation.command import eval_app, parse_side, side_names
from typedrag.evaluation.pairwise import PairVerdict, combine, first_shown, wilson, winner_of
from typedrag.testing.openai_stub import ChatRequest, OpenAIStubServer, Reply, candidates, default_content

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    ("rome", "Why did the Western Roman Empire fall?", None),
    ("bread", "How do I bake bread at home?", None),
    ("croc", "What is the difference between a crocodile and an alligator?", None),
    ("nuclear", "Should we build more nuclear power plants?", "debate"),
    ("photo", "What is photosynthesis?", None),
    ("empire", "What caused the decline of the Roman Empire in the west?", "reason"),
]
TYPED_ANSWER = (
    "Economic troubles weakened the state [1]. Invasions pressed the frontiers [2]. A stray remark about cats."
)


def write_questions(path: Path, rows=QUESTIONS, references: bool = False) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for qid, text, type_ in rows:
            row = {"id": qid, "question": text}
            if type_:
                row["type"] = type_
            if references:
                row["references"] = [
                    {"text": f"A full answer to {text}", "grade": 2},
                    {"text": "Unrelated.", "grade": 0},
                ]
            out.write(json.dumps(row) + "\n")
    return path


def merging(request: ChatRequest) -> bool:
    """A typed plan's last step (the aggregator of partial answers, or the debate's mediator)."""
    system = request.messages[0]["content"] if request.messages else ""
    return request.schema_name is None and (
        "partial answers" in system or "The case made from each perspective" in request.last_user
    )


def typed_cites_more(request: ChatRequest) -> Reply:
    """Plain RAG: the stub's one cited sentence. A typed plan's merged answer: two cited sentences and one uncited."""
    if merging(request):
        return Reply(content=TYPED_ANSWER)
    return Reply(content=default_content(request))


def judge_requests(server: OpenAIStubServer) -> list[ChatRequest]:
    return [r for r in server.requests if r.schema_name == "PairVerdict"]


def run_compare(args: list[str], env_cache: Path, monkeypatch):
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(env_cache))
    monkeypatch.setenv("TYPEDRAG_API_KEY", "test")
    return CliRunner().invoke(eval_app(), ["compare", *args])


# --- the judgment's arithmetic ------------------------------------------------------------------


def test_orders_combine_into_one_outcome():
    assert winner_of("A", shown_first="b") == "b" and winner_of("B", shown_first="b") == "a"
    assert winner_of("tie", shown_first="a") == "tie"
    assert combine(["b", "b"]) == "b" and combine(["b", "tie"]) == "b" and combine(["tie", "a"]) == "a"
    assert combine(["a", "b"]) == "tie"  # the orders contradict: position bias, not a preference
    assert combine(["tie", "tie"]) == "tie"


def test_first_shown_is_drawn_per_question_and_stable():
    shown = [first_shown(f"q{i}") for i in range(40)]
    assert 10 < shown.count("a") < 30  # both systems are shown first, about half the time each
    assert shown == [first_shown(f"q{i}") for i in range(40)]
    assert shown != [first_shown(f"q{i}", seed=1) for i in range(40)]


def test_wilson_interval_matches_hand_computed_values():
    interval = wilson(18, 20)  # p = 0.9, z = 1.96: centre 0.8356, half-width 0.1366
    assert interval.share == 0.9
    assert interval.low == pytest.approx(0.6990, abs=1e-4) and interval.high == pytest.approx(0.9721, abs=1e-4)
    assert interval.excludes_half()
    even = wilson(5, 10)
    assert even.low < 0.5 < even.high and not even.excludes_half()
    assert wilson(0, 0).share is None and not wilson(0, 0).excludes_half()
    assert wilson(3, 3).high == 1.0 and wilson(0, 3).low == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    ("written", "read"), [("A", "A"), ("b", "B"), ("Answer A", "A"), ("TIE", "tie"), ("neither", "tie")]
)
def test_verdict_accepts_unambiguous_spellings(written, read):
    reading = {"satisfies": True, "answering": 1, "noise": 0}
    verdict = PairVerdict.model_validate({"answer_a": reading, "answer_b": reading, "reason": "r", "winner": written})
    assert verdict.winner == read


def test_verdict_rejects_what_is_not_a_verdict():
    reading = {"satisfies": True, "answering": 1, "noise": 0}
    with pytest.raises(ValueError):
        PairVerdict.model_validate({"answer_a": reading, "answer_b": reading, "reason": "r", "winner": "both good"})
    with pytest.raises(ValueError):
        PairVerdict.model_validate(
            {"answer_a": {**reading, "noise": -1}, "answer_b": reading, "reason": "r", "winner": "A"}
        )


@pytest.mark.parametrize(
    ("a", "b", "names"),
    [
        ("rag", "typed", ("rag", "typed")),
        ("typed", "typed,top_k=8", ("typed", "typed,top_k=8")),
        ("typed,name=small,llm=m1", "typed,name=big,llm=m2", ("small", "big")),
        ("rag", "rag,expand=true", ("rag", "rag,expand=true")),
    ],
)
def test_side_specs_and_names(a, b, names):
    assert side_names(parse_side(a), parse_side(b), (a, b)) == names


def test_a_side_may_expand_its_queries():
    """Plain RAG with and without the model's expanded query (--expand) is a comparison a user asks for."""
    from typedrag.config import load_settings

    method, name, overrides = parse_side("rag,expand=true")
    assert (method, name, overrides) == ("rag", None, {"expand_queries": "true"})
    assert (
        load_settings(overrides).expand_queries is True and load_settings({}).expand_queries is None
    )  # the pipeline's default


def test_a_side_may_add_the_models_own_knowledge_labelled():
    """typed with knowledge = labelled against typed from the documents alone: the judge reads each whole reply."""
    from typedrag.config import load_settings

    a, b = parse_side("typed"), parse_side("typed,knowledge=labelled,name=labelled")
    assert b == ("typed", "labelled", {"knowledge": "labelled"}) and side_names(
        a, b, ("typed", "typed,knowledge=labelled")
    ) == ("typed", "labelled")
    assert load_settings(b[2]).knowledge == "labelled" and load_settings(a[2]).knowledge == "documents"


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ("rag", "rag", "the same system"),
        ("fancy", "typed", "starts with its method"),
        ("typed,depth=3", "rag", "unknown key 'depth'"),
        ("typed,top_k", "rag", "is not key=value"),
        ("typed,name=x,llm=m1", "typed,name=x,llm=m2", "both systems are named 'x'"),
    ],
)
def test_bad_side_specs_say_what_is_wrong(a, b, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        side_names(parse_side(a), parse_side(b), (a, b))


def test_bad_side_spec_is_one_line_on_the_command_line(tmp_path, monkeypatch):
    result = run_compare(
        [str(write_questions(tmp_path / "q.jsonl")), "--a", "rag", "--b", "typed,depth=3"], tmp_path / "c", monkeypatch
    )
    assert result.exit_code == 2 and "unknown key 'depth'" in result.output


# --- end to end against the loopback server -----------------------------------------------------


def test_end_to_end_typed_against_rag_judged_blind_in_both_orders(stub, tmp_path, small_index, monkeypatch):
    questions, out = write_questions(tmp_path / "mine.jsonl"), tmp_path / "run"
    server = stub(typed_cites_more)
    args = [
        str(questions),
        "--index",
        str(small_index),
        "--out",
        str(out),
        "--llm",
        "gen",
        "--base-url",
        server.base_url,
        "--judge",
        "judge",
        "--judge-base-url",
        server.base_url,
        "--no-progress",
    ]
    result = run_compare(args, tmp_path / "cache", monkeypatch)
    assert result.exit_code == 0, result.output
    judged = judge_requests(server)

    summary = json.loads((out / "summary.json").read_text())
    items = {item["id"]: item for item in summary["items"]}
    decomposed = [i for i in items.values() if i["strategies"]["b"] in ("reason", "instruction", "debate")]
    assert decomposed, [i["strategies"] for i in items.values()]
    for item in decomposed:  # typed's merged answer cites more: b wins in both orders
        assert item["outcome"] == "b" and len(item["rounds"]) == 2, item
        assert {r["shown_first"] for r in item["rounds"]} == {"a", "b"}  # the second order swaps the first
        assert all(r["reason"] for r in item["rounds"])
        assert all(r["b"] == {"satisfies": True, "answering": 2, "noise": 1} for r in item["rounds"])
        assert all(r["a"] == {"satisfies": True, "answering": 1, "noise": 0} for r in item["rounds"])
    for item in items.values():
        if item["answers"]["a"] == item["answers"]["b"]:  # the same text is a tie no judge is asked about
            assert item["outcome"] == "tie" and item["identical"] and item["rounds"] == []
    assert len(judged) == 2 * len([i for i in items.values() if not i["identical"]])

    # Blind: the judge sees the question and two answers, never which system wrote which.
    for request in judged:
        shown = candidates(request.last_user)
        assert set(shown) == {"A", "B"}
        assert not re.search(r"\b(rag|typed|gen)\b", request.prompt, re.I)
        assert request.body["temperature"] == 0

    overall = summary["overall"]
    assert overall["items"] == len(QUESTIONS) and overall["wins_b"] == len(decomposed) and overall["wins_a"] == 0
    assert overall["ties"] == len(QUESTIONS) - len(decomposed) and overall["failures"] == 0
    assert overall["noise_b"] == len(decomposed) and overall["answering_b"] > overall["answering_a"]
    assert (
        summary["by_type"]["DEBATE"]["wins_b"] == 1 and summary["by_type"]["REASON"]["items"] >= 1
    )  # the file's types
    assert summary["type_source"].startswith("the question file where it names one")
    assert summary["judge"]["name"].startswith("openai-compatible:judge@")

    output = " ".join(result.output.split())
    assert "typed is preferred" in output and "share [95%]" in output
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and html.count("<h3 id=") == len(QUESTIONS)
    assert (out / "compare-by-type.png").read_bytes()[:4] == b"\x89PNG"
    assert "| all |" in (out / "report.md").read_text()


def test_a_judge_that_always_prefers_the_first_answer_decides_nothing(stub, tmp_path, small_index, monkeypatch):
    """Position bias cancels: each order names a different system, so every judged item is a tie."""

    def first_is_best(request: ChatRequest) -> Reply:
        if request.schema_name == "PairVerdict":
            reading = {"satisfies": True, "answering": 1, "noise": 0}
            return Reply(
                content=json.dumps({"answer_a": reading, "answer_b": reading, "reason": "first", "winner": "A"})
            )
        return typed_cites_more(request)

    questions, out = write_questions(tmp_path / "q.jsonl"), tmp_path / "run"
    server = stub(first_is_best)
    args = [
        str(questions),
        "--index",
        str(small_index),
        "--out",
        str(out),
        "--llm",
        "gen",
        "--base-url",
        server.base_url,
        "--no-progress",
    ]
    result = run_compare(args, tmp_path / "cache", monkeypatch)
    assert result.exit_code == 0, result.output
    overall = json.loads((out / "summary.json").read_text())["overall"]
    assert overall["wins_a"] == overall["wins_b"] == 0 and overall["ties"] == overall["items"]
    assert overall["consistent_orders"] == 0


def test_an_invalid_verdict_is_repaired_once_then_recorded_as_a_failure_and_asked_again(
    stub, tmp_path, small_index, monkeypatch
):
    questions, out = write_questions(tmp_path / "q.jsonl", QUESTIONS[:1]), tmp_path / "run"
    server = stub(lambda r: Reply(content="I like both.") if r.schema_name == "PairVerdict" else typed_cites_more(r))
    args = [
        str(questions),
        "--index",
        str(small_index),
        "--out",
        str(out),
        "--llm",
        "gen",
        "--base-url",
        server.base_url,
        "--no-progress",
    ]
    result = run_compare(args, tmp_path / "cache", monkeypatch)
    assert result.exit_code == 0, result.output
    assert len(judge_requests(server)) == 4  # two orders, each asked and repaired once
    repair = judge_requests(server)[-1].messages
    assert repair[-2]["content"] == "I like both." and "could not be used" in repair[-1]["content"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"][0]["outcome"] == "judge failed" and summary["overall"]["failures"] == 1
    assert any("invalid structured output" in e for e in summary["errors_this_run"])
    failed = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert [f["structured"] for f in failed] == ["failed", "failed"] and all(
        f["reply"] == "I like both." for f in failed
    )

    server = stub(typed_cites_more)  # a judge that now answers: only the judgment is asked again
    args[args.index("--base-url") + 1] = server.base_url
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))
    result = CliRunner().invoke(eval_app(), ["compare", *args, "--out", str(tmp_path / "run2")])
    assert result.exit_code == 0, result.output


def test_rerun_asks_nothing_already_answered_or_judged(stub, tmp_path, small_index, monkeypatch):
    questions, out = write_questions(tmp_path / "q.jsonl"), tmp_path / "run"
    judge_down = {"on": True}

    def responder(request: ChatRequest) -> Reply:
        if request.schema_name == "PairVerdict" and judge_down["on"]:
            return Reply(content="overloaded", status=503)
        return typed_cites_more(request)

    server = stub(responder)
    args = [
        str(questions),
        "--index",
        str(small_index),
        "--out",
        str(out),
        "--llm",
        "gen",
        "--base-url",
        server.base_url,
        "--no-progress",
        "--llm-timeout",
        "5",
    ]
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TYPEDRAG_API_KEY", "test")
    first = CliRunner().invoke(eval_app(), ["compare", *args])
    assert first.exit_code == 0, first.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["failures"] > 0 and any("judge" in e for e in summary["errors_this_run"])

    judge_down["on"] = False
    (tmp_path / "cache").rename(tmp_path / "old-cache")  # no response cache: only the run's own logs can skip work
    before = len(server.requests)
    second = CliRunner().invoke(eval_app(), ["compare", *args])
    assert second.exit_code == 0, second.output
    asked = server.requests[before:]
    assert asked and all(r.schema_name == "PairVerdict" for r in asked)  # answers came from the log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["failures"] == 0

    before = len(server.requests)
    third = CliRunner().invoke(eval_app(), ["compare", *args])
    assert third.exit_code == 0 and len(server.requests) == before
    assert json.loads((out / "summary.json").read_text())["overall"] == summary["overall"]


def test_a_different_set_up_is_refused_in_the_same_run_directory(tmp_path, small_index, monkeypatch):
    questions, out = write_questions(tmp_path / "q.jsonl", QUESTIONS[:2]), tmp_path / "run"
    base = [str(questions), "--index", str(small_index), "--out", str(out), "--no-progress"]
    assert run_compare(base, tmp_path / "cache", monkeypatch).exit_code == 0
    other = run_compare([*base, "--top-k", "2"], tmp_path / "cache", monkeypatch)
    assert other.exit_code == 2 and "different set-up" in other.output


def test_offline_answers_both_and_says_in_one_line_what_it_cannot_do(tmp_path, small_index, monkeypatch):
    questions, out = write_questions(tmp_path / "q.jsonl"), tmp_path / "run"
    result = run_compare(
        [str(questions), "--index", str(small_index), "--out", str(out), "--no-progress"],
        tmp_path / "cache",
        monkeypatch,
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("no judge:")]
    assert len(lines) == 1 and "--judge" in lines[0] and "cannot say which answer is better" in lines[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge"] is None and summary["overall"]["items"] == len(QUESTIONS)
    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert Counter(a["system"] for a in answers) == {"rag": len(QUESTIONS), "typed": len(QUESTIONS)}
    assert all(a["generator"].startswith("offline") for a in answers)
    assert (
        "where their answers differ" in (out / "report.md").read_text()
        or "identical" in (out / "report.md").read_text()
    )


def test_references_add_linkage_for_both_systems(stub, tmp_path, small_index, monkeypatch):
    def responder(request: ChatRequest) -> Reply:
        candidate = re.search(r"<candidate>\n(.*?)\n</candidate>", request.last_user, re.S)
        if candidate:  # a LINKAGE judge: an answer citing a second source ranks first, else second
            return Reply(content="Good. [[1]]" if "[2]" in candidate.group(1) else "Weaker. [[2]]")
        return typed_cites_more(request)

    questions, out = write_questions(tmp_path / "q.jsonl", QUESTIONS[:2], references=True), tmp_path / "run"
    server = stub(responder)
    args = [
        str(questions),
        "--index",
        str(small_index),
        "--out",
        str(out),
        "--llm",
        "gen",
        "--base-url",
        server.base_url,
        "--no-progress",
    ]
    result = run_compare(args, tmp_path / "cache", monkeypatch)
    assert result.exit_code == 0, result.output
    linkage = json.loads((out / "summary.json").read_text())["linkage"]
    overall = {c["method"]: c for c in linkage["cells"] if c["type"] == "all"}
    assert set(overall) == {"rag", "typed"} and overall["rag"]["scored"] == 2 and overall["rag"]["mpr"] == 50.0
    assert "LINKAGE against your references" in (out / "report.html").read_text()


def test_hostile_answers_are_text_in_the_html_report(stub, tmp_path, small_index, monkeypatch):
    def responder(request: ChatRequest) -> Reply:
        if request.schema_name is None and "Question:" in request.last_user and not merging(request):
            return Reply(content="<script>alert(1)</script> Read this [1].")
        return typed_cites_more(request)

    questions, out = write_questions(tmp_path / "q.jsonl", QUESTIONS[:1]), tmp_path / "run"
    server = stub(responder)
    args = [
        str(questions),
        "--index",
        str(small_index),
        "--out",
        str(out),
        "--llm",
        "gen",
        "--base-url",
        server.base_url,
        "--no-progress",
    ]
    assert run_compare(args, tmp_path / "cache", monkeypatch).exit_code == 0
    html = (out / "report.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_killed_compare_resumes_without_losing_or_repeating(stub, tmp_path, small_index):
    """SIGKILL half-way, then a torn last line: the rerun keeps every record and asks for none of them again."""
    many = [(f"q{i}", f"{text} (case {i})", type_) for i, (_, text, type_) in enumerate(QUESTIONS * 2)]
    questions, out, cache = write_questions(tmp_path / "q.jsonl", many), tmp_path / "run", tmp_path / "cache"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "TYPEDRAG_CACHE_DIR": str(cache),
        "TYPEDRAG_API_KEY": "test",
    }

    def slow(request: ChatRequest) -> Reply:
        reply = typed_cites_more(request)
        reply.delay = 0.1
        return reply

    def lines(name: str) -> list[str]:
        path = out / name
        return path.read_text(encoding="utf-8").split("\n")[:-1] if path.exists() else []

    server = stub(slow)
    command = [
        sys.executable,
        "-m",
        "typedrag.cli",
        "eval",
        "compare",
        str(questions),
        "--index",
        str(small_index),
        "--out",
        str(out),
        "--llm",
        "gen",
        "--base-url",
        server.base_url,
        "--concurrency",
        "2",
        "--no-progress",
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 180
    while len(lines("judgments.jsonl")) < 2:
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "the first run judged nothing in time"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stderr.close()
    before = {name: lines(name) for name in ("answers.jsonl", "judgments.jsonl")}
    with (out / "answers.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"question_id": "q0", "system": "rag", "ans')  # torn

    (cache).rename(tmp_path / "old-cache")  # only the run's logs may spare the second run its work
    sent = len(server.requests)
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    asked = server.requests[sent:]

    answers = [json.loads(line) for line in lines("answers.jsonl")]
    assert Counter((a["question_id"], a["system"]) for a in answers) == Counter(
        (q, s) for q, _, _ in many for s in ("rag", "typed")
    )
    for name, kept in before.items():
        assert lines(name)[: len(kept)] == kept
    logged = Counter(json.loads(line)["question_id"] for line in before["answers.jsonl"])
    done = [text for q, text, _ in many if logged[q] == 2]  # both systems answered before the kill
    assert done, "the kill came before any question was answered by both systems"
    # Nothing answered before the kill was answered again: the rerun's generator requests are for other questions.
    assert not [r for r in asked if r.schema_name != "PairVerdict" and any(text in r.prompt for text in done)]
    judged = Counter((j["question_id"], j["round"]) for j in map(json.loads, lines("judgments.jsonl")))
    assert all(count == 1 for count in judged.values())  # no pair was judged twice
    assert json.loads((out / "summary.json").read_text())["overall"]["failures"] == 0


@pytest.mark.parametrize("judged", [False, True])
def test_the_compare_chart_has_a_legend_whose_every_swatch_shows_on_white(judged, monkeypatch, tmp_path):
    """Issue 55 E15: the chart was reported with no legend. Its legend names every part of a bar, and the palest
    part's swatch ("no answer", "not judged": #F2F2F2 edged in white) was invisible on the white page: it has an edge."""
    import matplotlib.colors
    import matplotlib.figure

    from typedrag.evaluation.compare_report import draw_compare_chart

    tally = {
        "items": 6,
        "wins_a": 1,
        "wins_b": 2,
        "ties": 1,
        "identical": 2,
        "failures": 1,
        "share_b_of_decided": 0.67,
        "share_b_low": 0.2,
        "share_b_high": 0.9,
    }
    summary = {
        "a": "rag",
        "b": "typed",
        "judge": {"name": "stub-judge"} if judged else None,
        "overall": tally,
        "by_type": {"REASON": tally},
    }
    legends = []
    save = matplotlib.figure.Figure.savefig

    def keep(figure, *args, **kwargs):
        legends.extend(figure.legends)
        return save(figure, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    assert draw_compare_chart(summary, tmp_path / "chart.png") is None
    (legend,) = legends
    names = [text.get_text() for text in legend.get_texts()]
    assert names == (
        ["rag wins", "tie", "typed wins", "not judged"] if judged else ["identical", "differ", "no answer"]
    )
    for handle in legend.legend_handles:
        darkest = min(
            min(matplotlib.colors.to_rgb(handle.get_facecolor())), min(matplotlib.colors.to_rgb(handle.get_edgecolor()))
        )
        assert darkest < 0.85, names
