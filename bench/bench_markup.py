"""CPU-seconds the Markdown and reStructuredText readers spend on pathological inline markup (issue 57 P3).

Each input is written to a file, read and cut into passages as `typedrag index` does it (`iter_documents`, then
`iter_passages`), in a process of its own with a CPU-time limit (`--limit`, 120 s by default: a reader still busy then is shown as "> limit"), so a
reader that is quadratic on one input does not hold the others up. The figures are CPU-seconds of that process,
not wall time: the machine is shared.

    python bench/bench_markup.py [--limit 120] [--only md-brackets]
    PYTHONPATH=/path/to/other/checkout python bench/bench_markup.py
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

KB = 1024
# name: (syntax, text). Inline patterns are read per block, so each input is one long line or paragraph.
INPUTS = {
    "md-brackets": ("markdown", "# Brackets\n\n" + "[" * 150_000 + "\n"),  # the reproduction
    "md-brackets-100k": ("markdown", "[" * 100 * KB + "\n"),
    "md-image-openers": ("markdown", "![" * 50 * KB + "\n"),
    "md-link-openers": ("markdown", "[a](" * 25 * KB + "\n"),
    "md-reference-labels": ("markdown", "[a]: /url\n\n" + "[a][" * 25 * KB + "\n"),
    "md-footnote-openers": ("markdown", "[^" * 50 * KB + "\n"),
    "md-definitions-1mb": ("markdown", ("[label]: " + "x" * 1000 + " junk\n") * 1000),
    "md-heading-spaces": ("markdown", "# a" + " " * 60 * KB + "b\n\nBody text.\n"),
    "md-comment-openers": ("markdown", "# Comments\n\n" + "<!--" * 20 * KB + "\n"),
    "rst-targets-1mb": ("rst", ("`<" * 8 * KB + "\n\n") * 64),
    "rst-roles-1mb": ("rst", (":a:`" + " " * 16 * KB + "\n\n") * 64),
    "rst-links-1mb": ("rst", ("`" + " " * 16 * KB + "<\n\n") * 64),
    "rst-literals-1mb": ("rst", ("``a" * 5 * KB + "\n\n") * 64),
}


def run_one(syntax: str, path: str) -> None:
    from typedrag.corpus import iter_documents
    from typedrag.corpus.chunker import iter_passages

    problems: list = []
    for document in iter_documents([path], problems=problems):
        sum(len(passage.text) for passage in iter_passages(document))
    if problems:
        raise SystemExit(f"problems: {problems}")


def measure(name: str, limit: int) -> str:
    syntax, text = INPUTS[name]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / ("input.md" if syntax == "markdown" else "input.rst")
        path.write_text(text, encoding="utf-8")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = subprocess.run(
            [sys.executable, __file__, "--child", syntax, str(path)],
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5)),
            capture_output=True,
            text=True,
            env=os.environ,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if run.returncode != 0:
        return f"> {limit} (killed)" if run.returncode < 0 else f"failed: {run.stderr.strip().splitlines()[-1:]}"
    return f"{seconds:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=120, help="CPU-seconds allowed per input")
    parser.add_argument("--only", action="append", help="an input's name (repeatable)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_one(*args.child)
        return
    print(machine_line())
    print(f"{'input':24} {'size':>9}  CPU-s")
    for name in args.only or INPUTS:
        size = len(INPUTS[name][1].encode())
        print(f"{name:24} {size / KB:>7.0f} K  {measure(name, args.limit)}", flush=True)


if __name__ == "__main__":
    main()
