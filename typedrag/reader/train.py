"""Train the reader from labelled (question, sentence) pairs, report it leave-one-corpus-out, ship it.

    pip install -e '.[train]'
    python -m typedrag.reader.train --labels ../shared/data/reader-labels/pairs.jsonl \\
        --extra /path/to/more/pairs.jsonl --out typedrag/reader/model

Each labels file holds one JSON object per line with `qid, corpus, question, title, sentence, label (0-2),
role` (the reader-labels format), and, where the labels know them, `section` (the heading path), `block` (the kind
of the sentence's line), `item_order` and `source_rank` (the passage's number in the answer). A pair whose line the
offline engine never quotes (code, a table, a heading, a caption, a notice) is left out: the reader never reads
one; a list item is read without its marker, as the engine reads it. `--vectors FILE` keeps the MiniLM vectors of
every text read (an .npz of `texts` and `vectors`), so a second run embeds nothing. `--labels` corpora are reported leave-one-corpus-out: for each, a
reader trained on every other corpus (and the `--extra` files, which are never reported) is tested on
it, beside MiniLM cosine alone and the oracle; the out-of-fold scores set the bars. Then one reader is
trained on everything and written as arrays (reader.npz), meta.json and the model card. Training needs
scikit-learn (the `train` extra); the product reads the arrays with numpy.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import json
from pathlib import Path

import numpy as np

from typedrag.reader import (
    FEATURES,
    META_FILE,
    MODEL_DIR,
    MODEL_FILE,
    QUOTED_KINDS,
    Piece,
    Role,
    answering,
    features,
    role_input,
    without_marker,
)
from typedrag.records import BlockKind

ROLES = [role.value for role in Role]
# The bars weigh precision above recall (F-beta, beta < 1), but not so far that most questions quote nothing.
BAR_BETA = 0.75
TREES = {"max_depth": 3, "max_iter": 150, "learning_rate": 0.05, "random_state": 0}


def load_pairs(paths: list[Path]) -> list[dict]:
    """The labelled pairs of `paths` the reader reads (`as_read`), the others left out. A path ending in .gz is
    read through gzip: the repository keeps its labels compressed (bench/data/reader-labels)."""
    rows = []
    for path in paths:
        opened = gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")
        with opened as lines:
            rows += [read for line in lines if line.strip() and (read := as_read(json.loads(line))) is not None]
    return rows


def as_read(row: dict) -> dict | None:
    """A labelled pair as the offline engine reads its sentence: a list item without its marker; None for a
    sentence of a line it never quotes (code, a table, a heading, ...), which the reader never reads."""
    block = row.get("block")
    if block is not None and BlockKind(block) not in QUOTED_KINDS:
        return None
    if block == BlockKind.ITEM or (
        block is None and row["sentence"].startswith("- ")
    ):  # the first labels wrote an item so
        return {**row, "sentence": " ".join(without_marker(row["sentence"], row.get("item_order")).split())}
    return row


def piece(row: dict) -> Piece:
    """What the reader knows of a labelled pair's sentence (what the labels do not say, it does not know)."""
    block = row.get("block")
    return Piece(
        row["sentence"],
        row.get("title") or "",
        row.get("section") or "",
        BlockKind(block) if block else None,
        row.get("item_order"),
        row.get("source_rank"),
    )


# --- measures ------------------------------------------------------------------------------------------


def ranking_measures(rows: list[dict], scores: list[float], at: int = 4) -> dict[str, float]:
    """Precision at `at` (share of the best-scored sentences that answer, over questions with an answer),
    noise share at `at` (share labelled noise) and the AUC of the scores for label 2."""
    by_question = collections.defaultdict(list)
    for row, score in zip(rows, scores):
        by_question[row["qid"]].append((score, row["label"]))
    precision, noise = [], []
    for items in by_question.values():
        top = sorted(items, key=lambda item: -item[0])[:at]
        noise.append(sum(label == 0 for _, label in top) / len(top))
        if any(label == 2 for _, label in items):
            precision.append(sum(label == 2 for _, label in top) / len(top))
    return {
        "p_at_4": float(np.mean(precision)),
        "noise_at_4": float(np.mean(noise)),
        "auc": auc([r["label"] == 2 for r in rows], scores),
    }


def auc(positive: list[bool], scores: list[float]) -> float:
    """Area under the ROC curve: the chance a positive outscores a negative (ties count half)."""
    values, pos = np.asarray(scores, dtype=float), np.asarray(positive, dtype=bool)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):  # average ranks over ties
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)) if n_pos and n_neg else float("nan")


def best_bar(scores: list[float], positive: list[bool], beta: float = 0.5) -> float:
    """The threshold with the best F-beta for `positive` (beta < 1 weighs precision: a wrong quote costs
    the reader more than a missing one)."""
    best, best_f = 0.5, -1.0
    values, pos = np.asarray(scores), np.asarray(positive)
    for bar in np.arange(0.05, 0.95, 0.01):
        chosen = values >= bar
        if not chosen.any():
            continue
        precision = (pos & chosen).sum() / chosen.sum()
        recall = (pos & chosen).sum() / max(pos.sum(), 1)
        if precision + recall == 0:
            continue
        f = (1 + beta**2) * precision * recall / (beta**2 * precision + recall)
        if f > best_f:
            best, best_f = float(round(bar, 2)), f
    return best


# --- the model -----------------------------------------------------------------------------------------


class Pairs:
    """The labelled pairs with what the reader reads of them: feature rows (each question's candidates read
    as one set, as the engine reads a step's sentences) and the embeddings the role is read from."""

    def __init__(self, rows: list[dict], vectors: Path | None = None) -> None:
        self.rows = rows
        pieces = [piece(row) for row in rows]
        embed = _embedding(
            [r["question"] for r in rows]
            + [p.text for p in pieces]
            + [p.title for p in pieces]
            + [p.heading for p in pieces],
            vectors,
        )
        q, s = embed([r["question"] for r in rows]), embed([p.text for p in pieces])
        t, h = embed([p.title for p in pieces]), embed([p.heading for p in pieces])
        h[[not p.heading for p in pieces]] = 0.0
        self.cosine = (q * s).sum(1)
        self.x = np.zeros((len(rows), len(FEATURES)), dtype=np.float32)
        by_question = collections.defaultdict(list)
        for i, row in enumerate(rows):
            by_question[row["qid"]].append(i)
        for idx in by_question.values():
            self.x[idx] = features(
                rows[idx[0]]["question"], [pieces[i] for i in idx], q[idx[0]], s[idx], t[idx], h[idx]
            )
        self.role_input = np.vstack([role_input(q[i], s[i : i + 1], row.get("type")) for i, row in enumerate(rows)])

    def subset(self, idx: list[int]) -> tuple[list[dict], np.ndarray, np.ndarray]:
        return [self.rows[i] for i in idx], self.x[idx], self.role_input[idx]


def _embedding(texts: list[str], cache: Path | None):
    """A function from texts to their MiniLM vectors: each text embedded once, kept in `cache` (read first)."""
    known: dict[str, np.ndarray] = {}
    if cache is not None and cache.exists():
        with np.load(cache, allow_pickle=False) as stored:
            known = dict(zip(stored["texts"].tolist(), stored["vectors"]))
    missing = [text for text in dict.fromkeys(texts) if text not in known]
    if missing:
        from typedrag.embed import default_embedder

        known.update(zip(missing, default_embedder().embed(missing)))
        if cache is not None:
            order = list(known)
            np.savez(cache, texts=np.array(order), vectors=np.stack([known[t] for t in order]).astype(np.float32))
    return lambda wanted: np.stack([known[text] for text in wanted]).astype(np.float32)


def fit(rows: list[dict], x: np.ndarray, role_input: np.ndarray) -> dict:
    """The two tree ensembles (label >= 1, label 2) and the role regression, fitted on these pairs."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression

    labels = np.array([r["label"] for r in rows])
    roles = np.array([r["role"] for r in rows])
    # A feature none of the pairs knows (the shared labels carry no line kinds or ranks) is read as 0: scikit-learn
    # cannot bin a column of missing values only, and no tree splits on a constant.
    x = np.where(np.isnan(x).all(axis=0), 0.0, x)
    on_topic = HistGradientBoostingClassifier(**TREES).fit(x, labels >= 1)
    answers = HistGradientBoostingClassifier(**TREES).fit(x, labels == 2)
    # The role of a sentence worth quoting: read on the on-topic pairs (noise has no role to learn).
    useful = labels >= 1
    regression = LogisticRegression(C=0.5, max_iter=3000).fit(role_input[useful], roles[useful])
    return {"on_topic": on_topic, "answers": answers, "roles": regression}


def predict(model: dict, x: np.ndarray, role_input: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    on_topic = model["on_topic"].predict_proba(x)[:, 1]
    answers = answering(model["answers"].predict_proba(x)[:, 1], on_topic)
    return answers, on_topic, list(model["roles"].predict(role_input))


def tree_arrays(classifier, prefix: str) -> dict[str, np.ndarray]:
    """A fitted HistGradientBoostingClassifier (binary) as padded arrays, read by `typedrag.reader.Trees`."""
    trees = [predictors[0].nodes for predictors in classifier._predictors]
    width = max(len(nodes) for nodes in trees)

    def padded(field: str, dtype) -> np.ndarray:
        out = np.zeros((len(trees), width), dtype=dtype)
        for i, nodes in enumerate(trees):
            out[i, : len(nodes)] = nodes[field]
        return out

    leaf = padded("is_leaf", bool)
    for i, nodes in enumerate(trees):
        leaf[i, len(nodes) :] = True
    return {
        f"{prefix}.baseline": np.asarray(classifier._baseline_prediction).reshape(-1)[:1].astype(np.float64),
        f"{prefix}.feature": padded("feature_idx", np.int64),
        # A split on whether a value is missing has the threshold +inf (every value goes left, NaN by
        # `missing_left`); the largest float says the same and keeps the file's numbers finite (the loader checks).
        f"{prefix}.threshold": np.minimum(padded("num_threshold", np.float64), np.finfo(np.float64).max),
        f"{prefix}.left": padded("left", np.int64),
        f"{prefix}.right": padded("right", np.int64),
        f"{prefix}.value": padded("value", np.float64),
        f"{prefix}.leaf": leaf,
        f"{prefix}.missing_left": padded("missing_go_to_left", bool),
    }


def export(model: dict, out: Path, check: np.ndarray) -> str:
    """The model as arrays in `out`, checked against the fitted one on `check` rows; its sha256."""
    from typedrag.reader import Trees

    roles = model["roles"]
    order = [list(roles.classes_).index(role) if role in roles.classes_ else None for role in ROLES]
    weights = np.zeros((roles.coef_.shape[1], len(ROLES)), dtype=np.float32)
    bias = np.full(len(ROLES), -1e9, dtype=np.float32)  # a role never seen in training is never read
    for j, i in enumerate(order):
        if i is not None:
            weights[:, j], bias[j] = roles.coef_[i], roles.intercept_[i]
    arrays = {
        **tree_arrays(model["answers"], "answers"),
        **tree_arrays(model["on_topic"], "on_topic"),
        "roles.weights": weights,
        "roles.bias": bias,
    }
    for prefix in ("answers", "on_topic"):
        drift = np.abs(Trees(arrays, prefix).chance(check) - model[prefix].predict_proba(check)[:, 1]).max()
        if drift > 1e-6:
            raise SystemExit(f"the exported {prefix} trees differ from the fitted ones by {drift:.2e}; not written")
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / MODEL_FILE, **arrays)
    return hashlib.sha256((out / MODEL_FILE).read_bytes()).hexdigest()


# --- leave one corpus out ------------------------------------------------------------------------------


def leave_one_corpus_out(pairs: Pairs, reported: set[str], log=print) -> tuple[dict, list[tuple[dict, float, float]]]:
    """Per reported corpus: the reader trained without it, cosine alone and the oracle; and the out-of-fold
    (row, answers, on_topic) the bars are set on."""
    table, out_of_fold = {}, []
    rows = pairs.rows
    for corpus in sorted(reported):
        test = [i for i, r in enumerate(rows) if r["corpus"] == corpus]
        model = fit(*pairs.subset([i for i, r in enumerate(rows) if r["corpus"] != corpus]))
        held, x, role_input = pairs.subset(test)
        answers, on_topic, roles = predict(model, x, role_input)
        out_of_fold += list(zip(held, answers, on_topic))
        fold = {
            "reader": ranking_measures(held, answers.tolist()),
            "cosine": ranking_measures(held, pairs.cosine[test].tolist()),
            "oracle": ranking_measures(held, [r["label"] + 1e-6 * pairs.cosine[i] for i, r in zip(test, held)]),
            "role_accuracy": float(np.mean([p == r["role"] for p, r in zip(roles, held) if r["label"] == 2])),
            "questions": len({r["qid"] for r in held}),
            "pairs": len(held),
        }
        gap = {k: fold["oracle"][k] - fold["cosine"][k] for k in ("p_at_4", "noise_at_4")}
        fold["gap_closed"] = {
            k: (fold["reader"][k] - fold["cosine"][k]) / gap[k] if gap[k] else float("nan") for k in gap
        }
        table[corpus] = fold
        log(f"{corpus}: reader {json.dumps(fold['reader'])}, gap closed {json.dumps(fold['gap_closed'])}")
    return table, out_of_fold


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--labels", type=Path, nargs="+", required=True, help="labelled pairs, reported leave-one-corpus-out"
    )
    parser.add_argument(
        "--extra", type=Path, nargs="*", default=[], help="more labelled pairs: trained on, never reported"
    )
    parser.add_argument("--out", type=Path, default=MODEL_DIR)
    parser.add_argument("--loco-only", action="store_true", help="only print the leave-one-corpus-out report")
    parser.add_argument("--vectors", type=Path, help="an .npz of the texts' MiniLM vectors, read first and kept")
    parser.add_argument(
        "--out-of-fold",
        type=Path,
        help="write each reported pair's out-of-fold chances here (.jsonl: pid or qid, corpus, label, answers, on_topic, cosine), to calibrate on",
    )
    args = parser.parse_args(argv)
    reported_rows, extra_rows = load_pairs(args.labels), load_pairs(args.extra)
    pairs = Pairs(reported_rows + extra_rows, args.vectors)
    table, out_of_fold = leave_one_corpus_out(pairs, {r["corpus"] for r in reported_rows})
    if args.out_of_fold is not None:
        write_out_of_fold(args.out_of_fold, out_of_fold, pairs)
    bars = {
        "answers": best_bar([a for _, a, _ in out_of_fold], [r["label"] == 2 for r, _, _ in out_of_fold], BAR_BETA),
        "on_topic": best_bar([o for _, _, o in out_of_fold], [r["label"] >= 1 for r, _, _ in out_of_fold], BAR_BETA),
    }
    if args.loco_only:
        print(json.dumps({"leave_one_corpus_out": table, "bars": bars}, indent=2))
        return
    model = fit(pairs.rows, pairs.x, pairs.role_input)
    meta = {
        "name": "typedrag-reader (MiniLM features, gradient-boosted trees, role regression)",
        "sha256": export(model, args.out, pairs.x[:512]),
        "roles": ROLES,
        "features": list(FEATURES),
        "bars": bars,
        "leave_one_corpus_out": table,
        "training": {
            "pairs": len(pairs.rows),
            "corpora": sorted({r["corpus"] for r in pairs.rows}),
            "reported": sorted({r["corpus"] for r in reported_rows}),
            "trees": TREES,
        },
    }
    (args.out / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    (args.out / "MODEL_CARD.md").write_text(card(meta), encoding="utf-8")
    print(f"wrote {args.out / MODEL_FILE}, {args.out / META_FILE} and the model card; bars {bars}")


def write_out_of_fold(path: Path, out_of_fold: list[tuple[dict, float, float]], pairs: Pairs) -> None:
    """Each reported pair's chances from the reader trained without its corpus, one JSON object a line: what the
    abstention bar is calibrated on (a question's best chance against whether any of its pairs answers)."""
    cosine = {id(row): float(c) for row, c in zip(pairs.rows, pairs.cosine)}
    with path.open("w", encoding="utf-8") as out:
        for row, answers, on_topic in out_of_fold:
            kept = {k: row.get(k) for k in ("pid", "qid", "corpus", "label", "answerable")}
            out.write(
                json.dumps(
                    {
                        **kept,
                        "answers": round(float(answers), 6),
                        "on_topic": round(float(on_topic), 6),
                        "cosine": round(cosine[id(row)], 6),
                    }
                )
                + "\n"
            )


def card(meta: dict) -> str:
    """The model card: what the model is, what it was trained on, and its leave-one-corpus-out figures."""
    rows = []
    for corpus, row in sorted(meta["leave_one_corpus_out"].items()):
        r, c, o, g = row["reader"], row["cosine"], row["oracle"], row["gap_closed"]
        rows.append(
            f"| {corpus} | {row['questions']} | {r['p_at_4']:.3f} | {c['p_at_4']:.3f} | {o['p_at_4']:.3f} | {g['p_at_4']:.0%} "
            f"| {r['noise_at_4']:.3f} | {c['noise_at_4']:.3f} | {o['noise_at_4']:.3f} | {g['noise_at_4']:.0%} "
            f"| {r['auc']:.3f} | {c['auc']:.3f} | {row['role_accuracy']:.2f} |"
        )
    training = meta["training"]
    return CARD.format(
        name=meta["name"],
        pairs=training["pairs"],
        corpora=", ".join(training["corpora"]),
        reported=", ".join(training["reported"]),
        rows="\n".join(rows),
        answers=meta["bars"]["answers"],
        on_topic=meta["bars"]["on_topic"],
        features=", ".join(meta["features"]),
        trees=training["trees"],
    )


CARD = """# Model card: the typedrag reader

**{name}**

## What it does
For a question and the sentences an answer may quote (read as one set), it gives each sentence (a) the chance
that it answers the question (label 2: it states part of an answer the asker wants) and that it is at least on
topic (label 1 or 2), and (b) the role it plays for an answer of that kind: definition, cause, consequence,
step, relates (compares the items), item (describes one compared item), for, against, advice, fact, none.
typedrag's offline engine quotes a sentence as answering only when the first chance is at least {answers}; a
typed addition by role (off by default: `OfflineSettings.role_additions`) also needs its type's role. With no sentence at that bar, the answer quotes the nearest on-topic
sentences (on-topic chance at least {on_topic}) and its trace says none answers.

## How it was made
- Input: the all-MiniLM-L6-v2 vectors (ONNX, int8, what typedrag's embedder computes) of the question, each
  sentence and its document's title, and its words. Features: {features}.
- The two chances: two gradient-boosted tree ensembles (scikit-learn's HistGradientBoostingClassifier,
  {trees}), one for label >= 1 and one for label 2; the answering chance is capped by the on-topic one.
  The role: a multinomial logistic regression on the sentence's and the question's vectors and their product.
- Data: {pairs} labelled (question, sentence) pairs from {corpora}. The candidates are the sentences of the
  first ten sources of typedrag's typed answer; each pair was judged by an LLM annotator following the
  reader-labels rubric (2 answers / 1 on topic / 0 noise, and the role). Labels are judgements, not ground
  truth: a few percent are noise.
- Stored as arrays (reader.npz) and this folder's meta.json; no pickle anywhere. Retrain with
  `python -m typedrag.reader.train --labels ../shared/data/reader-labels/pairs.jsonl
  bench/data/reader-labels/manuals.jsonl.gz`: the shared labels, and the repository's own (its README says how
  they were made; tests/test_reader.py holds that every corpus above is in one of the two).
- Bars: `answers` {answers} and `on_topic` {on_topic}, the thresholds with the best F0.75 (precision weighed
  above recall) on the leave-one-corpus-out scores below, never on a model's own training data.

## Leave one corpus out
For each of {reported}: a reader trained on every other corpus (and the extra pairs) is tested on it.
P@4: share of the four best-scored sentences that answer, over questions with an answer; noise@4: share of
the four labelled noise; AUC for label 2. *cosine*: MiniLM cosine of question and sentence alone; *oracle*:
the labels themselves (answering sentences first, noise last); *closed*: the share of the gap between cosine
and the oracle the reader closes. Role: accuracy of the role on the pairs labelled 2.

| held-out corpus | questions | P@4 reader | cosine | oracle | closed | noise@4 reader | cosine | oracle | closed | AUC reader | cosine | role acc. |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
{rows}

## Limits
- It reads meaning through MiniLM's vectors, not the question and the sentence together: it tells a sentence
  on the question's subject from one that is not far better than one that answers from one that only
  mentions. A cross-encoder fine-tuned here from all-MiniLM-L6-v2 (three and six layers, several recipes)
  did worse than cosine on held-out corpora (AUC 0.62-0.68): with a few thousand labels it learned the
  training corpora, not reading (docs/lab/2026-12-02-reader-model.md).
- English only; trained on encyclopedia leads and articles and on software manuals.
- Its roles for rare labels (consequence, for, step) rest on few examples.
"""


if __name__ == "__main__":
    main()
