"""The dense leg's search over the int8 rows as they lie on disk: usearch's int8 kernels, never a float copy.

A passage's score is what it always was: the query's cosine with the passage's unit vector as stored, the int8
row times its scale (`score`). The rows are not converted to float32 to find the best ones (that took 3.1 s a
query at a million rows, and four times the file's size in memory below that); instead:

1. usearch ranks every row by its cosine with the query, int8 against int8 (`usearch.index.search(...,
   exact=True)`), or, in an index with an HNSW graph (`ANN_MIN_ROWS` rows and more), walks the graph;
2. the `candidates(k)` best are scored as above, and the k best of them returned.

Exact search stays exact: a row outside the candidates scores at most `norm_max × (c + δ)` (c the last candidate's
int8 cosine, δ how far the quantised query is from the query, `norm_max` the longest stored row), and when that
could beat the k-th score the search widens until it cannot, or scores every row. The HNSW graph is approximate:
its recall against exact is measured in docs/lab/2026-12-06-sentence-vectors.md.

Files (beside vectors.py's): `vectors.hnsw`, usearch's graph over the rows (keys: row numbers), written by a
build of ANN_MIN_ROWS or more rows, listed in the manifest; the manifest's `vector_search` section holds
`norm_max` and whether the graph was made. An index from before either computes `norm_max` on its first search.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

import numpy as np

GRAPH = "vectors.hnsw"
# From this many rows an index gets an HNSW graph (exact int8 search: ~0.2 s a query at a million rows on one core).
ANN_MIN_ROWS = int(os.environ.get("TYPEDRAG_ANN_MIN_ROWS", "300000"))
# HNSW's M and efConstruction. At a million clustered rows M 16 / 64 found 0.880 of the exact top 10 whatever ef was;
# M 32 / 128 finds 0.950 at p50 1.85 ms, built in 661 CPU-s (BENCHMARKS.md "Search at scale").
CONNECTIVITY = 32
EXPANSION_ADD = 128
EXPANSION_SEARCH = 128  # ef: the figures of docs/lab/2026-12-06-sentence-vectors.md
NORM_CHUNK = 65_536


def _usearch():
    """usearch.index, loaded after ONNX Runtime: with usearch 2.26's module loaded first, creating an ONNX Runtime
    session crashes the process (a segmentation fault, seen here with onnxruntime 1.32); the other way round both work."""
    import onnxruntime  # noqa: F401
    import usearch.index

    return usearch.index


def candidates(k: int) -> int:
    """How many rows the int8 ranking hands on to be scored for the k best."""
    return max(2 * k, k + 128)


def quantize_query(query: np.ndarray) -> tuple[np.ndarray, float]:
    """The query as int8 (its largest component 127) and δ: how far its unit vector is from the query's."""
    unit = query / max(float(np.linalg.norm(query)), 1e-12)
    scale = float(np.abs(unit).max()) / 127 or 1.0
    rows = np.clip(np.rint(unit / scale), -127, 127).astype(np.int8)
    back = rows.astype(np.float32)
    back /= max(float(np.linalg.norm(back)), 1e-12)
    return rows, float(np.linalg.norm(back - unit))


def norm_max(rows: np.ndarray, scales: np.ndarray) -> float:
    """The longest stored row (int8 row times its scale): about 1, a little over or under by rounding."""
    longest = 0.0
    for start in range(0, len(rows), NORM_CHUNK):
        chunk = np.asarray(rows[start : start + NORM_CHUNK], dtype=np.float32)
        norms = np.linalg.norm(chunk, axis=1) * np.asarray(scales[start : start + NORM_CHUNK])
        longest = max(longest, float(norms.max(initial=0.0)))
    return longest


class Nearest:
    """Search over one version's rows (memory-mapped int8, their scales), with its graph if it has one."""

    def __init__(self, folder: Path, rows: np.ndarray, scales: np.ndarray, section: dict | None) -> None:
        self.rows, self.scales = rows, scales
        self._norm_max = float(section["norm_max"]) if section and "norm_max" in section else None
        self._lock = threading.Lock()
        self.graph = None
        if section and section.get("graph") and (folder / GRAPH).is_file():
            self.graph = _usearch().Index.restore(str(folder / GRAPH), view=True)
            self.graph.expansion_search = EXPANSION_SEARCH

    @property
    def longest(self) -> float:
        if self._norm_max is None:
            with self._lock:
                if self._norm_max is None:
                    self._norm_max = norm_max(self.rows, self.scales)
        return self._norm_max

    def score(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The passages' scores as typedrag has always given them, bit for bit: each row times its scale, as float32,
        against the query (one column)."""
        stored = np.asarray(self.rows[rows], dtype=np.float32) * np.asarray(self.scales[rows])[:, None]
        return (stored @ query[:, None])[:, 0]

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the k best rows for one query vector, best first (ties: the lower row first)."""
        total = len(self.rows)
        k = min(k, total)
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        quantized, delta = quantize_query(query)
        if self.graph is not None:
            found = self.graph.search(quantized, min(candidates(k), total))
            return self._best(np.asarray(found.keys, dtype=np.int64), query, k)
        usearch = _usearch()
        wanted = min(candidates(k), total)
        while True:
            found = usearch.search(self.rows, quantized, wanted, usearch.MetricKind.Cos, exact=True, threads=1)
            rows, best = self._best(np.asarray(found.keys, dtype=np.int64), query, k)
            if wanted >= total:
                return rows, best
            outside = 1.0 - float(np.asarray(found.distances)[-1]) + delta  # the best int8 cosine left out, plus δ
            bound = self.longest * outside if outside > 0 else 0.0
            if len(best) == k and bound < float(best[-1]):
                return rows, best
            wanted = min(wanted * 4, total)

    def _best(self, rows: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        rows = np.unique(rows[rows >= 0])  # sorted: equal scores keep the lower row first, as a full scan does
        scores = self.score(rows, query)
        order = np.argsort(-scores, kind="stable")[:k]
        return rows[order], scores[order]


def build_graph(folder: Path, rows: np.ndarray, threads: int = 0) -> float:
    """usearch's HNSW graph over `rows` into `folder/GRAPH`; the seconds it took."""
    usearch = _usearch()
    started = time.perf_counter()
    graph = usearch.Index(
        ndim=rows.shape[1],
        metric=usearch.MetricKind.Cos,
        dtype=usearch.ScalarKind.I8,
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )
    step = 65_536
    for start in range(0, len(rows), step):
        chunk = np.ascontiguousarray(rows[start : start + step])
        graph.add(
            np.arange(start, start + len(chunk), dtype=np.uint64), chunk, threads=threads or (os.cpu_count() or 1)
        )
    target = folder / GRAPH
    target.unlink(missing_ok=True)
    try:
        graph.save(str(target))
    except RuntimeError as error:  # usearch names no cause ("Failed to serialize into stream")
        raise _unwritten(target, graph.serialized_length, error) from error
    with open(target, "rb+") as f:
        os.fsync(f.fileno())
    return time.perf_counter() - started


def _unwritten(target: Path, needed: int, error: RuntimeError) -> OSError:
    """The OSError a failed graph save is, as far as can be told: no space when the disk, the partial file removed,
    has less free than the graph needs (the build then says "cannot write the index ... no space left on device")."""
    target.unlink(missing_ok=True)
    stat = os.statvfs(target.parent)
    if stat.f_bavail * stat.f_frsize < needed:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
    return OSError(errno.EIO, f"usearch could not write its graph ({error})", str(target))
