"""The dense leg's search at scale: typedrag's exact and HNSW search (typedrag.index.nearest) against usearch's own
exact int8 kernel and against the float conversion typedrag did before, on synthetic 384-d unit vectors.

    nice -n 10 python bench/bench_dense.py --rows 1000000 --queries 50
    nice -n 10 python bench/bench_dense.py --rows 100000 --graph      # and the HNSW graph: build time, p50, recall@10

Vectors: uniformly random unit vectors, or (`--clustered`) 1,000 centres each with its vectors around it, as passages
of one corpus are; stored as typedrag stores them (int8 rows, a scale each). Times are single-query, one thread,
p50 over the queries, with the load average beside them (the machine is shared); recall@10 is against exact.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def data(rows: int, queries: int, clustered: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from typedrag.index.vectors import quantize

    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((1000, 384)))

    def draw(n: int) -> np.ndarray:
        if not clustered:
            return unit(rng.standard_normal((n, 384)))
        return unit(centres[rng.integers(0, 1000, n)] + 0.7 * unit(rng.standard_normal((n, 384))))

    stored, scales = np.zeros((rows, 384), dtype=np.int8), np.zeros(rows, dtype=np.float32)
    for start in range(0, rows, 100_000):
        n = min(100_000, rows - start)
        stored[start : start + n], scales[start : start + n] = quantize(draw(n))
    return stored, scales, draw(queries)


def p50(run, queries: np.ndarray) -> tuple[float, list]:
    times, found = [], []
    for query in queries:
        started = time.perf_counter()
        found.append(run(query))
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--k", type=int, default=100, help="rows asked for (hybrid search reads each leg's top 100)")
    parser.add_argument("--graph", action="store_true", help="also build the HNSW graph and search it")
    parser.add_argument("--old", action="store_true", help="also the float conversion typedrag did before (slow)")
    parser.add_argument(
        "--clustered", action="store_true", help="vectors around 1,000 centres (default: uniformly random)"
    )
    args = parser.parse_args()

    from threadpoolctl import threadpool_limits

    from typedrag.index import nearest

    print(machine_line())
    started = time.perf_counter()
    rows, scales, queries = data(args.rows, args.queries, args.clustered)
    print(f"{args.rows:,} rows made in {time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.1f}")
    usearch = nearest._usearch()
    exact = nearest.Nearest(Path("."), rows, scales, {"norm_max": nearest.norm_max(rows, scales)})
    quantized = [nearest.quantize_query(q)[0] for q in queries]
    kernel_times, ours_times, ours = [], [], []
    with threadpool_limits(1):
        for query, q8 in zip(queries, quantized):  # side by side, query by query: the load changes by the second
            started = time.perf_counter()
            usearch.search(rows, q8, args.k, usearch.MetricKind.Cos, exact=True, threads=1)
            kernel_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            ours.append(exact.search(query, args.k)[0])
            ours_times.append(time.perf_counter() - started)
    kernel, ours_ms = statistics.median(kernel_times) * 1000, statistics.median(ours_times) * 1000
    ratio = statistics.median(b / a for a, b in zip(kernel_times, ours_times))
    print(
        f"exact top {args.k}: usearch's int8 kernel alone p50 {kernel:.1f} ms; typedrag's exact search p50 {ours_ms:.1f} ms "
        f"(per query {ratio:.2f}x the kernel, p50); load {os.getloadavg()[0]:.1f}"
    )
    del quantized
    if args.old:

        def old(query):
            out = np.empty(len(rows), dtype=np.float32)
            for start in range(0, len(rows), 65_536):
                chunk = np.asarray(rows[start : start + 65_536], dtype=np.float32)
                out[start : start + 65_536] = (chunk @ query) * scales[start : start + 65_536]
            best = np.argpartition(-out, args.k - 1)[: args.k]
            return best[np.argsort(-out[best], kind="stable")]

        with threadpool_limits(1):
            old_ms, before = p50(old, queries[:5])
        same = np.mean([len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(before, ours)])
        print(
            f"before (float conversion per query): p50 {old_ms:.0f} ms; typedrag's exact top 10 equal to it: {same:.3f}"
        )
    if args.graph:
        with tempfile.TemporaryDirectory() as folder:
            cpu0, started = time.process_time(), time.perf_counter()
            nearest.build_graph(Path(folder), rows)
            print(
                f"HNSW graph (M {nearest.CONNECTIVITY}, ef_construction {nearest.EXPANSION_ADD}): built in "
                f"{time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu0:.0f} CPU-s; "
                f"{(Path(folder) / nearest.GRAPH).stat().st_size / 2**20:.0f} MiB; load {os.getloadavg()[0]:.1f}"
            )
            graph = nearest.Nearest(Path(folder), rows, scales, {"graph": True, "norm_max": exact.longest})
            for ef in (64, 128, 256):
                graph.graph.expansion_search = ef
                for k in (10, args.k):
                    with threadpool_limits(1):
                        graph_ms, found = p50(lambda q: graph.search(q, k)[0], queries)
                    recall = np.mean([len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(found, ours)])
                    print(
                        f"  ef {ef}, top {k}: p50 {graph_ms:.2f} ms, recall@10 against exact {recall:.3f}; load {os.getloadavg()[0]:.1f}"
                    )


if __name__ == "__main__":
    main()
