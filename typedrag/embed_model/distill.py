"""Distil the static embedding table (`static-minilm.npz`) from the shipped MiniLM, with no torch and no download.

    python -m typedrag.embed_model.distill --corpus ../shared/data/corpora/enwiki-2015-core.jsonl.gz

The recipe is Model2Vec's (Tulkens and van Dongen, 2024), done with typedrag's own ONNX model:
1. every token of MiniLM's vocabulary is run through MiniLM alone (as "[SEP] token [CLS]") and its output
   vectors are averaged: what the transformer makes of that token out of context;
2. PCA keeps the `--dims` directions of most variance (fewer bytes per vector, and less of the common
   direction every token shares);
3. each token is weighted by a / (a + p(token)) (smooth inverse frequency, Arora et al. 2017), with p counted
   on `--corpus` (general English), so frequent pieces ("the", "##s") weigh little in a text's mean;
4. rows are stored as int8 with one scale each (about a quarter of float32's size, the same ranking).

The table is then a pure function of the model, the corpus sample and these settings; docs/lab/2026-12-02-hybrid.md has
what it costs in recall against MiniLM.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import time
from pathlib import Path

import numpy as np

from typedrag.embed import MAX_TOKENS, STATIC_PATH, Embedder

SIF = 1e-4  # Model2Vec's and SIF's usual coefficient


def token_outputs(embedder: Embedder, vocab_size: int, batch_size: int = 512) -> np.ndarray:
    """MiniLM's mean output over "[SEP] token [CLS]" for every token id (Model2Vec found the reversed pair better)."""
    sep, cls = embedder._tokenizer.token_to_id("[SEP]"), embedder._tokenizer.token_to_id("[CLS]")
    out = np.zeros((vocab_size, embedder.dim), dtype=np.float32)
    for start in range(0, vocab_size, batch_size):
        ids = np.arange(start, min(start + batch_size, vocab_size))
        batch = np.stack([np.full_like(ids, sep), ids, np.full_like(ids, cls)], axis=1).astype(np.int64)
        feed = {"input_ids": batch, "attention_mask": np.ones_like(batch), "token_type_ids": np.zeros_like(batch)}
        out[ids] = embedder._session.run(None, feed)[0].mean(axis=1)
    return out


def token_counts(embedder: Embedder, corpus: Path, documents: int, vocab_size: int) -> np.ndarray:
    """How often each token occurs in the first `documents` texts of a JSONL corpus (`text` field)."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    tokenizer = embedder._tokenizer
    tokenizer.no_truncation()
    opener = gzip.open if corpus.suffix == ".gz" else open
    with opener(corpus, "rt", encoding="utf-8") as lines:
        texts = (json.loads(line)["text"] for line in itertools.islice(lines, documents))
        while batch := list(itertools.islice(texts, 256)):
            for encoding in tokenizer.encode_batch(batch, add_special_tokens=False):
                counts += np.bincount(encoding.ids, minlength=vocab_size)
    tokenizer.enable_truncation(MAX_TOKENS)
    return counts


def distill(corpus: Path, documents: int, dims: int) -> dict[str, np.ndarray]:
    embedder = Embedder()
    vocab_size = embedder._tokenizer.get_vocab_size()
    started = time.perf_counter()
    raw = token_outputs(embedder, vocab_size)
    print(f"token outputs: {vocab_size:,} tokens in {time.perf_counter() - started:.0f} s")
    centred = raw - raw.mean(axis=0)
    _, singular, components = np.linalg.svd(centred, full_matrices=False)
    reduced = centred @ components[:dims].T
    kept = float((singular[:dims] ** 2).sum() / (singular**2).sum())
    counts = token_counts(embedder, corpus, documents, vocab_size)
    p = (counts + 1) / (counts.sum() + vocab_size)
    weighted = reduced * (SIF / (SIF + p))[:, None]
    scales = np.abs(weighted).max(axis=1) / 127
    scales[scales == 0] = 1.0
    vectors = np.clip(np.rint(weighted / scales[:, None]), -127, 127).astype(np.int8)
    print(f"PCA to {dims} dims keeps {kept:.1%} of the variance; {counts.sum():,} corpus tokens counted")
    name = f"static MiniLM distillate, {dims}-d, SIF on {documents:,} {corpus.name} documents"
    return {"vectors": vectors, "scales": scales.astype(np.float32), "name": np.array(name)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--corpus", type=Path, required=True, help="a JSONL(.gz) corpus of general text with a `text` field"
    )
    parser.add_argument("--documents", type=int, default=5000, help="documents read to count token frequencies")
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--out", type=Path, default=STATIC_PATH)
    args = parser.parse_args()
    table = distill(args.corpus, args.documents, args.dims)
    with open(args.out, "wb") as f:
        np.savez_compressed(f, **table)
    print(f"wrote {args.out} ({args.out.stat().st_size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
