"""Peak memory of `typedrag ask` when the model's server sends replies far longer than asked for (issue 57 P9).

A loopback OpenAI-protocol server (typedrag.testing.openai_stub) answers every request with a reply of `--mb`
megabytes (a server that ignores max_tokens); `typedrag ask` runs in a child process against it, plain RAG over a
small index it builds first, and the child's peak resident memory is printed (ru_maxrss):

    python bench/bench_reply_size.py [--mb 24]
    PYTHONPATH=/path/to/other/checkout python bench/bench_reply_size.py
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

from typedrag.index import build_index  # noqa: E402
from typedrag.testing.openai_stub import OpenAIStubServer, Reply  # noqa: E402

CLI = [sys.executable, "-c", "from typedrag.cli import main; main()"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=24)
    args = parser.parse_args()
    print(machine_line())
    reply = "comet " * (args.mb * 2**20 // 6)
    with tempfile.TemporaryDirectory() as folder, OpenAIStubServer(lambda request: Reply(content=reply)) as server:
        docs = Path(folder) / "docs"
        docs.mkdir()
        (docs / "comets.txt").write_text(
            "Comets have tails because sunlight heats their ice, which releases gas and dust.\n"
        )
        build_index([docs], Path(folder) / "index", show_progress=False, retrieval="bm25")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))}
        run = subprocess.run(
            [
                *CLI,
                "ask",
                "Why do comets have tails?",
                "--index",
                str(Path(folder) / "index"),
                "--method",
                "rag",
                "--llm",
                "stub-model",
                "--base-url",
                server.base_url,
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(
            f"replies of {args.mb} MB, {len(server.requests)} requests: exit {run.returncode}, "
            f"answer of {len(run.stdout):,} characters of JSON, peak RSS of `typedrag ask` {peak:,.0f} MiB"
        )
        if run.returncode:
            print(run.stderr[-500:])


if __name__ == "__main__":
    main()
