"""CPU per offline answer against the search-plus-reader floor, and the answers themselves, for two checkouts.

Each question is answered twice in one process, per method (`rag`, `typed`): first as a new `typedrag ask` process
would (MiniLM's in-process cache emptied), then again with the cache emptied once more, every sentence of the
passages now in the index's kept store (built with the index, or kept by the first answer): what is left is the
search (the query's embedding, BM25, the dense leg, fusion), the reader and the rest of the flow, the floor an
answer cannot go below without changing what it does (issue 56's "search-plus-reader floor"). The figure
is the first's CPU-seconds over the floor's (CPU, not wall time: the machine is shared). A process's one-time
loads (py3langid's model, read the first time a question names something no passage holds: about 0.6 CPU-s) fall
in whichever first answer needs them: the medians are the figures. Every answer (without its timings) goes to `--out`, so two checkouts' answers can be diffed:

    PYTHONPATH=/work/main   python bench/bench_answer_cpu.py --index IDX --out old.jsonl
    PYTHONPATH=/work/wt-56  python bench/bench_answer_cpu.py --index IDX --out new.jsonl
    cmp old.jsonl new.jsonl && echo identical

Questions: the PostgreSQL questions of bench/data/conversations.jsonl (every turn read alone) and
bench/data/postgres-questions.txt if present, or `--questions FILE` (one a line).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
RUN_TO_RUN = {"latency_ms", "queued_ms", "timings_ms"}


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stable(data):
    if isinstance(data, dict):
        return {k: stable(v) for k, v in data.items() if k not in RUN_TO_RUN}
    if isinstance(data, list):
        return [stable(v) for v in data]
    return data


def questions(path: Path | None) -> list[str]:
    if path is not None:
        return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    found = []
    for line in (DATA / "conversations.jsonl").read_text(encoding="utf-8").splitlines():
        conversation = json.loads(line)
        if conversation["corpus"] == "postgres":
            found.extend(turn["user"] for turn in conversation["turns"])
    return list(dict.fromkeys(found))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--questions", type=Path)
    parser.add_argument("--methods", default="rag,typed")
    args = parser.parse_args()

    import typedrag
    from typedrag.config import load_settings
    from typedrag.embed import default_embedder
    from typedrag.factory import Resources, build_pipeline

    pipeline = build_pipeline(load_settings({"index": args.index}), Resources())
    embedder = default_embedder()
    asked = questions(args.questions)
    await pipeline.answer(asked[0], "rag")  # load what every process loads once (models, the index)
    print(
        f"typedrag at {Path(typedrag.__file__).parent}; {len(asked)} questions; load {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    with args.out.open("w", encoding="utf-8") as out:
        for method in args.methods.split(","):
            first, floor = [], []
            for question in asked:
                embedder._cache.clear()
                started = cpu()
                result = await pipeline.answer(question, method)
                first.append(cpu() - started)
                embedder._cache.clear()
                started = cpu()
                await pipeline.answer(question, method)
                floor.append(cpu() - started)
                data = stable(result.model_dump(mode="json"))
                out.write(json.dumps({"question": question, "method": method, "result": data}, sort_keys=True) + "\n")
            ratio = [a / b for a, b in zip(first, floor)]
            print(
                f"{method}: CPU per answer p50 {statistics.median(first):.3f} s (mean {statistics.mean(first):.3f}), floor p50 "
                f"{statistics.median(floor):.3f} s; ratio p50 {statistics.median(ratio):.2f}, of the sums "
                f"{sum(first) / sum(floor):.2f}; load {os.getloadavg()[0]:.1f}",
                file=sys.stderr,
                flush=True,
            )


if __name__ == "__main__":
    asyncio.run(main())
