"""MiniLM's embedding rate against ONNX Runtime's own limit on this machine, in passages per CPU-second.

CPU-seconds, not wall time: the machine is shared, and a rate per CPU-second holds at any load (the load average
is printed beside it). Three ways over the same passages (the PostgreSQL manual's, or any folder's):

- `raw`: ONNX Runtime alone on token ids made beforehand, the session options given (spinning on or off, threads,
  batch): the limit, with nothing of typedrag around it;
- `typedrag`: `Embedder.encode` as a build calls it (tokenizing, pooling, normalising: all of it);
- per batch size and thread count, so `EMBED_BATCH` and `EMBED_THREADS` are chosen by measurement.

Every way's vectors are compared with those of the first, bit for bit.

    nice -n 10 python bench/bench_embed.py --source /usr/share/doc/postgresql-doc-15/html --passages 512
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time
from pathlib import Path

import numpy as np


def passages(source: Path, count: int) -> list[str]:
    from typedrag.corpus.chunker import iter_passages
    from typedrag.corpus.readers import iter_source_files, read_file
    from typedrag.embed import passage_input

    found: list[str] = []
    for file in iter_source_files([source], []):
        for doc in read_file(file, strict=False, problems=[]):
            for passage in iter_passages(doc, 100, lambda note: None):
                found.append(passage_input(passage.title, passage.text))
                if len(found) == count:
                    return found
    return found


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def raw(texts: list[str], batch: int, threads: int, spinning: bool) -> tuple[float, float, np.ndarray]:
    """(passages per CPU-second, per wall second, vectors): ONNX Runtime on pre-made token ids; pooling outside the clock."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from typedrag.embed import MAX_TOKENS, model_files

    onnx_path, tokenizer_path = model_files()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    feeds = []
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        encodings = tokenizer.encode_batch([texts[i] for i in chunk])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds.append((chunk, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}))
    session.run(None, feeds[0][1])  # warm
    hidden = []
    c0, w0 = cpu(), time.perf_counter()
    for _, feed in feeds:
        hidden.append(session.run(None, feed)[0])
    c1, w1 = cpu(), time.perf_counter()
    out = np.zeros((len(texts), 384), dtype=np.float32)
    for (chunk, feed), h in zip(feeds, hidden):
        weights = feed["attention_mask"][..., None].astype(np.float32)
        pooled = (h * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        out[chunk] = (pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)).astype(np.float32)
    return len(texts) / (c1 - c0), len(texts) / (w1 - w0), out


def typedrag_path(texts: list[str], batch: int, threads: int) -> tuple[float, float, np.ndarray]:
    from typedrag.embed import Embedder

    embedder = Embedder(threads=threads)
    embedder.encode(texts[:batch], batch)  # warm
    c0, w0 = cpu(), time.perf_counter()
    out = embedder.encode(texts, batch)
    c1, w1 = cpu(), time.perf_counter()
    return len(texts) / (c1 - c0), len(texts) / (w1 - w0), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=Path("/usr/share/doc/postgresql-doc-15/html"))
    parser.add_argument("--passages", type=int, default=512)
    parser.add_argument("--batches", default="8,16,32,64")
    parser.add_argument("--threads", default="2")
    parser.add_argument(
        "--rounds", type=int, default=2, help="each way run this many times, alternating; the best kept"
    )
    args = parser.parse_args()
    texts = passages(args.source, args.passages)
    print(
        f"{len(texts)} passages of {args.source}; {platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    )
    reference = None
    rows: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for threads in [int(t) for t in args.threads.split(",")]:
            for batch in [int(b) for b in args.batches.split(",")]:
                ways = {
                    f"raw spinning   b{batch:<3} t{threads}": lambda: raw(texts, batch, threads, True),
                    f"raw no spinning b{batch:<3} t{threads}": lambda: raw(texts, batch, threads, False),
                    f"typedrag        b{batch:<3} t{threads}": lambda: typedrag_path(texts, batch, threads),
                }
                for name, run in ways.items():
                    per_cpu, per_wall, vectors = run()
                    if reference is None:
                        reference = vectors
                    same = np.array_equal(vectors, reference)
                    rows.setdefault(name, []).append((per_cpu, per_wall))
                    print(
                        f"{name}: {per_cpu:6.1f} passages/CPU-s, {per_wall:6.1f}/s wall; bit-identical {same}; "
                        f"load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
    print("\nbest of each way (passages per CPU-second):")
    for name, values in rows.items():
        print(f"  {name}: {max(v[0] for v in values):6.1f}")


if __name__ == "__main__":
    main()
