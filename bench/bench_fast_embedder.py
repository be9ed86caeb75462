"""The faster MiniLM ("minilm-fast", typedrag.embed_model.quantize) against MiniLM on the same passages: passages per
CPU-second (one text per run and batches of 8) and how far its vectors are from MiniLM's (cosine), side by side,
round after round (the machine is shared: the load is printed beside each round).

    nice -n 10 python bench/bench_fast_embedder.py --passages 256 --rounds 2

Retrieval with each embedder is `bench/bench_retrieval.py quality` over indexes built with `--embedder minilm-fast`
and with the default (docs/lab/2026-12-06-fast-embedder.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402
from bench_embed import passages  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=Path("/usr/share/doc/postgresql-doc-15/html"))
    parser.add_argument("--passages", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from typedrag.embed import embedder_for

    print(machine_line())
    texts = passages(args.source, args.passages)
    minilm, fast = embedder_for("minilm"), embedder_for("minilm-fast")
    for _ in range(args.rounds):
        started = time.process_time()
        base = minilm.encode(texts)
        rate = len(texts) / (time.process_time() - started)
        cells = [f"minilm {rate:.1f} passages/CPU-s"]
        for batch in (1, 8):
            started = time.process_time()
            vectors = fast.encode(texts, batch)
            cosine = (vectors * base).sum(axis=1)
            cells.append(
                f"minilm-fast (batch {batch}) {len(texts) / (time.process_time() - started):.1f} passages/CPU-s, "
                f"cosine to minilm mean {cosine.mean():.4f} min {cosine.min():.4f}"
            )
        print("; ".join(cells) + f"; load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
