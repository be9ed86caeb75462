"""One process vs a Ray cluster, stage by stage: reading, chunking, embedding; then a whole `index --ray` into Milvus.

Single process, one core: reading (parse every file, blocks consumed), chunking (the chunker over the parsed
documents) and embedding (`typedrag.embed`'s embedder, one intra-op thread, then its default two) timed
apart. On the cluster at `--ray`: the same stages as Ray Data jobs (read only; read + chunk + Milvus rows, as
`index --ray` runs them; embedding in an actor pool of `--actors`). Then, if `--uri` is given, a whole dense
build of `--e2e-source` in one process and on the cluster. Per-core rates feed the paper estimates in
docs/lab/2026-12-02-ray.md.

    python bench/bench_ray.py --ray 127.0.0.1:6379 --source /usr/share/doc/postgresql-doc-15/html \
        --embed-passages 2000 --uri http://127.0.0.1:19530 --e2e-source /usr/share/doc/python3.11/html/tutorial
"""

from __future__ import annotations

import argparse
import sys
import time

from _machine import machine_line

from typedrag.corpus.chunker import iter_passages
from typedrag.corpus.readers import read_file
from typedrag.index.ingest import scan
from typedrag.records import Document


def timed(function):
    started = time.perf_counter()
    value = function()
    return value, time.perf_counter() - started


def cpu_timed(function):
    """Wall and CPU seconds of this process (the machine is shared: CPU seconds give per-core rates under load)."""
    started, cpu = time.perf_counter(), time.process_time()
    value = function()
    return value, time.perf_counter() - started, time.process_time() - cpu


def parse_all(files) -> list[Document]:
    documents = []
    for scanned in files:
        for doc in read_file(scanned.file, strict=False, problems=[]):
            blocks = list(doc.iter_blocks())
            documents.append(Document(doc.doc_id, doc.title, doc.text, doc.source, blocks=blocks))
    return documents


def chunk_all(documents: list[Document], words: int) -> list[str]:
    return [
        p.text
        for doc in documents
        for p in iter_passages(
            Document(doc.doc_id, doc.title, doc.text, doc.source, blocks=list(doc.blocks or [])), words
        )
    ]


def _read_only(item: dict) -> dict:
    from typedrag.index.milvus.ray_workers import rebuild_scanned

    scanned = rebuild_scanned(item)
    blocks = sum(len(list(doc.iter_blocks())) for doc in read_file(scanned.file, strict=False, problems=[]))
    return {"blocks": blocks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ray", required=True, help="the cluster's address")
    parser.add_argument("--source", required=True, help="a folder read and chunked (reading and chunking rates)")
    parser.add_argument("--embed-passages", type=int, default=2000, help="passages of it embedded (embedding rates)")
    parser.add_argument("--actors", type=int, default=0, help="embedding actors on the cluster (default: its CPUs)")
    parser.add_argument("--uri", help="a Milvus server, for the whole build in one process and on the cluster")
    parser.add_argument("--e2e-source", help="the folder built whole (dense) into --uri")
    args = parser.parse_args()

    import ray

    from typedrag.embed import Embedder
    from typedrag.index.milvus.ray import connect
    from typedrag.index.milvus.ray_job import item_of
    from typedrag.index.milvus.ray_ledger import RayRun
    from typedrag.index.milvus.ray_workers import EMBED_BATCH, Embed, configured, read_chunk

    print(machine_line())
    problems: list = []
    files = scan([args.source], problems)
    megabytes = sum(s.size for s in files) / 1e6
    documents, read_s, read_cpu = cpu_timed(lambda: parse_all(files))
    texts, chunk_s, chunk_cpu = cpu_timed(lambda: chunk_all(documents, 100))
    sample = texts[: args.embed_passages]
    one = Embedder(threads=1)
    one.encode(sample[:8])
    _, embed1_s, embed1_cpu = cpu_timed(lambda: one.encode(sample))
    two = Embedder(threads=2)
    two.encode(sample[:8])
    _, embed2_s, embed2_cpu = cpu_timed(lambda: two.encode(sample))
    print(
        f"source: {args.source}: {len(files):,} files, {megabytes:,.1f} MB, {len(documents):,} documents, {len(texts):,} passages"
    )
    print("single process: wall s, CPU s, rate per CPU-second")
    print(
        f"  reading   {read_s:7.1f} s {read_cpu:7.1f} cpu-s  {len(files) / read_cpu:8.1f} files  {megabytes / read_cpu:6.2f} MB"
    )
    print(f"  chunking  {chunk_s:7.1f} s {chunk_cpu:7.1f} cpu-s  {len(texts) / chunk_cpu:8.1f} passages")
    print(
        f"  embedding {embed1_s:7.1f} s {embed1_cpu:7.1f} cpu-s  {len(sample) / embed1_cpu:8.1f} passages ({len(sample):,}, 1 thread)"
    )
    print(
        f"  embedding {embed2_s:7.1f} s {embed2_cpu:7.1f} cpu-s  {len(sample) / embed2_cpu:8.1f} passages (2 threads; "
        f"{len(sample) / embed2_s:.1f} passages per wall second)"
    )

    run = RayRun()
    connect(args.ray, run)
    actors = args.actors or run.cpus
    print(f"ray cluster at {args.ray}: {run.nodes} nodes, {run.cpus} CPUs")
    items = [item_of(n, s) for n, s in enumerate(files)]

    def read_job():
        return ray.data.from_items(items, override_num_blocks=len(items)).map(_read_only, num_cpus=1).count()

    def chunk_job():
        ds = ray.data.from_items(items, override_num_blocks=len(items))
        return ds.flat_map(
            read_chunk, fn_kwargs=dict(passage_words=100, generation=1, taken={}, carrier={}), num_cpus=1
        ).count()

    def embed_job():
        ds = ray.data.from_items(
            [{"kind": "passage", "title": "", "text": t} for t in sample],
            override_num_blocks=max(1, len(sample) // EMBED_BATCH),
        )
        embedder = configured(Embed, embedder="minilm", carrier={})
        return ds.map_batches(
            embedder,
            batch_size=EMBED_BATCH,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=1,
        ).count()

    _, ray_read_s = timed(read_job)
    rows, ray_chunk_s = timed(chunk_job)
    _, ray_embed_s = timed(embed_job)
    print("ray (whole jobs, start-up included):")
    print(
        f"  reading          {ray_read_s:7.1f} s  {len(files) / ray_read_s:8.1f} files/s  {megabytes / ray_read_s:6.2f} MB/s"
    )
    print(
        f"  reading+chunking {ray_chunk_s:7.1f} s  {(rows - len(files)) / ray_chunk_s:8.1f} passages/s (Milvus rows, terms stemmed)"
    )
    print(f"  embedding        {ray_embed_s:7.1f} s  {len(sample) / ray_embed_s:8.1f} passages/s ({actors} actors)")

    if args.uri and args.e2e_source:
        from typedrag.index.milvus.ray import sync_milvus_index_on_ray
        from typedrag.index.milvus import build_milvus_index

        stamp = int(time.time())
        single, single_s = timed(
            lambda: build_milvus_index(
                [args.e2e_source], args.uri, f"bench_one_{stamp}", retrieval="hybrid", show_progress=False
            )
        )
        on_ray = RayRun()
        _, ray_s = timed(
            lambda: sync_milvus_index_on_ray(
                [args.e2e_source],
                args.uri,
                f"bench_ray_{stamp}",
                address=args.ray,
                retrieval="hybrid",
                show_progress=False,
                embed_actors=actors,
                run=on_ray,
            )
        )
        print(f"whole dense build of {args.e2e_source} ({single.passages:,} passages) into Milvus Lite:")
        print(f"  one process {single_s:7.1f} s  {single.passages / single_s:6.1f} passages/s")
        print(f"  ray         {ray_s:7.1f} s  {on_ray.passages / ray_s:6.1f} passages/s  ({on_ray.line()})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
