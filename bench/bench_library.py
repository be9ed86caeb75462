"""Collections on `typedrag serve --data`: ingestion through the API against `typedrag index` on the same files,
and answer latency while a collection ingests against idle.

1. Copies the first N pages of a Debian HTML manual (PostgreSQL's by default) into a scratch folder.
2. `typedrag index` builds an index of them (a fresh process, timed from start to exit).
3. `typedrag serve --data` (a fresh process) gets a collection; all N files are uploaded in one multipart request,
   timed from the request's start until the collection's documents are all indexed (the page's own polling).
4. Questions about the manual are asked in that collection, one at a time, idle; then again while a second
   collection ingests the same files with passage vectors (hybrid: the embedding keeps a core busy), counting
   only the answers that began and ended while it ingested.

    nice -n 10 python bench/bench_library.py [--manual /usr/share/doc/postgresql-doc-15/html] [--files 300] [--retrieval bm25]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

QUESTIONS = [
    "Why should VACUUM be run regularly?",
    "How do I recover disk space used by deleted rows?",
    "What is the difference between a B-tree and a hash index?",
    "How do I create a table with a primary key?",
    "Why does PostgreSQL need transaction ID wraparound protection?",
    "How do I grant a user read access to a table?",
]
CLI = [sys.executable, "-c", "from typedrag.cli import app; app()"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def settled(url: str, name: str, files: int) -> dict:
    while True:
        listing = httpx.get(f"{url}/v1/collections/{name}/documents", timeout=60).json()
        statuses = [d["status"] for d in listing["documents"]]
        if (
            len(statuses) == files
            and all(s in ("indexed", "failed") for s in statuses)
            and listing["collection"]["state"] == "ready"
        ):
            return listing
        time.sleep(0.2)


def upload(url: str, name: str, files: list[Path]) -> None:
    response = httpx.post(
        f"{url}/v1/collections/{name}/documents",
        files=[("files", (f.name, f.read_bytes())) for f in files],
        timeout=600,
    )
    response.raise_for_status()


def ask_all(url: str, name: str, rounds: int, while_busy: str | None = None) -> list[float]:
    """Latencies (s) of each question, `rounds` times; with `while_busy`, only those asked and answered while that
    collection ingested."""
    seconds = []
    for _ in range(rounds):
        for question in QUESTIONS:
            if (
                while_busy
                and httpx.get(f"{url}/v1/collections/{while_busy}", timeout=60).json()["state"] != "ingesting"
            ):
                return seconds
            started = time.perf_counter()
            response = httpx.post(f"{url}/v1/collections/{name}/answer", json={"question": question}, timeout=600)
            response.raise_for_status()
            took = time.perf_counter() - started
            if (
                while_busy
                and httpx.get(f"{url}/v1/collections/{while_busy}", timeout=60).json()["state"] != "ingesting"
            ):
                return seconds
            seconds.append(took)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manual", type=Path, default=Path("/usr/share/doc/postgresql-doc-15/html"))
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--retrieval", default="bm25", choices=["bm25", "hybrid"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(machine_line())
    scratch = Path(tempfile.mkdtemp(prefix="typedrag-bench-library-"))
    server = None
    try:
        source = scratch / "src"
        source.mkdir()
        files = sorted(args.manual.glob("*.html"))[: args.files]
        for f in files:
            shutil.copy(f, source / f.name)
        copied = sorted(source.iterdir())
        size = sum(f.stat().st_size for f in copied)
        print(f"{len(copied)} pages of {args.manual} ({size / 1e6:.1f} MB), retrieval {args.retrieval}")

        load = os.getloadavg()[0]
        started = time.perf_counter()
        subprocess.run(
            [*CLI, "index", str(source), "--index", str(scratch / "cli-index"), "--retrieval", args.retrieval],
            check=True,
            capture_output=True,
        )
        cli_seconds = time.perf_counter() - started
        print(f"typedrag index: {cli_seconds:.1f} s ({len(copied) / cli_seconds:.1f} files/s), load {load:.2f}")

        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        server = subprocess.Popen(
            [*CLI, "serve", "--data", str(scratch / "data"), "--port", str(port), "--log-level", "warning"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        httpx.post(f"{url}/v1/collections", json={"name": "docs", "retrieval": args.retrieval}).raise_for_status()
        load = os.getloadavg()[0]
        started = time.perf_counter()
        upload(url, "docs", copied)
        listing = settled(url, "docs", len(copied))
        api_seconds = time.perf_counter() - started
        info = listing["collection"]
        print(
            f"API upload + ingestion: {api_seconds:.1f} s ({len(copied) / api_seconds:.1f} files/s; the sync itself "
            f"{info['last_ingestion']['seconds']:.1f} s), {info['passages']:,} passages, load {load:.2f}"
        )
        print(f"ratio API / typedrag index: {api_seconds / cli_seconds:.2f}")

        httpx.post(
            f"{url}/v1/collections/docs/answer", json={"question": QUESTIONS[0]}, timeout=600
        ).raise_for_status()  # warm
        load = os.getloadavg()[0]
        idle = ask_all(url, "docs", args.rounds)
        print(
            f"answers idle: median {statistics.median(idle) * 1000:.0f} ms over {len(idle)} (typed, offline), load {load:.2f}"
        )
        httpx.post(f"{url}/v1/collections", json={"name": "busy", "retrieval": "hybrid"}).raise_for_status()
        upload(url, "busy", copied)
        while httpx.get(f"{url}/v1/collections/busy", timeout=60).json()["state"] != "ingesting":
            time.sleep(0.1)
        load = os.getloadavg()[0]
        busy = ask_all(url, "docs", args.rounds, while_busy="busy")
        progress = httpx.get(f"{url}/v1/collections/busy", timeout=60).json()
        print(
            f"answers while 'busy' ingests ({(progress['progress'] or {}).get('phase', 'done')} at the end): median "
            f"{statistics.median(busy) * 1000:.0f} ms over {len(busy)}, load {load:.2f} → {os.getloadavg()[0]:.2f}"
        )
        print(f"ratio ingesting / idle: {statistics.median(busy) / statistics.median(idle):.2f}")
    finally:
        if server is not None:
            server.terminate()
            server.wait(60)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
