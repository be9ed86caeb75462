"""Benchmark the default tantivy index: build time, size, memory, query latency and throughput; and, with
`quality`, what each retrieval mode finds on the project's question sets.

Also compares per-query speed with the pure-Python `rank-bm25` on a 100k-passage subset, the
obvious do-it-yourself alternative (rank-bm25, the 'bench' extra: pip install 'typedrag[bench]').

    python bench/bench_retrieval.py                      # shared Wikipedia corpus, fresh index
    python bench/bench_retrieval.py --reuse              # reuse the index from a previous run
    python bench/bench_retrieval.py --corpus demo:vital-articles
    python bench/bench_retrieval.py quality --index demo=DIR --index python=DIR --index handbook=DIR \
        --index postgres=DIR --index r=DIR                # bm25 / dense / hybrid on every set, per corpus

`quality` reads each corpus's index (built with vectors: `typedrag index SOURCE --index DIR`) and reports, per
retrieval mode: the key-term sets (bench/data/keyterms*.jsonl: the share of questions whose top 5 passages hold
a term of every group) and the conversational set (bench/data/conversations.jsonl: recall@5 of the answering
passages, the turn searched alone and as the offline follow-up reading searches it, fused), split tune / test;
with `--judged`, the passages judged since to state an answer count too (bench/_conversation_data.py).
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numpy
import tantivy

sys.path.insert(0, str(Path(__file__).resolve().parent))

import typedrag
from typedrag.corpus import chunk_document, iter_documents
from typedrag.extras import require_or_exit
from typedrag.index import build_index, open_retriever
from typedrag.index.tantivy.schema import query_analyzer

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine_info() -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"machine: {os.cpu_count()} cpus ({cpu}), {platform.platform()}")
    print(f"python {platform.python_version()}, tantivy {version('tantivy')}, typedrag {typedrag.__version__}")


def load_queries(pattern: str) -> list[str]:
    queries = []
    for path in sorted(glob.glob(pattern)):
        with open(path, encoding="utf-8") as f:
            queries += [json.loads(line)["question_text"] for line in f if line.strip()]
    if not queries:
        sys.exit(f"no queries found at {pattern}")
    return queries


def latencies_ms(search, queries: list[str], k: int) -> list[float]:
    times = []
    for q in queries:
        start = time.perf_counter()
        search(q, k)
        times.append((time.perf_counter() - start) * 1000)
    return times


def percentile(values: list[float], p: float) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * p))]


def bench_tantivy(index_dir: Path, queries: list[str], k: int) -> float:
    """Prints single-query latency and batch throughput; returns the mean single-query ms."""
    retriever = open_retriever(index_dir)
    latencies_ms(retriever.search, queries[:50], k)  # warm the page cache
    times = latencies_ms(retriever.search, queries, k)
    print(
        f"  single query ({len(queries)} queries, k={k}): p50 {percentile(times, 0.5):.2f} ms, "
        f"p95 {percentile(times, 0.95):.2f} ms, {1000 / statistics.mean(times):,.0f} queries/s on one thread"
    )
    start = time.perf_counter()
    retriever.search_many(queries, k)
    print(f"  search_many (2 threads): {len(queries) / (time.perf_counter() - start):,.0f} queries/s")
    return statistics.mean(times)


def disk_mb(index_dir: Path) -> float:
    return sum(p.stat().st_size for p in index_dir.iterdir() if p.is_file()) / 2**20


def bench_rank_bm25(corpus: str, subset: int, queries: list[str], k: int, n_queries: int) -> None:
    """tantivy vs rank-bm25 on the first `subset` passages, same tokenization and k1/b."""
    from rank_bm25 import BM25Okapi

    problems: list = []
    docs = iter_documents([corpus], problems=problems)
    passages = list(itertools.islice((p for d in docs for p in chunk_document(d)), subset))
    print(f"\nrank-bm25 {version('rank-bm25')} vs tantivy on the first {len(passages):,} passages:")
    with tempfile.TemporaryDirectory() as tmp:
        subset_file = Path(tmp) / "subset.jsonl"
        with open(subset_file, "w", encoding="utf-8") as f:  # one document per passage keeps the same passages
            for p in passages:
                f.write(json.dumps({"id": p.passage_id, "title": p.title, "text": p.text}) + "\n")
        build_index([subset_file], Path(tmp) / "index", show_progress=False)
        print("  tantivy:")
        tantivy_ms = bench_tantivy(Path(tmp) / "index", queries, k)
        top_tantivy = [
            [r.passage_id.rsplit("#", 1)[0] for r in open_retriever(Path(tmp) / "index").search(q, k)]
            for q in queries[:n_queries]
        ]

    F = tantivy.Filter  # the index's en_stem chain for passages, the retriever's query chain for queries
    en_stem = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(F.remove_long(40)).filter(F.lowercase())
    en_stem = en_stem.filter(F.stemmer("english")).build()
    analyzer = query_analyzer()
    start = time.perf_counter()
    bm25 = BM25Okapi([en_stem.analyze(p.text) for p in passages], k1=1.2, b=0.75)
    print(
        f"  rank-bm25 build: {time.perf_counter() - start:.1f} s (tokenized like the index), "
        f"peak RSS so far {peak_rss_mb():,.0f} MB"
    )
    ids = [p.passage_id for p in passages]
    top_bm25 = []

    def search(q: str, k: int) -> None:
        scores = bm25.get_scores(analyzer.analyze(q))
        top_bm25.append([ids[i] for i in numpy.argsort(-scores)[:k]])

    times = latencies_ms(search, queries[:n_queries], k)
    overlap = statistics.mean(len(set(a) & set(b)) / k for a, b in zip(top_tantivy, top_bm25, strict=True))
    print(
        f"  rank-bm25 single query ({n_queries} queries): p50 {percentile(times, 0.5):,.0f} ms, "
        f"mean {statistics.mean(times):,.0f} ms"
    )
    print(
        f"  tantivy is {statistics.mean(times) / tantivy_ms:,.0f}x faster per query; "
        f"top-{k} overlap {overlap:.0%} (rank-bm25 uses a different IDF formula)"
    )


KEYTERM_SETS = {
    "demo": "keyterms.jsonl",
    "python": "keyterms-python-docs.jsonl",
    "handbook": "keyterms-debian-handbook.jsonl",
    "r": "keyterms-r-manuals.jsonl",
}
DATA = Path(__file__).resolve().parent / "data"
TOP = 5


def conversation_found(groups: list[list[dict]], hits) -> float:
    """The share of answer groups with a passage among `hits` (by id, or by the opening it was written with)."""
    ids = {h.passage_id for h in hits}
    texts = [" ".join(h.passage.text.split()) for h in hits]
    return sum(any(a["id"] in ids or any(a["quote"] in t for t in texts) for a in group) for group in groups) / len(
        groups
    )


def quality_rows(
    corpus: str, index: Path, modes: list[str], depth: int | None, weights=None, judged: bool = False
) -> list[dict]:
    """One row per question set and mode: (set, n, score) for this corpus."""
    from typedrag.evaluation.retrieval import read_questions, score
    from typedrag.followup import FusingRetriever, offline_standalone
    from typedrag.history import Turn
    from typedrag.index import fusion

    if depth:
        fusion.HYBRID_DEPTH = depth
    if weights:
        fusion.HYBRID_WEIGHTS = weights
    rows = []
    retrievers = {mode: open_retriever(index, mode) for mode in modes}
    if corpus in KEYTERM_SETS:
        questions = read_questions(DATA / KEYTERM_SETS[corpus])
        for mode, retriever in retrievers.items():
            found = retriever.search_many([q.question for q in questions], TOP)
            held = [score(q, "", hits, TOP).key_terms for q, hits in zip(questions, found)]
            rows.append(
                {
                    "set": f"key terms ({KEYTERM_SETS[corpus]})",
                    "n": len(held),
                    "mode": mode,
                    "value": sum(held) / len(held),
                }
            )
    from _conversation_data import load

    conversations = [c for c in load(judged=judged) if c["corpus"] == corpus]
    for split in ("tune", "test"):
        turns = []  # (question searched alone, standalone, answers)
        for conversation in (c for c in conversations if c["split"] == split):
            dialogue: list[Turn] = []
            for turn in conversation["turns"]:
                if turn["answers"]:
                    turns.append((turn["user"], offline_standalone(turn["user"], dialogue), turn["answers"]))
                dialogue.append(Turn(role="user", content=turn["user"]))
        if not turns:
            continue
        for mode, retriever in retrievers.items():
            alone = retriever.search_many([t[0] for t in turns], TOP)
            fusing = FusingRetriever(retriever, {s.question: s.searches for _, s, _ in turns})
            read = fusing.search_many([s.question for _, s, _ in turns], TOP)
            for name, found in (("last turn alone", alone), ("offline follow-up reading", read)):
                values = [conversation_found(answers, hits) for (_, _, answers), hits in zip(turns, found)]
                rows.append(
                    {
                        "set": f"conversations {split}, {name}",
                        "n": len(values),
                        "mode": mode,
                        "value": sum(values) / len(values),
                    }
                )
    return rows


def quality(args) -> None:
    from _machine import machine_line

    print(machine_line())
    modes = args.modes.split(",")
    print(f"\n| corpus | set | n | {' | '.join(modes)} |\n|---|---|---|{'---|' * len(modes)}")
    for item in args.index:
        corpus, path = item.split("=", 1)
        weights = tuple(float(w) for w in args.weights.split(",")) if args.weights else None
        rows = quality_rows(corpus, Path(path), modes, args.depth, weights, args.judged)
        for set_name in dict.fromkeys(r["set"] for r in rows):
            values = {r["mode"]: r for r in rows if r["set"] == set_name}
            best = max(v["value"] for v in values.values())
            cells = [
                f"**{values[m]['value']:.3f}**" if values[m]["value"] == best else f"{values[m]['value']:.3f}"
                for m in modes
            ]
            print(f"| {corpus} | {set_name} | {values[modes[0]]['n']} | {' | '.join(cells)} |", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "quality":
        parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--index", action="append", default=[], metavar="CORPUS=PATH")
        parser.add_argument("--modes", default="bm25,dense,hybrid")
        parser.add_argument("--depth", type=int, help="passages of each leg the fusion reads (default: typedrag's)")
        parser.add_argument("--weights", help="BM25,dense weights of the fusion (default: typedrag's, 1,1)")
        parser.add_argument(
            "--judged",
            action="store_true",
            help="conversations: count the passages judged since (data/conversations-judged.jsonl)",
        )
        quality(parser.parse_args(sys.argv[2:]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(SHARED / "corpora" / "enwiki-2015-core.jsonl.gz"))
    parser.add_argument("--index", type=Path, default=Path(tempfile.gettempdir()) / "typedrag-bench-index")
    parser.add_argument("--reuse", action="store_true", help="reuse --index if it exists instead of rebuilding")
    parser.add_argument("--queries", default=str(SHARED / "wiki-nfqa" / "*.jsonl"), help="glob of Wiki-NFQA files")
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--subset", type=int, default=100_000, help="passages for the rank-bm25 comparison (0: skip)")
    parser.add_argument("--bm25-queries", type=int, default=50)
    args = parser.parse_args()
    if args.subset:  # checked before the long index build, not after it
        require_or_exit("rank_bm25", "bench", "the rank-bm25 comparison (--subset 0 skips it)")

    machine_info()
    queries = load_queries(args.queries)
    print(f"corpus: {args.corpus}\nqueries: {len(queries)} Wiki-NFQA questions")
    if args.reuse and args.index.exists():
        manifest = json.loads((args.index / "manifest.json").read_text())
        print(
            f"\nreusing {args.index}: {manifest['counts']['passages']:,} passages, "
            f"built in {manifest['build_seconds']} s (peak RSS not measured)"
        )
    else:
        summary = build_index([args.corpus], args.index, show_progress=sys.stderr.isatty())
        print(
            f"\nbuilt {args.index}: {summary.documents:,} documents, {summary.passages:,} passages, "
            f"{summary.skipped} skipped, {summary.seconds:.1f} s, peak RSS {peak_rss_mb():,.0f} MB"
        )
    print(f"  index on disk: {disk_mb(args.index):,.0f} MB")
    bench_tantivy(args.index, queries, args.k)
    if args.subset:
        bench_rank_bm25(args.corpus, args.subset, queries, args.k, args.bm25_queries)
    print(f"\npeak RSS of the whole run: {peak_rss_mb():,.0f} MB")


if __name__ == "__main__":
    main()
