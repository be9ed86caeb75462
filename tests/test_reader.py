"""The shipped reader model (issue 32): it loads only as shipped, reads clear cases as a person would, its
card states the leave-one-corpus-out figures it was accepted on, and the training command's measures
are right."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from typedrag.reader import MODEL_DIR, Reader, ReaderUnavailable, Role, default_reader
from typedrag.reader.train import auc, best_bar, card, ranking_measures

LABELS = Path(__file__).resolve().parents[2] / "shared" / "data" / "reader-labels" / "pairs.jsonl"


def test_a_damaged_or_missing_model_is_refused_in_one_line(tmp_path):
    damaged = tmp_path / "model"
    shutil.copytree(MODEL_DIR, damaged)
    with (damaged / "reader.onnx").open("ab") as model:
        model.write(b"\0")
    with pytest.raises(ReaderUnavailable, match="sha256"):
        Reader(damaged)
    (damaged / "meta.json").unlink()
    with pytest.raises(ReaderUnavailable, match="missing"):
        Reader(damaged)


def test_the_reader_tells_an_answer_from_a_namesake_code_and_a_passing_mention():
    """Cases written for this test, none from the training data: the answering sentence reads best."""
    reader = default_reader()
    question = "Why did the Western Roman Empire collapse?"
    sentences = [
        ("Fall of the Western Roman Empire", "Invasions by Germanic peoples, economic decline and political instability weakened the Western Roman Empire until it collapsed in 476."),
        ("Burgundians", "Some scholars believe that the Burgundians are named after the island of Bornholm."),
        ("Roman numerals", "for i in range(10): print(to_roman(i))"),
        ("Rome", "Rome is the capital city of Italy and has a population of about 2.8 million."),
    ]
    readings = reader.read(question, sentences)
    answers = [r.answers for r in readings]
    assert answers[0] == max(answers) and answers[0] >= reader.bars.answers
    assert all(a < reader.bars.answers for a in answers[1:])
    assert readings[0].role is Role.CAUSE


def test_the_reader_gives_a_procedure_the_step_role_and_an_argument_its_side():
    reader = default_reader()
    step = reader.read("How do I undo my last git commit?", [("git-reset", "Run git reset --soft HEAD~1 to undo the last commit and keep its changes staged.")])[0]
    assert step.role is Role.STEP and step.answers >= reader.bars.answers
    against = reader.read(
        "Should cities ban cars from their centres?",
        [("Car-free zone", "Shop owners argue that banning cars from the centre drives customers away and hurts local businesses.")],
    )[0]
    assert against.role is Role.AGAINST


def test_repeated_pairs_are_read_once():
    reader = default_reader()
    pair = [("T", "A sentence nobody has read before, about tides and the moon.")]
    first = reader.read("What causes tides?", pair)
    assert ("What causes tides?", "T: A sentence nobody has read before, about tides and the moon.") in reader._cache
    assert reader.read("What causes tides?", pair) == first


def test_the_model_card_states_the_figures_the_model_was_accepted_on():
    """Issue 32: leave one corpus out, the reader closes at least half of the gap between MiniLM cosine and
    the oracle on precision at 4 and on noise at 4, on every corpus; the card shows the same figures."""
    meta = json.loads((MODEL_DIR / "meta.json").read_text())
    folds = meta["leave_one_corpus_out"]
    assert sorted(folds) == ["debian-handbook", "git-docs", "python-docs", "wiki-nfqa/enwiki", "wikipedia-demo"]
    for corpus, fold in folds.items():
        assert fold["gap_closed"]["p_at_4"] >= 0.5, corpus
        assert fold["gap_closed"]["noise_at_4"] >= 0.5, corpus
    shipped = (MODEL_DIR / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert shipped == card(meta)
    for corpus, fold in folds.items():
        row = next(line for line in shipped.splitlines() if line.startswith(f"| {corpus} |"))
        assert f"| {fold['reader']['p_at_4']:.3f} |" in row and f"| {fold['reader']['noise_at_4']:.3f} |" in row


def test_ranking_measures_and_auc_on_a_hand_made_case():
    rows = [{"qid": "a", "label": l} for l in (2, 0, 1, 0, 2)] + [{"qid": "b", "label": 0}] * 2
    scores = [0.9, 0.8, 0.7, 0.1, 0.05, 0.5, 0.4]
    measured = ranking_measures(rows, scores)
    assert measured["p_at_4"] == pytest.approx(1 / 4)  # question a: one of its best four answers
    assert measured["noise_at_4"] == pytest.approx((2 / 4 + 2 / 2) / 2)
    from sklearn.metrics import roc_auc_score

    positive = [r["label"] == 2 for r in rows]
    assert auc(positive, scores) == pytest.approx(roc_auc_score(positive, scores))
    assert auc([True, False, True], [0.5, 0.5, 0.9]) == pytest.approx(roc_auc_score([1, 0, 1], [0.5, 0.5, 0.9]))


def test_the_bar_is_set_for_precision():
    scores = [0.95, 0.9, 0.85, 0.6, 0.55, 0.3, 0.2, 0.1]
    positive = [True, True, True, False, True, False, False, False]
    assert best_bar(scores, positive) == pytest.approx(0.61, abs=0.011)  # above the first wrong one


@pytest.mark.skipif(not LABELS.exists(), reason="needs ../shared/data/reader-labels (the shared data folder)")
def test_the_labels_file_is_the_one_the_card_describes():
    rows = [json.loads(line) for line in LABELS.open(encoding="utf-8")]
    meta = json.loads((MODEL_DIR / "meta.json").read_text())
    for corpus, fold in meta["leave_one_corpus_out"].items():
        assert fold["pairs"] == sum(r["corpus"] == corpus for r in rows), corpus
    assert re.search(r"\d", meta["name"])
