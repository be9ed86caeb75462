"""The faster MiniLM ("minilm-fast", issue 56 #3): the same weights computing in int8, close to MiniLM's vectors
but not MiniLM's, so it never reads the sentence vectors an index keeps for MiniLM, and its file is checked."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from typedrag import embed
from typedrag.embed import embedder_for, embedder_identity, passage_input
from typedrag.index import build_index, open_retriever

TEXTS = [
    "Comets glow when they near the Sun.",
    "The write-ahead log lets the server recover after a crash, replaying what was committed since the last checkpoint.",
    "Short one.",
    passage_input("Bread", "Bread is a staple food prepared from a dough of flour and water, usually by baking. " * 4),
]


def test_fast_vectors_are_close_to_minilms_but_its_own():
    fast, minilm = embedder_for("minilm-fast").encode(TEXTS), embedder_for("minilm").encode(TEXTS)
    cosines = (fast * minilm).sum(axis=1)
    assert cosines.min() > 0.97, cosines
    assert not np.array_equal(fast, minilm)
    assert embedder_identity("minilm-fast") != embedder_identity("minilm")


def test_a_texts_fast_vector_does_not_depend_on_its_batch():
    """Dynamic quantisation scales activations by a run's largest: batched, a text's vector moved (cosine 0.986)."""
    fast = embedder_for("minilm-fast")
    together = fast.encode(TEXTS, batch_size=8)
    for i, text in enumerate(TEXTS):
        assert np.array_equal(fast.encode([text])[0], together[i])
    assert np.array_equal(fast.embed(TEXTS[::-1])[::-1], together)


def test_only_minilm_reads_the_vectors_an_index_keeps():
    class Kept:
        def lookup(self, texts):
            return {t: np.full(384, 1 / np.sqrt(384), dtype=np.float32) for t in texts}

        def keep(self, texts, vectors):
            pass

    kept = Kept()
    embed.remember(kept)
    try:
        text = "a sentence no cache has seen before 4f9e312"
        assert np.allclose(embedder_for("minilm").embed([text])[0], 1 / np.sqrt(384))
        assert not np.allclose(embedder_for("minilm-fast").embed([text])[0], 1 / np.sqrt(384))
    finally:
        embed._KNOWN.discard(kept)


def test_a_changed_model_file_is_refused(tmp_path, monkeypatch):
    changed = tmp_path / "minilm-int8-dynamic.onnx"
    shutil.copy(embed.FAST_PATH, changed)
    with changed.open("ab") as f:
        f.write(b"\0")
    monkeypatch.setattr(embed, "FAST_PATH", changed)
    with pytest.raises(embed.EmbedderUnavailable, match="sha256"):
        embed.FastEmbedder.model_files()
    monkeypatch.setattr(embed, "FAST_PATH", tmp_path / "absent.onnx")
    with pytest.raises(embed.EmbedderUnavailable, match="typedrag.embed_model.quantize"):
        embed.FastEmbedder.model_files()


def test_an_index_built_with_the_fast_model_says_so_and_searches_with_it(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "comet.txt").write_text(
        "A comet is an icy body that releases gas when it passes close to the Sun.", encoding="utf-8"
    )
    (docs / "bread.txt").write_text("Bread is baked from a dough of flour and water.", encoding="utf-8")
    build_index([docs], tmp_path / "index", show_progress=False, embedder="minilm-fast")
    retriever = open_retriever(tmp_path / "index", "dense")
    assert retriever.manifest["vectors"]["identity"].startswith(embedder_identity("minilm-fast"))
    assert "comet" in retriever.search("what glows near the sun when icy", 1)[0].passage.text.lower()
