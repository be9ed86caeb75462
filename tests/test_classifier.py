"""The shipped NF-CATS type classifier: loading, predictions, numpy == scikit-learn, training."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from typedrag.errors import UserError
from typedrag.classify import FALLBACK_THRESHOLD, TypePrediction, load_default_classifier, needs_fallback
from typedrag.classify.shipped import MODEL_DIR, ShippedClassifier
from typedrag.nfq import NFQType

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
NFCATS = SHARED_DATA / "nfcats"

# Our own wording, typical of each type.
EXAMPLES = {
    NFQType.COMPARISON: [
        "What is the difference between a crocodile and an alligator?",
        "What are the differences between baking soda and baking powder?",
    ],
    NFQType.DEBATE: ["Should nuclear power be banned?", "Is it ethical to keep animals in zoos?"],
    NFQType.EVIDENCE_BASED: ["What is photosynthesis?", "How does a refrigerator keep food cold?"],
    NFQType.EXPERIENCE: ["What is your favourite guitar for beginners?", "What do you do when you can't fall asleep?"],
    NFQType.FACTOID: ["When was Napoleon born?", "who wrote the novel moby dick"],
    NFQType.INSTRUCTION: ["How do I bake bread at home?", "How can I reset my router password?"],
    NFQType.NOT_A_QUESTION: [
        "The museum was opened to the public in 1902.",
        "Most of the town's population works in agriculture.",
    ],
    NFQType.REASON: ["Why did the Roman Empire fall?", "Why do cats purr?"],
}


@pytest.fixture(scope="module")
def classifier():
    return load_default_classifier()


def require_nfcats() -> Path:
    if not NFCATS.is_dir():
        pytest.skip(f"NF-CATS data not found at {NFCATS} (CI has ../shared/data; a fresh clone does not)")
    return NFCATS


def test_shipped_model_loads_without_pickle(classifier):
    assert classifier is load_default_classifier()  # cached per process
    assert classifier.name and set(classifier.classes) == set(NFQType)
    assert not [p for p in MODEL_DIR.iterdir() if p.suffix in (".pkl", ".pickle", ".joblib")]


@pytest.mark.parametrize("label,question", [(label, q) for label, qs in EXAMPLES.items() for q in qs])
def test_typical_questions(classifier, label, question):
    prediction = classifier.classify(question)
    assert prediction.label is label, (question, prediction.probabilities)
    assert prediction.source == f"classifier:{classifier.name}"


def test_probabilities_sum_to_one_and_confidence_is_the_top_one(classifier):
    for prediction in classifier.classify_many([q for qs in EXAMPLES.values() for q in qs]):
        assert set(prediction.probabilities) == set(NFQType)
        assert sum(prediction.probabilities.values()) == pytest.approx(1.0, abs=1e-9)
        assert prediction.confidence == max(prediction.probabilities.values())
        assert prediction.probabilities[prediction.label] == prediction.confidence


def test_batch_and_single_agree(classifier):
    questions = [q for qs in EXAMPLES.values() for q in qs]
    for one, batched in zip([classifier.classify(q) for q in questions], classifier.classify_many(questions)):
        assert one.label is batched.label
        for label in NFQType:
            assert one.probabilities[label] == pytest.approx(batched.probabilities[label], abs=1e-6)
    assert classifier.classify_many([]) == []


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_empty_question_is_rejected(classifier, question):
    with pytest.raises(UserError, match="empty question"):
        classifier.classify(question)
    with pytest.raises(UserError, match="empty question"):
        classifier.classify_many(["Why do cats purr?", question])


def test_needs_fallback_uses_the_documented_threshold():
    def prediction(confidence: float) -> TypePrediction:
        return TypePrediction(NFQType.REASON, confidence, {NFQType.REASON: confidence}, "classifier:test")

    assert needs_fallback(prediction(FALLBACK_THRESHOLD - 0.01))
    assert not needs_fallback(prediction(FALLBACK_THRESHOLD))
    card = (MODEL_DIR / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert f"FALLBACK_THRESHOLD = {FALLBACK_THRESHOLD}" in card


def _sklearn_from_shipped(model_dir: Path, embedder):
    """Rebuild the scikit-learn objects from the shipped arrays, to check the numpy predictor against."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    from typedrag.classify.train import Fitted

    meta = json.loads((model_dir / "meta.json").read_text())
    vocab = json.loads(gzip.decompress((model_dir / "vocab.json.gz").read_bytes()))
    weights = np.load(model_dir / "weights.npz", allow_pickle=False)
    w, c = meta["word"], meta["char"]
    word = TfidfVectorizer(
        ngram_range=tuple(w["ngram_range"]),
        token_pattern=w["token_pattern"],
        lowercase=w["lowercase"],
        sublinear_tf=True,
        vocabulary=vocab["word"],
    ).fit(["x"])
    char = TfidfVectorizer(
        analyzer="char_wb",
        ngram_range=tuple(c["ngram_range"]),
        lowercase=c["lowercase"],
        sublinear_tf=True,
        vocabulary=vocab["char"],
    ).fit(["x"])
    word.idf_, char.idf_ = weights["idf_word"], weights["idf_char"]
    lr = LogisticRegression()
    lr.coef_, lr.intercept_, lr.classes_ = weights["coef"], weights["intercept"], np.array(meta["classes"])
    config = {"word": w, "char": c, "embedding_scale": meta["embedding"]["scale"]}
    technical = domain = None
    if "coef_technical" in weights.files:  # a model trained with technical questions: two regressions and the mix
        technical, domain = LogisticRegression(), LogisticRegression()
        technical.coef_, technical.intercept_, technical.classes_ = (
            weights["coef_technical"],
            weights["intercept_technical"],
            lr.classes_,
        )
        domain.coef_, domain.intercept_ = weights["domain_coef"][None, :], weights["domain_intercept"]
        domain.classes_ = np.array([0, 1])
    return Fitted(word, char, lr, config, embedder, technical, domain)


def test_numpy_predictor_equals_sklearn_on_valid_and_meets_acceptance(classifier):
    pytest.importorskip("sklearn", reason="scikit-learn is needed only to check against")
    from typedrag.classify.train import evaluate, read_split

    questions, labels = read_split(require_nfcats() / "valid.csv")
    ours = classifier.predict_proba(questions)
    theirs = _sklearn_from_shipped(MODEL_DIR, classifier.embedder).predict_proba(questions)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
    metrics = evaluate(ours, [c.value for c in classifier.classes], labels)
    recorded = json.loads((MODEL_DIR / "valid_metrics.json").read_text())
    assert metrics["macro_f1"] == pytest.approx(recorded["macro_f1"], abs=1e-9)
    assert metrics["macro_f1"] >= 0.86 and metrics["accuracy"] >= 0.93


def test_training_on_a_small_slice_learns(tmp_path, classifier):
    pytest.importorskip("sklearn", reason="training needs scikit-learn")
    from typedrag.classify.train import fit, export, read_split

    questions, labels = read_split(require_nfcats() / "train.csv")
    order = list(range(len(questions)))
    random.Random(0).shuffle(order)
    train, held_out = order[:1000], order[1000:1400]
    fitted = fit([questions[i] for i in train], [labels[i] for i in train], classifier.embedder)
    test_questions, test_labels = [questions[i] for i in held_out], [labels[i] for i in held_out]
    export(fitted, tmp_path)
    small = ShippedClassifier(tmp_path, classifier.embedder)
    probabilities = small.predict_proba(test_questions)
    np.testing.assert_allclose(probabilities, fitted.predict_proba(test_questions), rtol=0, atol=1e-9)
    predicted = [small.classes[i].value for i in probabilities.argmax(axis=1)]
    accuracy = np.mean([p == t for p, t in zip(predicted, test_labels)])
    majority = max(test_labels.count(label) for label in set(test_labels)) / len(test_labels)
    assert accuracy > majority + 0.2, (accuracy, majority)


def test_card_reports_the_shipped_metrics():
    card = (MODEL_DIR / "MODEL_CARD.md").read_text(encoding="utf-8")
    recorded = json.loads((MODEL_DIR / "valid_metrics.json").read_text())
    assert f"macro-F1 **{recorded['macro_f1']:.4f}**" in card
    assert re.search(r"\| EXPERIENCE \| \d", card)  # per-class table present


@pytest.mark.parametrize(
    "question",
    [
        "How is a virus different from a bacterium?",
        "How do frogs differ from toads?",
        "Compare Judaism, Christianity and Islam.",
        "Which is better for a beginner, violin or cello?",
        "Which is healthier: running or swimming?",
        "What are the similarities between wolves and dogs?",
        "asyncio or threads: which should I use?",  # issue 24: this went to DEBATE (0.64)
        "VACUUM or VACUUM FULL: which one should I run?",  # DEBATE 0.91
        "Which should I use, pip or conda?",
    ],
)
def test_explicit_comparison_phrasings_route_to_comparison(classifier, question):
    # Regression (issue 12): these went to INSTRUCTION, NOT-A-QUESTION (0.999) or DEBATE.
    assert classifier.classify(question).label == NFQType.COMPARISON


@pytest.mark.parametrize(
    "question",
    [
        "Which is older, the Eiffel Tower or the Statue of Liberty?",  # issue 24: a choice between facts
        "Which is taller, K2 or Everest?",
        "Which came first, the chicken or the egg?",
        "Is it better to lease or buy a car?",  # a weak choice the model is sure is a debate (0.99)
        "Should I learn French or Spanish?",
    ],
)
def test_choices_between_facts_and_sure_debates_are_not_made_comparisons(classifier, question):
    prediction = classifier.classify(question)
    assert prediction.label != NFQType.COMPARISON and "comparison-rule" not in prediction.source


def test_a_how_to_question_about_a_difference_is_an_instruction(classifier):
    prediction = classifier.classify("How to explain the difference between the fraction a / b and the ratio a : b?")
    assert prediction.label != NFQType.COMPARISON and prediction.source.endswith("+how-to-rule")


@pytest.mark.parametrize(
    "question",
    [
        "Should we ban cars from city centres or not?",
        "Why do cats purr?",
        "Steam engines are less efficient than turbines.",
    ],
)
def test_the_comparison_rule_leaves_other_questions_alone(classifier, question):
    assert classifier.classify(question).label != NFQType.COMPARISON


# --- technical questions (issue 44): none of these is in bench/data/question-types.jsonl -----------

TECHNICAL_SET = Path(__file__).resolve().parents[1] / "bench" / "data" / "question-types.jsonl"


@pytest.mark.parametrize(
    "question",
    [
        "What are good practices for backing up a PostgreSQL database?",  # EVIDENCE-BASED 0.52 before
        "good practices for naming git branches?",  # DEBATE 0.75 before
        "What are some best practices for writing Dockerfiles?",  # DEBATE 0.47 before
        "Any tips for keeping a Makefile readable?",  # INSTRUCTION 0.42 before
    ],
)
def test_good_practice_questions_are_experience(classifier, question):
    assert classifier.classify(question).label is NFQType.EXPERIENCE


@pytest.mark.parametrize(
    "question",
    ["And which of the two is more likely to corrupt data?", "And which of the two is more likely to be faster?"],
)
def test_an_elliptical_choice_between_two_is_a_comparison(classifier, question):
    assert classifier.classify(question).label is NFQType.COMPARISON


@pytest.mark.parametrize(
    ("earlier", "follow_up", "expected"),
    [
        (
            "What is the difference between a crocodile and an alligator?",
            "And which of the two is more likely to attack people?",
            NFQType.COMPARISON,
        ),
        (
            "What's the difference between VACUUM and VACUUM FULL?",
            "And which of the two is more likely to lock the table?",
            NFQType.COMPARISON,
        ),
        ("How do I bake bread at home?", "Any good practices for that?", NFQType.EXPERIENCE),
    ],
)
def test_a_follow_up_is_typed_after_the_offline_rewrite(retriever, earlier, follow_up, expected):
    """What the pipeline classifies offline is the follow-up read alone with the conversation's terms ("... (crocodile,
    alligator)"): it was DEBATE below the routing threshold, and NOT-A-QUESTION for some."""
    import asyncio

    from typedrag import OfflineEngine, Pipeline

    history = [{"role": "user", "content": earlier}, {"role": "assistant", "content": "They differ in several ways."}]
    result = asyncio.run(Pipeline(OfflineEngine(), retriever).answer(follow_up, "typed", history=history))
    assert result.standalone_question != follow_up  # read alone with the terms carried in
    assert result.type.type == expected, result.type


def test_the_technical_set_covers_every_type_in_every_manual():
    rows = [json.loads(line) for line in TECHNICAL_SET.read_text(encoding="utf-8").splitlines()]
    assert (
        len(rows) >= 300
        and len({r["question"] for r in rows}) == len(rows)
        and len({r["id"] for r in rows}) == len(rows)
    )
    corpora = {r["corpus"] for r in rows}
    assert len(corpora) >= 4
    for corpus in corpora:
        mine = [r for r in rows if r["corpus"] == corpus]
        assert {r["type"] for r in mine} == {t.value for t in NFQType}, corpus
        assert sum("follows" in r for r in mine) >= 5, corpus
    good_practices = [r for r in rows if "good practices" in r["question"].lower() and "follows" not in r]
    assert good_practices and all(r["type"] == "EXPERIENCE" for r in good_practices)


def test_card_reports_manuals_left_out_and_sets_labelled_by_others():
    checks = json.loads((MODEL_DIR / "technical_metrics.json").read_text())
    held = checks["held_out"]
    assert len(held) >= 4
    pooled = sum(r["agreement"] * r["questions"] for r in held.values()) / sum(r["questions"] for r in held.values())
    assert pooled >= 0.92, pooled
    for corpus, result in held.items():  # PostgreSQL is at 0.912 (MODEL_CARD.md): a floor, not the target
        assert result["agreement"] >= 0.9, (corpus, result["agreement"], result["disagreements"])
        assert result["valid_macro_f1_with_rules"] >= 0.87
        follow_ups = [d for d in result["disagreements"] if d[2].startswith("And ") or d[2].endswith(")")]
        assert not [d for d in follow_ups if d[1] == "NOT-A-QUESTION"], follow_ups
    card = (MODEL_DIR / "MODEL_CARD.md").read_text(encoding="utf-8")
    for corpus, result in held.items():
        assert re.search(
            rf"\| {re.escape(corpus)} \| {result['questions']} \| \*\*{result['agreement']:.3f}\*\*", card
        ), corpus
    assert checks["external"] and all(name.startswith("keyterms") for name in checks["external"])


@pytest.mark.parametrize(
    ("question", "comparison"),
    [
        ("tabs or spaces for a Python project?", True),  # named options for a purpose
        ("Xfce versus LXQt", True),  # a fragment
        ("How do Btrfs and ZFS compare?", True),
        ("gzip or xz: what do I gain with the slower one?", True),
        ("Inflation or Deflation?", False),  # NF-CATS labels it a debate
        ("Free Will or Determinism: Do We Have Free Will?", False),
        ("Should I stay or go for the summer?", False),  # opens with a verb: the model decides
        ("Compared with last year, how did sales do?", False),
        ("The 1998 match versus Brazil was won 3-0.", False),
        ("Is it worth converting our columns then? (vs jsonb, payloads)", False),  # "vs" came with the carried terms
    ],
)
def test_comparison_phrasings_of_technical_questions(question, comparison):
    from typedrag.phrasing.kinds import comparison_phrasing

    assert comparison_phrasing(question) is comparison


@pytest.mark.parametrize(
    "question",
    ["Is ext4 more reliable than XFS?", "Are signed tags safer than lightweight tags?"],  # DEBATE 0.51, 0.94 before
)
def test_a_comparative_between_two_named_things_in_a_manual_is_a_comparison(classifier, question):
    """By the guidelines (bench/data/TYPES.md) "Is X slower than Y?" compares two named things, in every manual."""
    prediction = classifier.classify(question)
    assert prediction.label is NFQType.COMPARISON, prediction


@pytest.mark.parametrize(
    "question",
    ["Is Android better than iOS?", "Are cats better pets than dogs?", "Is city life better than country life?"],
)
def test_a_comparative_forum_question_keeps_nfcats_type(classifier, question):
    """NF-CATS's annotators labelled every "Is X better than Y?" of theirs DEBATE (none COMPARISON): the comparative
    rule applies only where the model reads the question as technical."""
    prediction = classifier.classify(question)
    assert prediction.label is NFQType.DEBATE and "rule" not in prediction.source, prediction


@pytest.mark.parametrize(
    ("question", "comparative"),
    [
        ("Is a CTE slower than the same query written as a subquery?", True),
        ("Are BRIN indexes smaller than B-tree indexes on a time-series table?", True),
        ("Does a sparse checkout use less disk than a full clone?", True),
        ("Would multiprocessing be better than that? (CPU-bound code faster, threads)", True),
        ("can animals other than dogs be service animals", False),
        ("Should I use rsync rather than scp?", False),
        ("How much faster is COPY than INSERT?", False),  # not a yes/no question
        ("Can a table have more than 1600 columns?", False),  # a number, not two things
        ("Steam engines are less efficient than turbines.", False),
    ],
)
def test_comparative_questions_are_read_from_their_grammar(question, comparative):
    from typedrag.phrasing.kinds import comparative_question

    assert comparative_question(question) is comparative
