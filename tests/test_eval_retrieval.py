"""`typedrag eval retrieval`: recall@k, MRR, nDCG with relevant ids; key terms without; an LLM judge on loopback."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from typedrag.cli import app
from typedrag.evaluation.retrieval import RetrievalQuestion, score
from typedrag.index import build_index
from typedrag.records import Passage, ScoredPassage
from typedrag.testing.openai_stub import OpenAIStubServer, Reply

runner = CliRunner()
DOCS = {
    "automobile.txt": "The automobile is a wheeled motor vehicle used for transportation on roads.",
    "bees.txt": "Honey bees collect nectar from flowers and store it as honey in the hive.",
    "tides.txt": "Tides are the rise and fall of sea levels caused by the gravity of the Moon and the Sun.",
    "bread.txt": "Bread is baked from a dough of flour and water, leavened with yeast or a sourdough starter.",
}


def hit(pid: str, text: str = "") -> ScoredPassage:
    return ScoredPassage(Passage(pid, pid.split("#")[0], pid, text), 1.0)


def test_metrics_count_each_group_once_at_its_first_passage():
    question = RetrievalQuestion(question="q", relevant=[["a#0", "a#1"], "c"], key_terms=[["moon"], ["sun", "star"]])
    scored = score(question, "REASON", [hit("x#0", "The Moon"), hit("a#1", "sun"), hit("a#0"), hit("c#4")], k=3)
    assert scored.recall == 0.5 and scored.first_rank == 2 and scored.reciprocal_rank == 0.5
    assert scored.ndcg == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert scored.key_terms == 1.0  # "moon" and "sun" are both in the top 3
    assert score(question, "REASON", [hit("z#0")], k=3).recall == 0.0


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("evalret")
    (root / "docs").mkdir()
    for name, text in DOCS.items():
        (root / "docs" / name).write_text(text, encoding="utf-8")
    build_index([root / "docs"], root / "index", show_progress=False, embedder="static")
    return root / "index"


def write_questions(path: Path) -> Path:
    rows = [
        {"id": "cars", "question": "Which vehicles drive on roads?", "type": "EVIDENCE-BASED", "relevant": ["automobile.txt"]},
        {"id": "honey", "question": "How do bees make honey?", "relevant": [["bees.txt#0"]], "key_terms": [["nectar"]]},
        {"question": "Why does the sea rise and fall?", "groups": [["gravity"], ["moon"]]},
        {"question": "Is sourdough bread healthier?"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_eval_retrieval_compares_modes_and_writes_a_report(index, tmp_path):
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["eval", "retrieval", "--questions", str(write_questions(tmp_path / "q.jsonl")),
                                 "--index", str(index), "-k", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "tantivy-bm25" in result.output and "tantivy-hybrid/static" in result.output and "recall@2" in result.output
    figures = json.loads(out.with_suffix(".json").read_text())
    summary = {(r["mode"], r["type"]): r for r in figures["summary"]}
    assert set(figures["questions"]) == {"tantivy-bm25", "tantivy-dense/static", "tantivy-hybrid/static"}
    hybrid = {q["id"]: q for q in figures["questions"]["tantivy-hybrid/static"]}
    assert hybrid["honey"]["recall"] == 1.0 and hybrid["honey"]["key_terms"] == 1.0
    assert hybrid["3"]["recall"] is None and hybrid["3"]["key_terms"] == 1.0  # gravity and Moon in the tides passage
    assert hybrid["4"]["question_terms"] is not None  # no gold, no key terms: the question's own words
    assert summary[("tantivy-bm25", "all")]["questions"] == 4 and summary[("tantivy-bm25", "EVIDENCE-BASED")]["questions"] >= 1
    page = out.read_text()
    assert "Which vehicles drive on roads?" in page and "<li class='hit'>" in page


def test_eval_retrieval_with_an_llm_judge(index, tmp_path):
    def responder(request):
        return Reply(content=json.dumps({"grade": 2 if "honey" in request.last_user.lower() else 0}))

    out = tmp_path / "judged.html"
    with OpenAIStubServer(responder) as server:
        result = runner.invoke(app, ["eval", "retrieval", "--questions", str(write_questions(tmp_path / "q.jsonl")),
                                     "--index", str(index), "--retrieval", "bm25", "-k", "1", "--out", str(out),
                                     "--judge", "stub-judge", "--judge-base-url", server.base_url],
                               env={"TYPEDRAG_CACHE_DIR": str(tmp_path / "cache"), "TYPEDRAG_JUDGE_API_KEY": "sk-test"})
        assert any(r.schema_name for r in server.requests)
    assert result.exit_code == 0, result.output
    figures = json.loads(out.with_suffix(".json").read_text())
    assert "stub-judge" in figures["judge"] and "judge" in result.output
    honey = next(r for r in figures["summary"] if r["type"] == "all")
    assert honey["judged_relevant"] == honey["judged_answering"] > 0
    judged = {q["id"]: q["judged"] for q in figures["questions"]["tantivy-bm25"]}
    assert judged["honey"] == [2] and judged["cars"] in ([0], [])


def test_bad_questions_file_is_one_line(index, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "fine"}\n{"id": 3}\n', encoding="utf-8")
    result = runner.invoke(app, ["eval", "retrieval", "--questions", str(bad), "--index", str(index)])
    assert result.exit_code == 2 and "bad.jsonl:2: not a question" in result.output
