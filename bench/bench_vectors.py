"""Which vector store for the embedded index's dense leg: build time, query latency and recall at the sizes users have.

Exact search with numpy (what typedrag ships) against the embedded ANN libraries that install here:
usearch, hnswlib, faiss-cpu (flat and HNSW), sqlite-vec and LanceDB. Each library is optional: one that is
not installed is reported as such (install them in a scratch venv: they are not typedrag dependencies).

    python bench/bench_vectors.py --vectors V.npy --queries Q.npy      # real vectors (rows L2-normalised)
    python bench/bench_vectors.py --random 10000,100000,655000         # random unit vectors, 384-d

Latency is single-query p50/p95 for the top 100 (hybrid search fuses each leg's top 100); recall@100 and
@10 are against the exact top 100/10 of the same query.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

TOP = 100


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def timed(search, queries: np.ndarray) -> tuple[list[np.ndarray], list[float]]:
    found, times = [], []
    for q in queries:
        start = time.perf_counter()
        found.append(np.asarray(search(q)))
        times.append((time.perf_counter() - start) * 1000)
    return found, times


def recall(found: list[np.ndarray], exact: list[np.ndarray], k: int) -> float:
    return statistics.mean(len(set(f[:k].tolist()) & set(e[:k].tolist())) / k for f, e in zip(found, exact))


def top(scores: np.ndarray, k: int) -> np.ndarray:
    part = np.argpartition(-scores, k)[:k]
    return part[np.argsort(-scores[part])]


def stores(vectors: np.ndarray):
    """(name, build() -> search(q) -> ids) for every store that is installed."""
    n, dim = vectors.shape

    def numpy_f32():
        matrix = vectors.copy()
        return lambda q: top(matrix @ q, TOP)

    def numpy_i8():
        # typedrag.index.vectors.quantize: int8 rows with one scale each (a pure function of the row)
        scales = np.abs(vectors).max(axis=1) / 127
        matrix = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
        as_f32 = matrix.astype(np.float32) * scales[:, None]  # kept in memory as float32: BLAS has no int8 product
        return lambda q: top(as_f32 @ q, TOP)

    def numpy_i8_chunked():
        scales = np.abs(vectors).max(axis=1) / 127
        matrix = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)

        def search(q):
            scores = np.empty(n, dtype=np.float32)
            for start in range(0, n, 65536):
                scores[start : start + 65536] = (matrix[start : start + 65536].astype(np.float32) @ q) * scales[
                    start : start + 65536
                ]
            return top(scores, TOP)

        return search

    yield "numpy exact, float32", numpy_f32
    yield "numpy exact, int8 rows -> float32 in memory", numpy_i8
    yield "numpy exact, int8 rows scored in chunks", numpy_i8_chunked
    if importlib.util.find_spec("usearch"):
        from usearch.index import Index

        def usearch_hnsw(dtype="i8"):
            def build():
                index = Index(ndim=dim, metric="cos", dtype=dtype, expansion_search=2 * TOP)
                index.add(np.arange(n), vectors, log=False)
                return lambda q: index.search(q, TOP).keys

            return build

        def usearch_exact():
            return lambda q: __import__("usearch.index").index.search(vectors, q, TOP, exact=True).keys

        yield "usearch HNSW, i8", usearch_hnsw("i8")
        yield "usearch HNSW, f16", usearch_hnsw("f16")
        yield "usearch exact (brute force)", usearch_exact
    if importlib.util.find_spec("hnswlib"):
        import hnswlib

        def hnsw():
            index = hnswlib.Index(space="ip", dim=dim)
            index.init_index(max_elements=n, ef_construction=200, M=16)
            index.add_items(vectors, np.arange(n))
            index.set_ef(2 * TOP)
            return lambda q: index.knn_query(q, TOP)[0][0]

        yield "hnswlib HNSW (M 16, ef 200)", hnsw
    if importlib.util.find_spec("faiss"):
        import faiss

        def faiss_flat():
            index = faiss.IndexFlatIP(dim)
            index.add(vectors)
            return lambda q: index.search(q[None, :], TOP)[1][0]

        def faiss_hnsw():
            index = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efSearch = 2 * TOP
            index.add(vectors)
            return lambda q: index.search(q[None, :], TOP)[1][0]

        yield "faiss flat (exact)", faiss_flat
        yield "faiss HNSW (M 32)", faiss_hnsw
    if importlib.util.find_spec("sqlite_vec"):
        import sqlite3

        import sqlite_vec

        def sqlite_vec_store():
            db = sqlite3.connect(":memory:", check_same_thread=False)
            db.enable_load_extension(True)
            sqlite_vec.load(db)
            db.execute(f"create virtual table v using vec0(embedding float[{dim}] distance_metric=cosine)")
            db.executemany(
                "insert into v(rowid, embedding) values (?, ?)", ((i, vectors[i].tobytes()) for i in range(n))
            )
            db.commit()
            query = f"select rowid from v where embedding match ? and k = {TOP} order by distance"
            return lambda q: [row[0] for row in db.execute(query, (q.astype(np.float32).tobytes(),))]

        yield "sqlite-vec vec0 (exact)", sqlite_vec_store
    if importlib.util.find_spec("lancedb"):
        import lancedb
        import pyarrow as pa

        def lance(indexed: bool):
            def build():
                folder = tempfile.mkdtemp(prefix="bench-lance-")
                db = lancedb.connect(folder)
                table = db.create_table(
                    "v",
                    pa.table(
                        {
                            "id": np.arange(n),
                            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
                        }
                    ),
                )
                if indexed:
                    table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_HNSW_SQ")
                return lambda q: table.search(q).metric("cosine").limit(TOP).select(["id"]).to_arrow()["id"].to_numpy()

            return build

        yield "LanceDB flat (exact)", lance(False)
        yield "LanceDB IVF_HNSW_SQ", lance(True)


def bench(vectors: np.ndarray, queries: np.ndarray, only: set[str] | None) -> None:
    print(f"\n### {len(vectors):,} vectors, {vectors.shape[1]}-d, {len(queries)} queries, top {TOP}\n")
    print("| store | build s | p50 ms | p95 ms | recall@10 | recall@100 |\n|---|---|---|---|---|---|")
    exact = [top(vectors @ q, TOP) for q in queries]
    for name, build in stores(vectors):
        if only and not any(word in name for word in only):
            continue
        start = time.perf_counter()
        try:
            search = build()
        except Exception as error:  # a store that fails at this size is reported, the others still run
            print(f"| {name} | failed: {str(error)[:80]} | | | | |")
            continue
        built = time.perf_counter() - start
        timed(search, queries[:5])  # warm
        found, times = timed(search, queries)
        times.sort()
        print(
            f"| {name} | {built:.1f} | {statistics.median(times):.2f} | {times[int(0.95 * (len(times) - 1))]:.2f} | "
            f"{recall(found, exact, 10):.3f} | {recall(found, exact, TOP):.3f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", type=Path, help=".npy of passage vectors")
    parser.add_argument(
        "--queries", type=Path, help=".npy of query vectors (default: 200 random rows of --vectors, perturbed)"
    )
    parser.add_argument("--random", help="comma-separated sizes of random unit vectors")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--n-queries", type=int, default=200)
    parser.add_argument("--only", help="comma-separated words: only stores whose name holds one")
    args = parser.parse_args()
    print(machine_line())
    only = set(args.only.split(",")) if args.only else None
    rng = np.random.default_rng(0)
    if args.vectors:
        vectors = unit(np.load(args.vectors).astype(np.float32))
        if args.queries:
            queries = unit(np.load(args.queries).astype(np.float32))
        else:
            rows = vectors[rng.choice(len(vectors), args.n_queries, replace=False)]
            queries = unit(rows + rng.normal(0, 0.05, rows.shape))
        bench(vectors, queries, only)
    for size in (int(s) for s in (args.random or "").split(",") if s):
        bench(unit(rng.normal(size=(size, args.dim))), unit(rng.normal(size=(args.n_queries, args.dim))), only)


if __name__ == "__main__":
    main()
