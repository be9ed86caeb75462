"""ONNX Runtime as typedrag runs MiniLM: no spinning threads, threads and batch size overridable, and a text's
vector the same bit for bit whatever they are (issue 56 #2)."""

from __future__ import annotations

import numpy as np
import pytest

from typedrag import embed

TEXTS = [
    "Comets glow when they near the Sun.",
    "The write-ahead log lets the server recover after a crash, replaying what was committed since the last checkpoint.",
    "Short one.",
    "Honey bees collect nectar from flowers and store it as honey in the hive; a colony may hold tens of thousands.",
    "Tides are the rise and fall of sea levels caused by the gravity of the Moon and the Sun.",
]


def test_the_session_never_spins_and_uses_the_threads_asked_for(monkeypatch):
    options = embed.session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == embed.EMBED_THREADS and options.inter_op_num_threads == 1
    monkeypatch.setenv("TYPEDRAG_EMBED_THREADS", "1")
    assert embed.session_options().intra_op_num_threads == 1


def test_batch_size_comes_from_the_environment_and_bad_values_are_named(monkeypatch):
    assert embed.embed_batch() == embed.EMBED_BATCH
    monkeypatch.setenv("TYPEDRAG_EMBED_BATCH", "4")
    assert embed.embed_batch() == 4
    monkeypatch.setenv("TYPEDRAG_EMBED_BATCH", "lots")
    with pytest.raises(embed.EmbedderUnavailable, match="TYPEDRAG_EMBED_BATCH='lots' is not a whole number"):
        embed.embed_batch()
    monkeypatch.setenv("TYPEDRAG_EMBED_BATCH", "0")
    with pytest.raises(embed.EmbedderUnavailable, match="give 1 or more"):
        embed.embed_batch()


def test_vectors_are_the_same_bit_for_bit_at_any_batch_size_thread_count_or_spinning():
    import onnxruntime as ort

    reference = embed.default_embedder().encode(TEXTS, batch_size=32)
    for threads in (1, 2):
        embedder = embed.Embedder(threads=threads)
        for batch in (1, 2, 8, 64):
            assert np.array_equal(embedder.encode(TEXTS, batch_size=batch), reference), (threads, batch)
    spinning = embed.Embedder()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.log_severity_level = 3
    spinning._session = ort.InferenceSession(str(embed.model_files()[0]), options, providers=["CPUExecutionProvider"])
    assert np.array_equal(spinning.encode(TEXTS), reference)  # as before this change: spinning on, the default


def test_encode_tells_of_each_batch_as_it_is_done():
    told: list[int] = []
    embed.default_embedder().encode(TEXTS, batch_size=2, on_batch=told.append)
    assert told == [2, 2, 1]
