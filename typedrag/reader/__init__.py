"""The reader: how well each sentence of some retrieved passages answers a question, and what it does.

For one question and the sentences an answer may quote, the reader gives each sentence
- `answers`: the chance it states part of an answer the asker wants (label 2 of typedrag's reader labels),
  and `on_topic`: the chance it is at least useful background (label 1 or 2);
- `role`: what it does for an answer (a cause, a step, an argument for or against, a sentence that
  relates compared items, advice, ...).

It reads the question, each sentence and its document's title with the MiniLM embedder typedrag already
runs, and scores them by features that hold across corpora: meaning (cosine to the question and to the
title), how a sentence ranks among the others, the question's rare words it holds, and its shape
(length, punctuation, a capital, a pronoun, digits). Two small gradient-boosted tree ensembles turn the
features into the two chances; a logistic regression on the embeddings gives the role. The model ships
in typedrag/reader/model/ (arrays and JSON, no pickle) with its card; `python -m typedrag.reader.train`
rebuilds it from the labels and reports it leave-one-corpus-out.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import threading
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

import numpy as np

from typedrag.embed import Embedder, default_embedder
from typedrag.errors import ModelUnavailable
from typedrag.nfq import NFQType
from typedrag.text import terms

MODEL_DIR = Path(__file__).parent / "model"
MODEL_FILE = "reader.npz"
META_FILE = "meta.json"
_PRONOUNS = frozenset({"it", "its", "they", "their", "this", "these", "he", "she", "his", "her"})
_SENTENCE_ENDS = (".", "!", "?", '."', ".'", ".)", ".”", "?)", "!)")
FEATURES = (
    "cosine", "title cosine", "below the best", "rank", "question words held", "question words in title",
    "log words", "ends a sentence", "symbols", "capital", "digits", "near the others", "opens with a pronoun", "question words",
)
# The question types the role is read with (a cause is what a "why" question's answering sentence mostly
# is); scaled so the regression weighs the type about as much as the vectors.
ROLE_TYPES = tuple(t.value for t in NFQType)
TYPE_SCALE = 3.0


def role_input(q: np.ndarray, s: np.ndarray, asked: NFQType | str | None) -> np.ndarray:
    """What the role regression reads for each sentence: its vector, the question's, their product, and
    the question's type (all zeros when not known)."""
    kind = np.zeros((len(s), len(ROLE_TYPES)), dtype=np.float32)
    if asked is not None and str(asked) in ROLE_TYPES:
        kind[:, ROLE_TYPES.index(str(asked))] = TYPE_SCALE
    return np.hstack([s, np.broadcast_to(q, s.shape), s * q, kind]).astype(np.float32)


class Role(StrEnum):
    """What a sentence does for an answer (the reader labels' roles)."""

    NONE = "none"
    DEFINITION = "definition"
    CAUSE = "cause"
    CONSEQUENCE = "consequence"
    STEP = "step"
    RELATES = "relates"  # compares the items a question names with each other
    ITEM = "item"  # describes one compared item in a way that bears on the comparison
    FOR = "for"
    AGAINST = "against"
    ADVICE = "advice"
    FACT = "fact"


@dataclass(frozen=True, slots=True)
class Reading:
    """What the reader makes of one sentence for one question."""

    answers: float  # chance the sentence answers (part of) the question
    on_topic: float  # chance it is at least on topic
    role: Role


@dataclass(frozen=True, slots=True)
class Bars:
    """The reader's calibrated thresholds (set on leave-one-corpus-out scores, see the model card)."""

    answers: float  # at or above this a sentence is quoted as answering
    on_topic: float  # at or above this it is on topic


class ReaderUnavailable(ModelUnavailable):
    """The reader's model files are missing or do not match their checksum."""


def features(question: str, sentences: list[str], titles: list[str], q: np.ndarray, s: np.ndarray, t: np.ndarray) -> np.ndarray:
    """One row of FEATURES per sentence, read against the question and the other sentences: `q` is the
    question's vector, `s` and `t` the sentences' and their titles' (unit length)."""
    n = len(sentences)
    if n == 0:
        return np.zeros((0, len(FEATURES)), dtype=np.float32)
    cosine, title_cosine = s @ q, t @ q
    rank = (-cosine).argsort().argsort() / n
    held = [terms(text) for text in sentences]
    counts = Counter(term for found in held for term in found)
    asked = terms(question)
    weight = {term: math.log(1 + n / (1 + counts.get(term, 0))) for term in asked}
    total = sum(weight.values()) or 1.0
    centre = s.mean(axis=0)
    rows = []
    for i, text in enumerate(sentences):
        title_terms = terms(titles[i])
        words = text.split()
        rows.append((
            cosine[i], title_cosine[i], cosine[i] - cosine.max(), rank[i],
            sum(w for term, w in weight.items() if term in held[i]) / total,
            sum(w for term, w in weight.items() if term in title_terms) / total,
            math.log1p(len(words)), text.rstrip().endswith(_SENTENCE_ENDS),
            sum(not c.isalnum() and not c.isspace() for c in text) / max(len(text), 1), text[:1].isupper(),
            sum(c.isdigit() for c in text) / max(len(text), 1), float(s[i] @ centre),
            bool(words) and words[0].lower().strip(",") in _PRONOUNS, len(asked),
        ))
    return np.asarray(rows, dtype=np.float32)


def answering(answers: np.ndarray, on_topic: np.ndarray) -> np.ndarray:
    """The chance a sentence answers, never above the chance it is on topic (the two ensembles are fitted
    apart, so the first can exceed the second)."""
    return np.minimum(answers, on_topic)


class Trees:
    """A gradient-boosted ensemble of binary decision trees, stored as arrays: the chance of a label."""

    def __init__(self, arrays: dict[str, np.ndarray], prefix: str) -> None:
        self.baseline = float(arrays[f"{prefix}.baseline"].reshape(-1)[0])
        self.feature = arrays[f"{prefix}.feature"]  # (trees, nodes): the feature a node splits on
        self.threshold = arrays[f"{prefix}.threshold"]
        self.left, self.right = arrays[f"{prefix}.left"], arrays[f"{prefix}.right"]
        self.value, self.leaf = arrays[f"{prefix}.value"], arrays[f"{prefix}.leaf"]
        self.missing_left = arrays[f"{prefix}.missing_left"]

    def chance(self, x: np.ndarray) -> np.ndarray:
        raw = np.full(len(x), self.baseline)
        rows = np.arange(len(x))
        for tree in range(len(self.feature)):
            node = np.zeros(len(x), dtype=np.int64)
            while not self.leaf[tree, node].all():
                value = x[rows, self.feature[tree, node]]
                go_left = np.where(np.isnan(value), self.missing_left[tree, node], value <= self.threshold[tree, node])
                node = np.where(self.leaf[tree, node], node, np.where(go_left, self.left[tree, node], self.right[tree, node]))
            raw += self.value[tree, node]
        return 1 / (1 + np.exp(-raw))


def _verified(path: Path, sha256: str) -> bytes:
    """The bytes of `path`, read once and checked against `sha256`."""
    if not path.is_file():
        raise ReaderUnavailable(f"reader model file missing: {path}; reinstall typedrag")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise ReaderUnavailable(f"reader model {path} has sha256 {digest}, expected {sha256}; reinstall typedrag")
    return data


class Reader:
    """Reads the sentences an answer may quote against a question. Thread-safe (the embedder caches)."""

    def __init__(self, model_dir: Path = MODEL_DIR, embedder: Embedder | None = None) -> None:
        meta_path = model_dir / META_FILE
        if not meta_path.is_file():
            raise ReaderUnavailable(f"reader model description missing: {meta_path}; reinstall typedrag")
        meta = json.loads(meta_path.read_text())
        with np.load(io.BytesIO(_verified(model_dir / MODEL_FILE, meta["sha256"]))) as arrays:
            loaded = {name: arrays[name] for name in arrays.files}
        self.name = meta["name"]
        self.bars = Bars(**meta["bars"])
        self.roles = [Role(role) for role in meta["roles"]]
        self._answers, self._on_topic = Trees(loaded, "answers"), Trees(loaded, "on_topic")
        self._role_weights, self._role_bias = loaded["roles.weights"], loaded["roles.bias"]
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def read(self, question: str, sentences: list[tuple[str, str]], asked: NFQType | None = None) -> list[Reading]:
        """A reading of each (title, sentence) for `question`, the sentences read as one set (how each
        ranks among the others is part of its reading); `asked`, the question's type, informs the role."""
        if not sentences:
            return []
        titles, texts = [title for title, _ in sentences], [text for _, text in sentences]
        vectors = self.embedder.embed([question, *texts, *titles])
        q, s, t = vectors[0], vectors[1 : 1 + len(texts)], vectors[1 + len(texts) :]
        x = features(question, texts, titles, q, s, t)
        on_topic = self._on_topic.chance(x)
        answers = answering(self._answers.chance(x), on_topic)
        roles = (role_input(q, s, asked) @ self._role_weights + self._role_bias).argmax(axis=1)
        return [Reading(float(a), float(o), self.roles[r]) for a, o, r in zip(answers, on_topic, roles)]


_default_lock = threading.Lock()


@lru_cache(maxsize=1)
def _default() -> Reader:
    return Reader()


def default_reader() -> Reader:
    """One shared reader per process."""
    with _default_lock:
        return _default()
