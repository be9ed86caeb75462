"""tantivy (embedded) vs Milvus Lite (a `milvus-lite server` on loopback) on the same 100k passages.

Build time, single-query p50/p95, throughput of `search_many`, and the top-10 overlap between the two,
with the Wiki-NFQA questions as queries. The subset is the first documents of the shared corpus until
`--passages` passages, written once so both backends index exactly the same passages.

    python bench/bench_milvus.py                     # 100k passages, all 945 questions
    python bench/bench_milvus.py --passages 20000 --limit 100
"""

from __future__ import annotations

import argparse
import glob
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from _machine import machine_line

from typedrag.corpus import chunk_document, iter_documents
from typedrag.index import build_index, open_retriever
from typedrag.index.milvus import MilvusRetriever, build_milvus_index

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def load_queries(pattern: str) -> list[str]:
    queries = []
    for path in sorted(glob.glob(pattern)):
        with open(path, encoding="utf-8") as f:
            queries += [json.loads(line)["question_text"] for line in f if line.strip()]
    if not queries:
        sys.exit(f"no queries found at {pattern}")
    return queries


def write_subset(corpus: str, passages: int, out: Path) -> tuple[int, int]:
    """Whole documents from the start of `corpus` until `passages` passages; returns (documents, passages)."""
    documents = count = 0
    with open(out, "w", encoding="utf-8") as f:
        for doc in iter_documents([corpus], problems=[]):
            if count >= passages:
                break
            f.write(json.dumps({"id": doc.doc_id, "title": doc.title, "text": doc.text}) + "\n")
            documents += 1
            count += len(chunk_document(doc))
    return documents, count


def timed_searches(retriever, queries: list[str], k: int) -> tuple[list[float], list[set[str]]]:
    times, tops = [], []
    for q in queries:
        start = time.perf_counter()
        hits = retriever.search(q, k)
        times.append((time.perf_counter() - start) * 1000)
        tops.append({h.passage_id for h in hits})
    return times, tops


def percentile(values: list[float], p: float) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * p))]


def throughput(retriever, queries: list[str], k: int) -> float:
    start = time.perf_counter()
    retriever.search_many(queries, k)
    return len(queries) / (time.perf_counter() - start)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data_dir: Path, port: int) -> subprocess.Popen:
    from pymilvus import MilvusClient

    command = [
        sys.executable,
        "-m",
        "milvus_lite",
        "server",
        "--data-dir",
        str(data_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            MilvusClient(uri=f"http://127.0.0.1:{port}", timeout=2).list_collections()
            return server
        except Exception:
            time.sleep(0.2)
    server.kill()
    sys.exit("milvus-lite server did not start")


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def report(name: str, build_s: float, times: list[float], qps: float, extra: str = "") -> None:
    print(
        f"| {name} | {build_s:.1f} s | {percentile(times, 0.5):.1f} ms | {percentile(times, 0.95):.1f} ms | "
        f"{1000 / statistics.mean(times):,.1f} | {qps:,.1f} |{extra}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(SHARED / "corpora" / "enwiki-2015-core.jsonl.gz"))
    parser.add_argument("--queries", default=str(SHARED / "wiki-nfqa" / "*.jsonl"), help="glob of Wiki-NFQA files")
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--limit", type=int, default=0, help="use only the first N questions (0: all)")
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args()

    print(f"# tantivy vs Milvus Lite server · {machine_line()}")
    print(f"# tantivy {version('tantivy')}, pymilvus {version('pymilvus')}, milvus-lite {version('milvus-lite')}")
    queries = load_queries(args.queries)
    queries = queries[: args.limit] if args.limit else queries
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        documents, passages = write_subset(args.corpus, args.passages, root / "subset.jsonl")
        print(f"# {documents:,} documents -> {passages:,} passages; {len(queries)} Wiki-NFQA questions, k={args.k}\n")
        print("| backend | build | p50 | p95 | q/s one by one | q/s search_many |")
        print("|---|---|---|---|---|---|")

        summary = build_index([root / "subset.jsonl"], root / "tantivy", show_progress=False)
        tantivy = open_retriever(root / "tantivy")
        timed_searches(tantivy, queries[:50], args.k)  # warm the page cache
        t_times, t_tops = timed_searches(tantivy, queries, args.k)
        report("tantivy (embedded)", summary.seconds, t_times, throughput(tantivy, queries, args.k))

        port = free_port()
        server = start_server(root / "milvus", port)
        try:
            uri = f"http://127.0.0.1:{port}"
            summary = build_milvus_index([root / "subset.jsonl"], uri, "bench", show_progress=False)
            print(f"# Milvus build done in {summary.seconds:.1f} s; searching", file=sys.stderr, flush=True)
            milvus = MilvusRetriever(uri, "bench")
            start = time.perf_counter()
            milvus.search(queries[0], args.k)  # Milvus Lite builds its per-segment BM25 indexes on the first search
            print(
                f"# Milvus first search (builds Lite's in-memory BM25 index): {time.perf_counter() - start:.1f} s",
                flush=True,
            )
            m_times, m_tops = timed_searches(milvus, queries, args.k)
            qps = throughput(milvus, queries, args.k)
            report(
                "Milvus Lite server, BM25",
                summary.seconds,
                m_times,
                qps,
                f" server peak RSS {peak_rss_mb(server.pid):,.0f} MB",
            )
        finally:
            server.kill()
            server.wait()
    overlaps = [len(a & b) / max(len(a), 1) for a, b in zip(t_tops, m_tops) if a]
    print(
        f"\ntop-{args.k} overlap Milvus vs tantivy: mean {statistics.mean(overlaps):.0%} over {len(overlaps)} questions with tantivy hits"
    )


if __name__ == "__main__":
    main()
