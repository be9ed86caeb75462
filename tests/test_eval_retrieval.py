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
        {
            "id": "cars",
            "question": "Which vehicles drive on roads?",
            "type": "EVIDENCE-BASED",
            "relevant": ["automobile.txt"],
        },
        {"id": "honey", "question": "How do bees make honey?", "relevant": [["bees.txt#0"]], "key_terms": [["nectar"]]},
        {"question": "Why does the sea rise and fall?", "groups": [["gravity"], ["moon"]]},
        {"question": "Is sourdough bread healthier?"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_eval_retrieval_compares_modes_and_writes_a_report(index, tmp_path):
    out = tmp_path / "report.html"
    result = runner.invoke(
        app,
        [
            "eval",
            "retrieval",
            "--questions",
            str(write_questions(tmp_path / "q.jsonl")),
            "--index",
            str(index),
            "-k",
            "2",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "tantivy-bm25" in result.output and "tantivy-hybrid/static" in result.output and "recall@2" in result.output
    figures = json.loads(out.with_suffix(".json").read_text())
    summary = {(r["mode"], r["type"]): r for r in figures["summary"]}
    assert set(figures["questions"]) == {"tantivy-bm25", "tantivy-dense/static", "tantivy-hybrid/static"}
    hybrid = {q["id"]: q for q in figures["questions"]["tantivy-hybrid/static"]}
    assert hybrid["honey"]["recall"] == 1.0 and hybrid["honey"]["key_terms"] == 1.0
    assert hybrid["3"]["recall"] is None and hybrid["3"]["key_terms"] == 1.0  # gravity and Moon in the tides passage
    assert hybrid["4"]["question_terms"] is not None  # no gold, no key terms: the question's own words
    assert (
        summary[("tantivy-bm25", "all")]["questions"] == 4
        and summary[("tantivy-bm25", "EVIDENCE-BASED")]["questions"] >= 1
    )
    page = out.read_text()
    assert "Which vehicles drive on roads?" in page and "<li class='hit'>" in page


def test_eval_retrieval_with_an_llm_judge(index, tmp_path):
    def responder(request):
        return Reply(content=json.dumps({"grade": 2 if "honey" in request.last_user.lower() else 0}))

    out = tmp_path / "judged.html"
    with OpenAIStubServer(responder) as server:
        result = runner.invoke(
            app,
            [
                "eval",
                "retrieval",
                "--questions",
                str(write_questions(tmp_path / "q.jsonl")),
                "--index",
                str(index),
                "--retrieval",
                "bm25",
                "-k",
                "1",
                "--out",
                str(out),
                "--judge",
                "stub-judge",
                "--judge-base-url",
                server.base_url,
            ],
            env={"TYPEDRAG_CACHE_DIR": str(tmp_path / "cache"), "TYPEDRAG_JUDGE_API_KEY": "sk-test"},
        )
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


# --- issue 55 E15: a report that fits the window, says where the modes disagree and links the documents ---------

LONG_NAME = "release_notes_" + "_".join(f"section{n}" for n in range(14)) + ".txt"  # no place to break a line


def test_the_retrieval_report_fits_1280_pixels_filters_disagreements_and_links_documents(tmp_path):
    """Issue 55 E15: the report was 1,626 px wide (the default mode's column cut off at 1,280 px), had no way to see
    only the questions the modes disagree on, and no link to the documents. Checked in headless Chromium, as a
    user reads it."""
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        pytest.skip(f"{chromium} not found: apt-get install -y chromium (CI installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")
    docs = tmp_path / "docs"
    (docs / "notes").mkdir(parents=True)
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    (docs / "notes" / LONG_NAME).write_text(
        "Bees dance to tell the hive where the flowers with nectar are. " * 3, encoding="utf-8"
    )
    build_index([docs], tmp_path / "index", show_progress=False, embedder="static")
    out = tmp_path / "report.html"
    result = runner.invoke(
        app,
        [
            "eval",
            "retrieval",
            "--questions",
            str(write_questions(tmp_path / "q.jsonl")),
            "--index",
            str(tmp_path / "index"),
            "-k",
            "3",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(out.as_uri())
            scroll, client = page.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
            )
            assert scroll <= client, f"the report is {scroll} px wide in a {client} px window"
            questions = page.locator("table.questions tr.agree, table.questions tr.disagree")
            shown = questions.count()
            disagreeing = page.locator("table.questions tr.disagree").count()
            page.check("#disagree")
            visible = sum(questions.nth(n).is_visible() for n in range(shown))
            assert visible == disagreeing < shown, (visible, disagreeing, shown)
            links = page.eval_on_selector_all("table.questions a", "anchors => anchors.map(a => a.href)")
        finally:
            browser.close()
    assert links and all(link.startswith("file://") for link in links)
    assert (docs / "bees.txt").resolve().as_uri() in links and (docs / "notes" / LONG_NAME).resolve().as_uri() in links
