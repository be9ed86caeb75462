"""Whether the reader's scores over all the sentences an answer reads tell an answerable question from one the
documents do not answer better than the best score alone (the abstention bar), on the reader labels.

    python -m typedrag.reader.train --labels PAIRS... --loco-only --out-of-fold oof.jsonl   # each corpus held out
    python bench/bench_question_abstainer.py --oof oof.jsonl

Per question: twelve features of its sentences' scores, a logistic regression trained leave-one-corpus-out; the
target is "some sentence is labelled as answering". Prints AUC and the lowest sum of the two error rates
(answered without support, refused with support) for the best score, the best cosine and the model
(docs/lab/2026-12-06-menus-and-abstention.md).
"""

from __future__ import annotations

import argparse
import collections
import json

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score


def features(sentences: list[dict]) -> list[float]:
    answers = sorted((s["answers"] for s in sentences), reverse=True)
    on_topic = sorted((s["on_topic"] for s in sentences), reverse=True) + [0.0]
    cosine = sorted((s["cosine"] for s in sentences), reverse=True) + [0.0]
    padded = answers + [0.0, 0.0]
    best = max(sentences, key=lambda s: s["answers"])
    return [
        padded[0],
        padded[1],
        padded[2],
        float(np.mean(answers)),
        on_topic[0],
        on_topic[1],
        cosine[0],
        cosine[1],
        best["cosine"],
        best["on_topic"],
        float(sum(a > 0.2 for a in answers)),
        float(np.log(len(sentences))),
    ]


def lowest_error_sum(y: np.ndarray, score: np.ndarray) -> tuple[float, float, float]:
    best = (9.0, 0.0, 0.0)
    for bar in np.unique(np.round(score, 3)):
        answered = score >= bar
        without = (answered & ~y).sum() / max(1, (~y).sum())
        refused = (~answered & y).sum() / max(1, y.sum())
        if without + refused < best[0]:
            best = (without + refused, without, refused)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--oof", required=True, help="out-of-fold scores: one JSON line per labelled sentence")
    args = parser.parse_args()
    by_question: dict[str, list[dict]] = collections.defaultdict(list)
    with open(args.oof, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            by_question[row["qid"]].append(row)
    questions = sorted(by_question)
    corpus = np.array([by_question[q][0]["corpus"] for q in questions])
    y = np.array([any(s["label"] == 2 for s in by_question[q]) for q in questions])
    x = np.array([features(by_question[q]) for q in questions])
    model_score = np.zeros(len(questions))
    for held_out in sorted(set(corpus)):
        train, test = corpus != held_out, corpus == held_out
        model = LogisticRegression(max_iter=2000).fit(x[train], y[train])
        model_score[test] = model.predict_proba(x[test])[:, 1]
    print(f"{len(questions)} questions, {int(y.sum())} with an answering sentence, {len(set(corpus))} corpora")
    for name, score in (("best answers score", x[:, 0]), ("best cosine", x[:, 6]), ("logistic, LOCO", model_score)):
        total, without, refused = lowest_error_sum(y, score)
        print(
            f"{name:20} AUC {roc_auc_score(y, score):.3f}; lowest error sum {total:.3f} "
            f"(answered without support {without:.3f}, refused with support {refused:.3f})"
        )


if __name__ == "__main__":
    main()
