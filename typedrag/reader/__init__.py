"""The reader: how well a sentence of a retrieved passage answers a question, and what it does for an answer.

A cross-encoder reads the question and the sentence together (with the title of the sentence's
document, so a namesake reads as one) and gives two things the offline engine chooses by:
- `answers`: the chance that the sentence states part of an answer the asker wants (label 2 of the
  reader labels), and `on_topic`: that it is at least useful background (label 1 or 2);
- `role`: what the sentence does for an answer of the question's kind (a cause, a step, an argument
  for or against, a sentence that relates compared items, advice, ...).

The model (all-MiniLM-L6-v2's first layers fine-tuned on typedrag's reader labels, int8 ONNX) ships in
typedrag/reader/model/ with its card; `python -m typedrag.reader.train` rebuilds it from the labels.
It runs on ONNX Runtime like the embedder, with the same tokenizer, checked by sha256 before use.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

import numpy as np

from typedrag.embed import TOKENIZER_PATH, model_files
from typedrag.errors import ModelUnavailable

MODEL_DIR = Path(__file__).parent / "model"
MODEL_FILE = "reader.onnx"
META_FILE = "meta.json"


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
    """The reader's calibrated thresholds (chosen leave-one-corpus-out, see the model card)."""

    answers: float  # a sentence at or above this is quoted as answering
    on_topic: float  # ... and at or above this it is on topic


def pair_text(title: str, sentence: str) -> str:
    """The second segment the reader reads: the sentence after its document's title, as in training."""
    return f"{title}: {sentence}" if title else sentence


class ReaderUnavailable(ModelUnavailable):
    """The reader's model files are missing or do not match their checksum."""


def _verified(path: Path, sha256: str) -> Path:
    if not path.is_file():
        raise ReaderUnavailable(f"reader model file missing: {path}; reinstall typedrag")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise ReaderUnavailable(f"reader model {path} has sha256 {digest}, expected {sha256}; reinstall typedrag")
    return path


class Reader:
    """Scores (question, sentence) pairs with the shipped cross-encoder. Thread-safe; caches recent pairs."""

    def __init__(self, model_dir: Path = MODEL_DIR, threads: int = 2, cache_size: int = 50_000) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        meta_path = model_dir / META_FILE
        if not meta_path.is_file():
            raise ReaderUnavailable(f"reader model description missing: {meta_path}; reinstall typedrag")
        meta = json.loads(meta_path.read_text())
        onnx_path = _verified(model_dir / MODEL_FILE, meta["sha256"])
        model_files()  # the tokenizer shared with the embedder, checked there
        self.name = meta["name"]
        self.roles = [Role(role) for role in meta["roles"]]
        self.bars = Bars(**meta["bars"])
        self.max_tokens = int(meta["max_tokens"])
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        self._tokenizer.enable_truncation(self.max_tokens, strategy="only_second")
        self._tokenizer.enable_padding()
        self._cache: OrderedDict[tuple[str, str], Reading] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def read(self, question: str, sentences: list[tuple[str, str]], batch_size: int = 32) -> list[Reading]:
        """A reading of each (title, sentence) for `question`; repeated pairs come from the cache."""
        keys = [(question, pair_text(title, text)) for title, text in sentences]
        with self._lock:
            found = {key: self._cache[key] for key in dict.fromkeys(keys) if key in self._cache}
        missing = sorted((key for key in dict.fromkeys(keys) if key not in found), key=lambda k: len(k[1]))
        for start in range(0, len(missing), batch_size):
            chunk = missing[start : start + batch_size]
            found.update(zip(chunk, self._score(chunk)))
        with self._lock:
            for key in missing:
                self._cache[key] = found[key]
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return [found[key] for key in keys]

    def _score(self, pairs: list[tuple[str, str]]) -> list[Reading]:
        encodings = self._tokenizer.encode_batch(pairs)
        feed = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        levels, roles = self._session.run(None, feed)
        chances = 1 / (1 + np.exp(-levels))  # [P(label >= 1), P(label 2)]
        return [
            Reading(answers=float(min(c[1], c[0])), on_topic=float(c[0]), role=self.roles[int(r.argmax())])
            for c, r in zip(chances, roles)
        ]


_default_lock = threading.Lock()


@lru_cache(maxsize=1)
def _default() -> Reader:
    return Reader()


def default_reader() -> Reader:
    """One shared reader per process."""
    with _default_lock:
        return _default()
