"""Benchmark the shipped question-type classifier: cold load, per-question latency, batch throughput.

    python bench/bench_classifier.py [--data-dir ../shared/data] [--repeats 3]
    python bench/bench_classifier.py --agreement [--data-dir ../shared/data]

`--agreement` instead reports what the shipped model routes on (model + phrasing rules): NF-CATS valid
macro-F1, and agreement with the labels of the technical question sets in bench/data (the leave-one-manual-out
figures need refits: `python -m typedrag.classify.train ... --loco`, see the model card).

Questions come from NF-CATS valid (single-question latency) and Wiki-NFQA (batch), each used once,
because the embedder caches texts it has seen. Load time is measured in fresh processes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
COLD_LOAD = """
import json, time
t0 = time.perf_counter()
from typedrag.embed import default_embedder
embedder = default_embedder()
t1 = time.perf_counter()
from typedrag.classify.shipped import ShippedClassifier
ShippedClassifier(embedder=embedder)
t2 = time.perf_counter()
print(json.dumps({"embedder": t1 - t0, "weights": t2 - t1, "total": t2 - t0}))
"""


def machine() -> str:
    import numpy
    import onnxruntime

    cpuinfo = Path("/proc/cpuinfo")
    models = (
        [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        if cpuinfo.exists()
        else []
    )
    cpu = models[0] if models else platform.processor()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{platform.platform()} | {cpu} | {os.cpu_count()} cores | load avg {load}\n"
        f"Python {platform.python_version()} | numpy {numpy.__version__} | onnxruntime {onnxruntime.__version__}"
    )


def cold_load(repeats: int) -> dict[str, float]:
    """Median seconds over `repeats` fresh processes: embedder, classifier weights, both (imports included)."""
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", COLD_LOAD], cwd=ROOT, capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def percentiles(seconds: list[float]) -> str:
    ms = np.array(seconds) * 1000
    return f"p50 {np.percentile(ms, 50):.2f} ms, p95 {np.percentile(ms, 95):.2f} ms (n={len(ms)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--single", type=int, default=300, help="questions timed one at a time")
    parser.add_argument("--agreement", action="store_true", help="agreement with labels instead of speed")
    args = parser.parse_args()
    if args.agreement:
        return agreement(args.data_dir)
    if not (args.data_dir / "nfcats" / "valid.csv").exists():
        raise SystemExit(f"needs NF-CATS and Wiki-NFQA under {args.data_dir}")

    from typedrag.classify.shipped import ShippedClassifier
    from typedrag.classify.train import read_split
    from typedrag.embed import Embedder

    print(machine())
    load = cold_load(args.repeats)
    print(
        f"cold load (new process, median of {args.repeats}): embedder {load['embedder']:.3f} s, "
        f"classifier weights {load['weights']:.3f} s, total {load['total']:.3f} s"
    )

    valid, _ = read_split(args.data_dir / "nfcats" / "valid.csv")
    wiki = [
        json.loads(line)["question_text"]
        for path in sorted((args.data_dir / "wiki-nfqa").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line
    ]
    for threads in (1, 2):
        classifier = ShippedClassifier(embedder=Embedder(threads=threads))
        classifier.classify("warm up the session?")
        total, features = [], []
        for question in valid[: args.single]:
            t0 = time.perf_counter()
            classifier.classify(question)
            total.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            classifier.features(question)
            features.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        classifier.classify_many(wiki)
        batch = time.perf_counter() - t0
        print(
            f"{threads} thread(s): one question {percentiles(total)}; of which TF-IDF features {percentiles(features)}"
        )
        print(
            f"{threads} thread(s): batch of {len(wiki)} Wiki-NFQA questions {batch:.2f} s = {len(wiki) / batch:.0f} questions/s"
        )


def agreement(data_dir: Path) -> None:
    """Valid macro-F1 with the rules, and agreement on each labelled set in bench/data."""
    from collections import Counter

    from typedrag.classify.shipped import load_default_classifier
    from typedrag.classify.train import read_external, read_split, read_technical, scores

    classifier = load_default_classifier()
    classes = [c.value for c in classifier.classes]
    questions, labels = read_split(data_dir / "nfcats" / "valid.csv")
    routed = [str(p.label) for p in classifier.classify_many(questions)]
    print(
        f"{classifier.name}: NF-CATS valid macro-F1 with the rules {scores(routed, classes, labels)['macro_f1']:.4f} (n={len(labels)})"
    )
    sets = {"question-types (trained on)": read_technical(ROOT / "bench" / "data" / "question-types.jsonl")}
    sets.update({path.stem: read_external(path) for path in sorted((ROOT / "bench" / "data").glob("keyterms*.jsonl"))})
    for name, rows in sets.items():
        predicted = [str(p.label) for p in classifier.classify_many([r.question for r in rows])]
        right = [p == r.label for p, r in zip(predicted, rows)]
        misses = Counter((r.label, p) for p, r in zip(predicted, rows) if p != r.label).most_common(3)
        print(f"{name:30s} agreement {sum(right) / len(rows):.3f} (n={len(rows)}); most confused: {misses}")


if __name__ == "__main__":
    main()
