"""The dense leg's search over int8 rows (typedrag.index.nearest): exact search gives what a full scan of every row
gives, the same rows in the same order and the same scores to float32 rounding (BLAS sums a few rows in another
order than many), without a float copy; an index of ANN_MIN_ROWS rows gets an HNSW graph, built and synced
with it."""

from __future__ import annotations

import json

import numpy as np

from typedrag.index import build_index, nearest, open_retriever
from typedrag.index.manifest import MANIFEST, is_typedrag_index
from typedrag.index.tantivy import ENGINE, sync_index
from typedrag.index.vectors import quantize


def full_scan(rows, scales, query, k):
    """What the dense leg computed before: every row as float32 times its scale, against the query."""
    scores = ((rows.astype(np.float32) * scales[:, None]) @ query[:, None])[:, 0]
    order = np.argsort(-scores, kind="stable")[:k]
    return order, scores[order]


def unit(x):
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def test_exact_search_finds_the_full_scans_rows_and_scores(tmp_path):
    rng = np.random.default_rng(7)
    rows, scales = quantize(unit(rng.standard_normal((5000, 384))))
    search = nearest.Nearest(tmp_path, rows, scales, None)
    for query in unit(rng.standard_normal((20, 384))):
        for k in (1, 10, 100):
            want_rows, want_scores = full_scan(rows, scales, query, k)
            got_rows, got_scores = search.search(query, k)
            assert np.array_equal(got_rows, want_rows) and np.allclose(got_scores, want_scores, rtol=1e-6, atol=1e-7)


def test_when_the_candidates_could_miss_a_row_the_search_widens_until_they_cannot(tmp_path, monkeypatch):
    """Rows of very different lengths (an int8 ranking by cosine alone puts them in another order than their
    scores): the bound sends the search wider, and it still returns the full scan's best."""
    usearch = nearest._usearch()

    rng = np.random.default_rng(3)
    rows, scales = quantize(unit(rng.standard_normal((2000, 384))))
    scales = scales * rng.uniform(0.5, 1.5, len(scales)).astype(np.float32)  # stored lengths far from 1
    search = nearest.Nearest(tmp_path, rows, scales, None)
    monkeypatch.setattr(nearest, "candidates", lambda k: k)  # as few as asked for: too few to be sure of
    calls = []
    real = usearch.search
    monkeypatch.setattr(
        usearch,
        "search",
        lambda data, query, count, *a, **kw: calls.append(count) or real(data, query, count, *a, **kw),
    )
    for query in unit(rng.standard_normal((10, 384))):
        want_rows, want_scores = full_scan(rows, scales, query, 10)
        got_rows, got_scores = search.search(query, 10)
        assert np.array_equal(got_rows, want_rows) and np.allclose(got_scores, want_scores, rtol=1e-6, atol=1e-7)
    assert max(calls) > 10  # it did widen


def test_the_hnsw_graph_finds_nearly_all_of_exacts_best(tmp_path, monkeypatch):
    rng = np.random.default_rng(11)
    centers = unit(rng.standard_normal((50, 384)))
    data = unit(centers[rng.integers(0, 50, 4000)] + 0.6 * unit(rng.standard_normal((4000, 384))))
    rows, scales = quantize(data)
    nearest.build_graph(tmp_path, rows)
    graph = nearest.Nearest(tmp_path, rows, scales, {"graph": True, "norm_max": nearest.norm_max(rows, scales)})
    exact = nearest.Nearest(tmp_path, rows, scales, None)
    assert graph.graph is not None and exact.graph is None
    found = []
    for query in unit(data[:50] + 0.3 * rng.standard_normal((50, 384))):
        want, _ = exact.search(query, 10)
        got, scores = graph.search(query, 10)
        assert np.all(np.diff(scores) <= 0)
        found.append(len(set(got) & set(want)) / 10)
    assert np.mean(found) >= 0.95


def test_an_index_of_ann_min_rows_gets_a_graph_that_syncs_and_opens(tmp_path, monkeypatch):
    monkeypatch.setattr(nearest, "ANN_MIN_ROWS", 5)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(8):
        (docs / f"d{i}.txt").write_text(
            f"Document {i} is about topic {i}, the word{i} and little else.", encoding="utf-8"
        )
    index_dir = tmp_path / "index"
    build_index([docs], index_dir, embedder="static", show_progress=False)
    manifest = json.loads((index_dir / MANIFEST).read_text())
    assert manifest["vector_search"]["graph"] is True and nearest.GRAPH in manifest["files"]
    assert is_typedrag_index(index_dir, ENGINE) == (True, "")
    retriever = open_retriever(index_dir, "dense")
    assert retriever.search("word3", 1)[0].passage.doc_id == "d3.txt"
    (docs / "d8.txt").write_text("Document 8 is about volcanoes, lava and ash.", encoding="utf-8")
    summary = sync_index([docs], index_dir, show_progress=False)
    assert summary.graph_seconds > 0
    assert open_retriever(index_dir, "dense").search("volcanoes lava", 1)[0].passage.doc_id == "d8.txt"


def test_an_index_from_before_the_search_section_is_searched_as_it_is(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(4):
        (docs / f"d{i}.txt").write_text(
            f"Document {i} is about topic {i}, the word{i} and little else.", encoding="utf-8"
        )
    index_dir = tmp_path / "index"
    build_index([docs], index_dir, embedder="static", show_progress=False)
    manifest = json.loads((index_dir / MANIFEST).read_text())
    del manifest["vector_search"]
    (index_dir / MANIFEST).write_text(json.dumps(manifest))
    retriever = open_retriever(index_dir, "dense")
    assert retriever.search("word2", 1)[0].passage.doc_id == "d2.txt"
    assert retriever.manifest.get("vector_search") is None


def test_minilm_loads_in_a_process_that_searched_vectors_first():
    """usearch 2.26 loaded before ONNX Runtime made creating MiniLM's session crash the process (SIGSEGV): a
    server's first request a dense search, its second an answer that embeds."""
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from typedrag.index import nearest\n"
        "rows = np.ones((4, 384), dtype=np.int8)\n"
        "nearest.Nearest(None, rows, np.ones(4, dtype=np.float32), {'norm_max': 1.0}).search(np.ones(384, dtype=np.float32), 2)\n"
        "from typedrag.embed import Embedder\n"
        "print(Embedder().embed(['comets glow']).shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and "(1, 384)" in done.stdout, done.stderr[-2000:]
