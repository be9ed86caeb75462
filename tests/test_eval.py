"""The evaluation harness: metric arithmetic, LINKAGE references and verdicts, judges, datasets,
the crash-safe log, and an end-to-end run with a real HTTP stub as generator and judge."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from typedrag.errors import UserError
from typedrag.evaluation.datasets import EvalQuestion, Reference, load_dataset, stratified_sample
from typedrag.evaluation.judges import LLMJudge, ProxyJudge
from typedrag.evaluation.linkage import RankConvention, parse_verdict, question_rank, select_references
from typedrag.evaluation.metrics import ALL, Score, cells, percentile_rank, reciprocal_rank
from typedrag.jsonlog import JsonlLog, JsonlLogError
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.testing.openai_stub import ChatRequest, OpenAIStubServer, Reply, default_content

ROOT = Path(__file__).resolve().parents[1]
LINKAGE, TYPED_RAG = RankConvention.LINKAGE, RankConvention.TYPED_RAG


# --- metrics ------------------------------------------------------------------------------------

ROUNDS = {  # question id -> (references, judged positions per round)
    "q1": (4, [2, 5, 2]),  # linkage: median 2           typed-rag: median 2
    "q2": (4, [5, 5, 4]),  # linkage: 5 (worse than all)  typed-rag: 4
    "q3": (2, [3]),  # linkage: 3                  typed-rag: 2
    "q4": (4, [None, None]),  # no parsable round: a failure in both
}


def _scores(convention: RankConvention) -> list[Score]:
    return [
        Score(qid, "typed", "nq", "REASON", n, question_rank(positions, n, convention))
        for qid, (n, positions) in ROUNDS.items()
    ]


def test_single_rank_formulas():
    assert reciprocal_rank(4) == 0.25
    assert percentile_rank(1, 4) == 100.0
    assert percentile_rank(5, 4) == 0.0  # linkage: worse than all 4 -> rank 5 -> 0
    assert percentile_rank(4, 4) == 25.0  # typed-rag: worse than all 4 -> rank 4 -> 25


def test_rounds_median_and_conventions():
    assert question_rank([2, 5, 2], 4, LINKAGE) == 2
    assert question_rank([5, 5, 4], 4, LINKAGE) == 5
    assert question_rank([5, 5, 4], 4, TYPED_RAG) == 4
    assert question_rank([2, 3], 4, LINKAGE) == 2.5  # even count: the middle two averaged
    assert question_rank([None, 3, None], 4, LINKAGE) == 3  # unparsed rounds are left out, not imputed
    assert question_rank([None, None], 4, LINKAGE) is None


@pytest.mark.parametrize(
    ("convention", "mrr", "mpr"),
    [
        # ranks 2, 5, 3 (|R| 4, 4, 2): MRR (1/2 + 1/5 + 1/3) / 3; MPR (75 + 0 + 0) / 3
        (LINKAGE, (0.5 + 0.2 + 1 / 3) / 3, 25.0),
        # ranks 2, 4, 2: MRR (1/2 + 1/4 + 1/2) / 3; MPR (75 + 25 + 50) / 3
        (TYPED_RAG, (0.5 + 0.25 + 0.5) / 3, 50.0),
    ],
)
def test_mrr_mpr_hand_computed(convention, mrr, mpr):
    table = {(c.source, c.type): c for c in cells(_scores(convention))}
    assert set(table) == {("nq", "REASON"), ("nq", ALL), (ALL, "REASON"), (ALL, ALL)}
    for cell in table.values():
        assert cell.scored == 3 and cell.failures == 1
        assert cell.mrr == pytest.approx(mrr)
        assert cell.mpr == pytest.approx(mpr)


def test_cells_split_by_method_source_and_type():
    scores = [
        Score("a", "rag", "nq", "REASON", 4, 1),
        Score("b", "rag", "squad", "DEBATE", 4, 3),
        Score("a", "typed", "nq", "REASON", 4, None, "answer"),
    ]
    table = {(c.method, c.source, c.type): c for c in cells(scores)}
    assert table[("rag", "nq", "REASON")].mrr == 1.0
    assert table[("rag", "squad", ALL)].mpr == 50.0
    assert table[("rag", ALL, ALL)].mrr == pytest.approx((1 + 1 / 3) / 2)
    assert table[("typed", ALL, ALL)].scored == 0 and table[("typed", ALL, ALL)].failures == 1
    assert table[("typed", ALL, ALL)].mrr is None


# --- references and verdicts --------------------------------------------------------------------


def _question(qid: str = "single_nq_dev_1") -> EvalQuestion:
    refs = [Reference(f"grade {g} answer number {i}", g) for g in (0, 3, 1, 2) for i in range(5)]
    return EvalQuestion(qid, "Why is the sky blue?", "nq", tuple(refs))


def test_reference_selection_one_per_grade_best_first_and_stable():
    question = _question()
    picked = select_references(question)
    assert [r.grade for r in picked] == [3, 2, 1, 0]
    assert all(select_references(question) == picked for _ in range(5))
    # Picks vary between questions (so they are really drawn), but never between calls or methods.
    assert len({tuple(select_references(_question(f"q{i}"))) for i in range(20)}) > 1


def test_reference_selection_is_the_same_in_another_process():
    """Seeded by a hash of the id, not Python's per-process salted hash()."""
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]);"
        "from test_eval import _question; from typedrag.evaluation.linkage import select_references;"
        "print(json.dumps([r.text for r in select_references(_question())]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "tests"), str(ROOT)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == [r.text for r in select_references(_question())]


@pytest.mark.parametrize(
    ("reply", "position"),
    [
        ("[[3]]", 3),
        ("Rank: [[2]]", 2),
        ("It is weaker than the first two. [[ 3 ]]", 3),
        ("First I thought [[1]], but on reflection [[4]]", None),  # several verdicts: unusable (issue 13)
        ("[[5]]", 5),  # worse than all four references
        ("[[6]]", None),  # out of range for four references
        ("[[0]]", None),
        ("Rank: 2", None),
        ("[2]", None),
        ("I cannot decide.", None),
        ("", None),
    ],
)
def test_parse_verdict(reply, position):
    assert parse_verdict(reply, 4) == position


# --- judges ------------------------------------------------------------------------------------

REFS = [
    Reference("Plants make sugar from light, water and carbon dioxide in their chloroplasts, releasing oxygen.", 3),
    Reference("Plants use sunlight to make food, and they give off oxygen.", 2),
    Reference("Plants eat soil.", 0),
]


async def test_proxy_judge_places_by_similarity_to_the_best_reference():
    judge = ProxyJudge()
    copy = await judge.place("How do plants make food?", REFS, REFS[0].text, 1)
    assert copy.position == 1 and copy.calls == []
    unrelated = await judge.place("How do plants make food?", REFS, "The 1998 World Cup final was played in Paris.", 1)
    assert unrelated.position == len(REFS) + 1
    assert judge.is_proxy and "not an LLM judge" in judge.name


def _candidate(request: ChatRequest) -> str:
    match = re.search(r"Candidate answer:\n(.*?)\n\nWhere does", request.messages[1]["content"], re.S)
    return match.group(1) if match else ""


async def test_llm_judge_retries_once_then_reports_failure():
    def responder(request: ChatRequest) -> Reply:
        if "good" in _candidate(request):
            return Reply(content="Clearly strong. [[1]]" if len(request.messages) > 2 else "Strong, position one.")
        return Reply(content="I would rather not say.")

    with OpenAIStubServer(responder) as server:
        judge = LLMJudge(OpenAIChatModel(model="judge", base_url=server.base_url, max_retries=0))
        repaired = await judge.place("Q?", REFS, "a good answer", 1)
        assert repaired.position == 1 and repaired.retried and len(repaired.calls) == 2
        failed = await judge.place("Q?", REFS, "a bad answer", 1)
        assert failed.position is None and failed.retried
        assert len(server.requests) == 4  # exactly one follow-up per unusable reply
        follow_up = server.requests[-1].messages
        assert follow_up[-2] == {"role": "assistant", "content": "I would rather not say."}
        assert "[[k]]" in follow_up[-1]["content"]


# --- datasets ----------------------------------------------------------------------------------


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_load_wiki_nfqa_and_generic_formats(tmp_path):
    _write_jsonl(
        tmp_path / "nq.jsonl",
        [{"question_id": "n1", "question_text": "why x", "answer_list": ["a", "", "c"], "answer_label": [3, 2, 0]}],
    )
    _write_jsonl(
        tmp_path / "mine.jsonl",
        [{"question": "how y", "type": "instruction", "references": [{"text": "r", "grade": 1}]}],
    )
    questions = {q.source: q for q in load_dataset(tmp_path)}
    assert questions["nq"].references == (Reference("a", 3), Reference("c", 0))  # empty text dropped
    assert questions["mine"].id == "mine-1" and questions["mine"].gold_type == "instruction"
    (tmp_path / "bad").mkdir()
    bad = _write_jsonl(tmp_path / "bad" / "x.jsonl", [{"foo": 1}])
    with pytest.raises(UserError, match=r"x\.jsonl:1"):
        load_dataset(bad)


def test_stratified_sample_is_proportional_and_seeded():
    questions = [
        EvalQuestion(f"{s}{i}", "q", s, (Reference("r", 1),))
        for s, n in (("a", 10), ("b", 30), ("c", 60))
        for i in range(n)
    ]
    sample = stratified_sample(questions, 10, seed=7)
    assert [q.source for q in sample].count("a") == 1
    assert [q.source for q in sample].count("b") == 3
    assert [q.source for q in sample].count("c") == 6
    assert sample == stratified_sample(questions, 10, seed=7)
    assert sample != stratified_sample(questions, 10, seed=8)
    assert len(stratified_sample(questions, 7, seed=0)) == 7
    assert stratified_sample(questions, None, seed=0) == questions


# --- the crash-safe log ------------------------------------------------------------------------


def test_jsonl_log_discards_a_torn_last_line(tmp_path):
    path = tmp_path / "log.jsonl"
    log = JsonlLog(path, ("n",))
    log.append({"n": 1})
    log.append({"n": 2})
    log.close()
    with path.open("a") as f:
        f.write('{"n": 3, "answer": "half a rec')
    log = JsonlLog(path, ("n",))
    assert log.records == [{"n": 1}, {"n": 2}]
    log.append({"n": 3})
    log.close()
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_jsonl_log_refuses_damage_in_the_middle(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"n": 1}\nnot json\n{"n": 3}\n')
    with pytest.raises(JsonlLogError, match=":2"):
        JsonlLog(path, ("n",))


@pytest.mark.parametrize(
    "content",
    [
        "my notes\nline two",  # a line of text, then a tail: the tail used to be cut as a torn write, and the line with it
        "just one line of notes",
        '{"n": 1}\n{"other": 2}\n',  # JSON, but not records of this log
        '{"n": 1}\n{"other": "half',  # a torn tail that is not of this log's records
        "[1, 2]\n",
    ],
)
def test_jsonl_log_refuses_a_file_it_did_not_write_and_leaves_it_untouched(tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_text(content)
    with pytest.raises(JsonlLogError, match="not a record typedrag wrote"):
        JsonlLog(path, ("n",))
    assert path.read_text() == content


# --- end to end --------------------------------------------------------------------------------

QUESTIONS = [
    ("Why did the Western Roman Empire fall?", "rome"),
    ("How do I bake bread at home?", "bread"),
    ("What is the difference between a crocodile and an alligator?", "croc"),
]


def write_dataset(directory: Path, count: int = 3) -> Path:
    """Two small source files: one in Wiki-NFQA format, one in the generic format; four grades each."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = [(f"q{i}", *QUESTIONS[i % len(QUESTIONS)]) for i in range(count)]
    grades = [3, 2, 1, 0]
    wiki = [
        {
            "question_id": qid,
            "question_text": text,
            "answer_list": [f"{topic} answer of grade {g}" for g in grades],
            "answer_label": grades,
        }
        for qid, text, topic in rows[::2]
    ]
    generic = [
        {"id": qid, "question": text, "references": [{"text": f"{topic} reference {g}", "grade": g} for g in grades]}
        for qid, text, topic in rows[1::2]
    ]
    _write_jsonl(directory / "wikistyle.jsonl", wiki)
    _write_jsonl(directory / "mine.jsonl", generic)
    return directory


def judge_or_answer(request: ChatRequest) -> Reply:
    """Generator: the stub's default replies. Judge: cited candidates rank 1, uncited ones 3 (of 4)."""
    if "Candidate answer:" not in request.last_user:
        return Reply(content=default_content(request))
    return Reply(content="Cited and on topic. [[1]]" if re.search(r"\[\d+\]", _candidate(request)) else "Vague. [[3]]")


def eval_app() -> typer.Typer:
    from typedrag.evaluation.command import eval_command

    app = typer.Typer()
    app.command()(eval_command)
    return app


def test_end_to_end_with_llm_generator_and_judge(tmp_path, small_index, monkeypatch):
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))
    dataset, out = write_dataset(tmp_path / "data"), tmp_path / "run"
    with OpenAIStubServer(judge_or_answer) as server:
        args = [
            "--dataset", str(dataset), "--index", str(small_index), "--out", str(out),
            "--llm", "gen", "--base-url", server.base_url, "--judge", "judge", "--judge-base-url", server.base_url,
            "--rounds", "2", "--concurrency", "2", "--no-progress",
        ]  # fmt: skip
        result = CliRunner().invoke(eval_app(), args)
        assert result.exit_code == 0, result.output
        judge_prompts = [r.last_user for r in server.requests if r.body["model"] == "judge"]

    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    verdicts = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert sorted((a["question_id"], a["method"]) for a in answers) == sorted(
        (f"q{i}", m) for i in range(3) for m in ("llm", "rag", "typed")
    )
    assert len(verdicts) == 3 * 3 * 2 and {v["round"] for v in verdicts} == {1, 2}
    assert judge_prompts  # identical candidates share cached verdicts, so fewer than 18 requests may be sent

    # Every method of a question was judged against exactly the same reference list.
    for question, _ in QUESTIONS:
        blocks = {
            re.search(r"worst \(4\):\n(.*?)\n\nCandidate", p, re.S).group(1) for p in judge_prompts if question in p
        }
        assert len(blocks) == 1

    summary = json.loads((out / "summary.json").read_text())
    config = summary["configuration"]
    assert config["judge"]["kind"] == "llm" and config["rounds"] == 2 and config["rank_convention"] == "linkage"
    assert config["generator"]["model"] == "gen" and config["index"]["manifest_sha256"]
    overall = {c["method"]: c for c in summary["cells"] if c["source"] == ALL and c["type"] == ALL}
    # LLM-only answers carry no citations -> judged 3 of 4+1 -> MRR 1/3, MPR (1 - 2/4) * 100.
    assert overall["llm"]["mrr"] == pytest.approx(1 / 3) and overall["llm"]["mpr"] == pytest.approx(50.0)
    assert overall["rag"]["mrr"] == 1.0 and overall["rag"]["mpr"] == 100.0
    for stats in summary["per_method"].values():
        assert stats["scored"] == 3 and stats["judge_usage"]["calls"] == 6 and stats["generator_usage"]["calls"] >= 3
    # Tokens count what was sent; cache hits (identical candidates of two methods) cost none.
    assert sum(s["judge_usage"]["prompt_tokens"] for s in summary["per_method"].values()) > 0

    markdown = (out / "results.md").read_text()
    assert "| Typed-RAG |" in markdown and "proxy" not in markdown
    assert "type (predicted by " in markdown
    assert (out / "results.csv").read_text().startswith("method,")
    assert (out / "mpr-by-type.png").read_bytes()[:4] == b"\x89PNG"
    assert summary["chart_missing"] is None and summary["files"]["chart"] == "mpr-by-type.png"


def test_offline_run_uses_the_labelled_proxy_and_skips_llm(tmp_path, small_index, monkeypatch):
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))
    dataset, out = write_dataset(tmp_path / "data"), tmp_path / "run"
    args = [
        "--dataset",
        str(dataset),
        "--index",
        str(small_index),
        "--out",
        str(out),
        "--llm",
        "offline",
        "--no-progress",
    ]
    result = CliRunner().invoke(eval_app(), args)
    assert result.exit_code == 0, result.output
    assert not (out / "results.md").exists() and not (out / "summary.json").exists()
    summary = json.loads((out / "summary-proxy.json").read_text())
    assert summary["configuration"]["methods"] == ["rag", "typed"]
    assert summary["configuration"]["rounds"] == 1
    assert any("closed-book" in note for note in summary["notes"])
    markdown = (out / "results-proxy.md").read_text()
    assert "not an LLM judge" in markdown and "proxy-MRR" in markdown
    assert re.search(r"\| LLM \| n/a \|", markdown)
    tables = markdown.split("## By source")[1]
    assert " MRR" not in tables and " MPR" not in tables  # only proxy-MRR / proxy-MPR columns
    answers = (out / "answers.jsonl").read_text()
    assert '"method": "llm"' not in answers

    # The run directory refuses answers from a different set-up instead of mixing them in.
    other = CliRunner().invoke(eval_app(), [*args[:1], str(dataset / "mine.jsonl"), *args[2:]])
    assert other.exit_code == 2 and "different set-up" in other.output


# --- what a user meets first (issue 41 #14) ------------------------------------------------------


def test_eval_without_a_dataset_says_what_to_give_not_a_developer_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(eval_app(), ["--no-progress"])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert "shared" not in message  # the developer checkout's ../shared/data was the default
    assert "no dataset at typedrag-questions.jsonl" in message
    assert "--dataset" in message and "typedrag eval compare" in message and "references" in message


def test_one_reference_per_question_is_said_in_the_report(tmp_path, small_index, monkeypatch):
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))
    rows = [
        {"id": f"q{i}", "question": q, "references": [{"text": f"{topic} reference", "grade": 1}]}
        for i, (q, topic) in enumerate(QUESTIONS)
    ]
    dataset = _write_jsonl(tmp_path / "single.jsonl", rows)
    args = [
        "--dataset",
        str(dataset),
        "--index",
        str(small_index),
        "--out",
        str(tmp_path / "run"),
        "--llm",
        "offline",
        "--no-progress",
    ]
    result = CliRunner().invoke(eval_app(), args)
    assert result.exit_code == 0, result.output
    markdown = " ".join((tmp_path / "run" / "results-proxy.md").read_text().split())
    assert "3 of 3 questions have one reference grade" in markdown
    assert "every method gets the same score" in markdown and "typedrag eval compare" in markdown
    # issue 55 E15: and no chart of bars all of one height (zero, here), but a note saying why there is none
    assert not (tmp_path / "run" / "mpr-by-type-proxy.png").exists()
    assert (
        "no chart: every method scored proxy-MPR 0 in every group" in markdown
        and "cannot separate the methods" in markdown
    )
    summary = json.loads((tmp_path / "run" / "summary-proxy.json").read_text())
    assert "chart" not in summary["files"] and "cannot separate" in summary["chart_missing"]


def test_chart_title_stays_inside_the_figure_when_the_chart_is_narrow(tmp_path, monkeypatch):
    """One type and a long judge name: the title used to run off both edges of the 6-inch chart."""
    import matplotlib.figure

    from typedrag.evaluation.report import _Table, draw_chart

    judge = "openai-compatible:a-rather-long-judge-model-name-v2@judge.internal.example.com:8443"
    cells = [
        {"method": m, "source": s, "type": t, "scored": 3, "failures": 0, "mrr": 0.5, "mpr": 60.0}
        for m in ("rag", "typed")
        for s in ("mine", ALL)
        for t in ("REASON", ALL)
    ]
    summary = {
        "configuration": {
            "requested_methods": ["rag", "typed"],
            "methods": ["rag", "typed"],
            "classifier": "classifier:x",
            "judge": {"kind": "llm", "name": judge, "temperature": 0.7},
            "rank_convention": "linkage",
            "questions_selected": 3,
        },
        "cells": cells,
        "notes": [],
        "errors_this_run": [],
    }
    seen = []
    save = matplotlib.figure.Figure.savefig

    def measure(figure, *args, **kwargs):
        figure.canvas.draw()
        seen.append((figure.axes[0].title.get_window_extent(), figure.bbox))
        return save(figure, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", measure)
    assert draw_chart(_Table(summary, proxy=False), tmp_path / "chart.png") is None
    ((title, frame),) = seen
    assert frame.x0 <= title.x0 and title.x1 <= frame.x1 and title.y1 <= frame.y1, (title, frame)


def knowing_or_judging(request: ChatRequest) -> Reply:
    """Generator: cited answers from the sources and, labelled, one sentence of its own. Judge: an answer with a
    part of the model's own ranks 1, a cited one 2, the rest 4 (of 4)."""
    if request.schema_name == "LabelledAnswer":
        first = re.findall(r"\[(\d+)\]", request.last_user)[0]
        return Reply(
            content=json.dumps(
                {
                    "from_sources": f"From the sources [{first}].",
                    "not_covered": "more",
                    "from_own_knowledge": ["Known besides."],
                }
            )
        )
    if "Candidate answer:" not in request.last_user:
        return Reply(content=default_content(request))
    candidate = _candidate(request)
    return Reply(
        content="[[1]]"
        if "Not from your documents: Known besides." in candidate
        else "[[2]]"
        if re.search(r"\[\d+\]", candidate)
        else "[[4]]"
    )


def test_eval_on_wiki_nfqa_with_labelled_knowledge_reports_beside_the_papers_table(tmp_path, small_index, monkeypatch):
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))
    grades = [3, 2, 1, 0]
    rows = [
        {
            "question_id": f"nq{i}",
            "question_text": text,
            "answer_list": [f"{topic} {g}" for g in grades],
            "answer_label": grades,
        }
        for i, (text, topic) in enumerate(QUESTIONS)
    ]
    dataset = tmp_path / "wiki"
    dataset.mkdir()
    _write_jsonl(dataset / "nq.jsonl", rows)  # a Wiki-NFQA source file, by its name
    out = tmp_path / "run"
    with OpenAIStubServer(knowing_or_judging) as server:
        args = [
            "--dataset",
            str(dataset),
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
            "--rounds",
            "1",
            "--no-progress",
            "--knowledge",
            "labelled",
            "--rank-convention",
            "typed-rag",
        ]
        result = CliRunner().invoke(eval_app(), args)
    assert result.exit_code == 0, result.output
    answers = {
        (a["question_id"], a["method"]): a for a in map(json.loads, (out / "answers.jsonl").read_text().splitlines())
    }
    typed = answers[("nq0", "typed")]
    # what the judge ranked: the answer and, labelled, the model's own part; the part also recorded on its own
    assert typed["knowledge"] == "labelled" and typed["unsourced"] == ["Known besides."]
    assert typed["answer"].endswith("\n\nNot from your documents: Known besides.")
    assert answers[("nq0", "llm")]["unsourced"] == []  # the LLM-only baseline is all the model's own already
    summary = json.loads((out / "summary.json").read_text())
    assert summary["configuration"]["knowledge"] == "labelled"
    assert (
        summary["paper"]["table"].endswith("Table 3")
        and {"method": "typed", "source": "nq", "mrr": 0.766}.items() <= summary["paper"]["figures"][0].items()
    )
    markdown = (out / "results.md").read_text()
    assert "- Knowledge: labelled" in markdown
    section = markdown.split("## Beside the paper", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| Method | figures | NQ-NF MRR | NQ-NF MPR | SQuAD-NF MRR |")
    assert "| Typed-RAG | this run | 1.000 | 100.0 | – | – |" in section
    assert "| Typed-RAG | paper (Llama-3.2-3B generator, Mistral-7B judge) | 0.766 | · | · | · |" in section
    assert "| LLM | paper (Llama-3.2-3B generator, Mistral-7B judge) | 0.589 | · |" in section
    assert "| RAG | paper (Llama-3.2-3B generator, Mistral-7B judge) | · | · |" in section
    assert "rank convention typed-rag" in section and "rerun with" not in section
    assert "carried over: Typed-RAG NQ-NF MRR 0.766, from typedrag issue 53" in section


def test_a_dataset_that_is_not_wiki_nfqa_gets_no_comparison_with_the_paper(tmp_path, small_index, monkeypatch):
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))
    dataset, out = write_dataset(tmp_path / "data"), tmp_path / "run"
    with OpenAIStubServer(judge_or_answer) as server:
        args = [
            "--dataset",
            str(dataset),
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
            "--rounds",
            "1",
            "--no-progress",
            "--methods",
            "rag",
        ]
        assert CliRunner().invoke(eval_app(), args).exit_code == 0
    assert "Beside the paper" not in (out / "results.md").read_text()
    assert "paper" not in json.loads((out / "summary.json").read_text())
