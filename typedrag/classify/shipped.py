"""The NF-CATS classifier shipped in the package, predicted with plain numpy.

Features: word 1-3-grams and char_wb 2-5-grams (TF-IDF, sublinear tf, l2 per block), plus the
MiniLM sentence embedding; a multinomial logistic regression on top. A model trained with technical
questions (questions about manuals) holds two such regressions, NF-CATS's and one fitted with the
technical questions too, and a binary one that says how technical a question reads; their logits are
mixed by that share. The weights are stored as JSON and .npz (never pickle: loading a pickle runs
code), and the few lines of scikit-learn's TfidfVectorizer/LogisticRegression that prediction needs
are reimplemented here, so scikit-learn is only needed for training (tests check the two agree).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import re
import threading
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np

from typedrag.classify.base import TypePrediction, check_question
from typedrag.phrasing.kinds import asks_how_to, comparative_question, comparison_phrasing, weak_choice
from typedrag.nfq import NFQType
from typedrag.result import Trace

MODEL_DIR = Path(__file__).parent / "model"
VOCAB = "vocab.json.gz"  # the n-gram vocabulary, gzipped (4 MB of JSON, 1 MB stored)
_WHITE_SPACES = re.compile(r"\s\s+")  # as scikit-learn's char_wb analyzer
SURE = 0.6  # a prediction this confident (the routing threshold) is not overridden by a weak comparison phrasing
# A question reads technical when the technical fit has at least this share of the mix: then a comparative between
# two things ("Is X slower than Y?") is a comparison, as the guidelines say, not NF-CATS's debate or factoid.
TECHNICAL = 0.5


def mark(text: str, markers: list[str]) -> str:
    """Wrap a question in start/end tokens so word n-grams see how it opens and closes ("xxbos Why")."""
    return f"{markers[0]} {text} {markers[1]}"


def word_ngrams(text: str, token_pattern: re.Pattern, ngram_range: tuple[int, int], lowercase: bool) -> list[str]:
    """scikit-learn's analyzer="word" (no stop words, no accent stripping)."""
    tokens = token_pattern.findall(text.lower() if lowercase else text)
    low, high = ngram_range
    grams = list(tokens) if low == 1 else []
    for n in range(max(low, 2), min(high, len(tokens)) + 1):
        grams.extend(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return grams


def char_wb_ngrams(text: str, ngram_range: tuple[int, int], lowercase: bool) -> list[str]:
    """scikit-learn's analyzer="char_wb": n-grams inside space-padded words."""
    text = _WHITE_SPACES.sub(" ", text.lower() if lowercase else text)
    low, high = ngram_range
    grams = []
    for word in text.split():
        word = f" {word} "
        for n in range(low, high + 1):
            grams.extend(word[i : i + n] for i in range(max(len(word) - n, 0) + 1))
            if len(word) <= n:  # a short word counts once
                break
    return grams


def tfidf_row(grams: list[str], vocabulary: dict[str, int], idf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(column indices, values) of one l2-normalised, sublinear-tf TF-IDF row."""
    counts = Counter(g for g in grams if g in vocabulary)
    if not counts:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    columns = np.fromiter((vocabulary[g] for g in counts), dtype=np.int64, count=len(counts))
    tf = np.fromiter((1.0 + math.log(c) for c in counts.values()), dtype=np.float64, count=len(counts))
    values = tf * idf[columns]
    return columns, values / np.linalg.norm(values)


class ShippedClassifier:
    """Classifies questions into the eight NF-CATS types with the model in `classify/model/`.

    One rule sits on top of the model: an explicit comparison phrasing ("How is X different from
    Y", "Compare X, Y and Z", "Which is better, X or Y") is a comparison, whatever the model says
    (the model, trained on 7,669 questions, sent such phrasings to INSTRUCTION, DEBATE or NOT-A-QUESTION).

    >>> load_default_classifier().classify("Why do cats purr?").label
    <NFQType.REASON: 'REASON'>
    """

    def __init__(self, model_dir: Path = MODEL_DIR, embedder=None) -> None:
        """Read the model files (~0.05 s); `embedder` defaults to the process-wide MiniLM one."""
        meta = json.loads((model_dir / "meta.json").read_text(encoding="utf-8"))
        vocab = json.loads(gzip.decompress((model_dir / VOCAB).read_bytes()).decode("utf-8"))
        with np.load(model_dir / "weights.npz", allow_pickle=False) as weights:
            # Stored as float32, computed in float64 like scikit-learn.
            self._idf_word = weights["idf_word"].astype(np.float64)
            self._idf_char = weights["idf_char"].astype(np.float64)
            coef = weights["coef"].astype(np.float64)
            self._intercept = weights["intercept"].astype(np.float64)
            self.technical = "coef_technical" in weights.files
            if self.technical:
                # Stacked: general classes, then technical classes, then the domain score (one regression).
                coef = np.vstack(
                    [
                        coef,
                        weights["coef_technical"].astype(np.float64),
                        weights["domain_coef"].astype(np.float64)[None, :],
                    ]
                )
                self._intercept = np.concatenate(
                    [
                        self._intercept,
                        weights["intercept_technical"].astype(np.float64),
                        weights["domain_intercept"].astype(np.float64),
                    ]
                )
        self.name = meta["name"]
        self.classes = [NFQType(c) for c in meta["classes"]]
        self._word_vocab = {term: i for i, term in enumerate(vocab["word"])}
        self._char_vocab = {term: i for i, term in enumerate(vocab["char"])}
        n_word, n_char = len(self._word_vocab), len(self._char_vocab)
        # Row-gatherable slices of the coefficient matrix: (n_features, n_classes).
        self._w_word = np.ascontiguousarray(coef[:, :n_word].T)
        self._w_char = np.ascontiguousarray(coef[:, n_word : n_word + n_char].T)
        self._w_embed = np.ascontiguousarray(coef[:, n_word + n_char :].T)
        self._word = meta["word"]
        self._token_pattern = re.compile(self._word["token_pattern"])
        self._char = meta["char"]
        self._embedding_scale = meta["embedding"]["scale"]
        if embedder is None:
            from typedrag.embed import default_embedder

            embedder = default_embedder()
        self.embedder = embedder

    def features(self, question: str) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """Sparse word and char TF-IDF rows of one question."""
        words = word_ngrams(
            mark(question, self._word["markers"]),
            self._token_pattern,
            tuple(self._word["ngram_range"]),
            self._word["lowercase"],
        )
        chars = char_wb_ngrams(question, tuple(self._char["ngram_range"]), self._char["lowercase"])
        return tfidf_row(words, self._word_vocab, self._idf_word), tfidf_row(chars, self._char_vocab, self._idf_char)

    def predict_proba(self, questions: list[str]) -> np.ndarray:
        """(len(questions), 8) class probabilities, columns in `self.classes` order."""
        return self.predict_with_share(questions)[0]

    def predict_with_share(self, questions: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The class probabilities, and how technical each question reads (the share of the technical fit in the
        mix; 0 for a model trained on NF-CATS alone)."""
        logits = np.tile(self._intercept, (len(questions), 1))
        for i, question in enumerate(questions):
            (wc, wv), (cc, cv) = self.features(question)
            logits[i] += wv @ self._w_word[wc] + cv @ self._w_char[cc]
        logits += (self.embedder.embed(questions).astype(np.float64) * self._embedding_scale) @ self._w_embed
        share = np.zeros(len(questions))
        if self.technical:  # mix NF-CATS's logits and the technical fit's by how technical each question reads
            n = len(self.classes)
            share = 1.0 / (1.0 + np.exp(-np.clip(logits[:, 2 * n], -60.0, 60.0)))
            logits = (1 - share[:, None]) * logits[:, :n] + share[:, None] * logits[:, n : 2 * n]
        logits -= logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        return exp / exp.sum(axis=1, keepdims=True), share

    def classify(self, question: str) -> TypePrediction:
        """The type of one question (synchronous; the pipeline calls `aclassify`)."""
        return self.classify_many([question])[0]

    async def aclassify(self, question: str, trace: Trace | None = None) -> TypePrediction:
        return await asyncio.to_thread(self.classify, question)

    async def aclassify_many(self, questions: list[str]) -> list[TypePrediction]:
        return await asyncio.to_thread(self.classify_many, questions)

    def classify_many(self, questions: list[str]) -> list[TypePrediction]:
        for question in questions:
            check_question(question)
        if not questions:
            return []
        source = f"classifier:{self.name}"
        predictions = []
        for question, row, share in zip(questions, *self.predict_with_share(questions)):
            probabilities = {label: float(p) for label, p in zip(self.classes, row)}
            ranked = sorted(probabilities, key=probabilities.get, reverse=True)
            label = ranked[0]
            rule = None
            if label is not NFQType.COMPARISON:
                if comparison_phrasing(question) or (weak_choice(question) and probabilities[label] < SURE):
                    rule = "+comparison-rule"
                elif share >= TECHNICAL and comparative_question(question):  # "Is a CTE slower than a subquery?"
                    rule = "+comparative-rule"
            if rule:
                probabilities = {k: (1.0 if k is NFQType.COMPARISON else 0.0) for k in probabilities}
                predictions.append(TypePrediction(NFQType.COMPARISON, 1.0, probabilities, source + rule))
                continue
            if label is NFQType.COMPARISON and asks_how_to(question):  # "How to explain the difference ...": steps
                label = ranked[1]
                predictions.append(TypePrediction(label, probabilities[label], probabilities, source + "+how-to-rule"))
                continue
            predictions.append(TypePrediction(label, probabilities[label], probabilities, source))
        return predictions


_load_lock = threading.Lock()


@lru_cache(maxsize=1)
def _load() -> ShippedClassifier:
    return ShippedClassifier()


def load_default_classifier() -> ShippedClassifier:
    """The classifier shipped in the package, loaded once per process."""
    with _load_lock:
        return _load()
