"""`typedrag serve` with the store on and off (issue 52): answer latency one at a time, and requests per second under a
bounded concurrent load, on loopback, offline engine, plain RAG over a small BM25 index.

Three servers on free ports, started together and taking turns (`--rounds`, the order rotating each round, so each
meets the same machine load), each asked the same questions; a figure is the median over the rounds, a ratio the
median of each round's ratio:
- off: `serve --index IDX`, questions to /v1/answer, no accounts;
- sqlite: `serve --index IDX --database sqlite:///TMP/store.db`, a user's key; each question in a conversation of its
  own, made beforehand and not timed (POST /v1/conversations/{id}/answer: the key checked, the grants read, the
  conversation and its history read, the question and answer kept in one transaction);
- postgresql: the same on a PostgreSQL database (--postgres URL of a server whose user may create databases, or
  TYPEDRAG_TEST_POSTGRES_URL; without one it is left out).

    python bench/bench_serve_store.py [--index IDX] [--rounds 5] [--latency 15] [--requests 30] [--concurrency 4] [--out FILE]

Without --index a small index of the test corpus (tests/conftest.py) is built in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _serve import free_port, wait_ready  # bench/, the script's own folder

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
QUESTIONS = [
    "Why did the Western Roman Empire fall?",
    "What is the difference between a crocodile and an alligator?",
    "How do I make bread rise?",
    "Why is the sky blue?",
    "What are the pros and cons of nuclear power?",
]


def small_index(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import write_corpus

    from typedrag.index import build_index

    corpus = write_corpus(folder / "corpus.jsonl")
    build_index([corpus], folder / "index", passage_words=40, show_progress=False)
    return folder / "index"


def start(index: Path, database: str | None, folder: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "typedrag.cli",
        "serve",
        "--index",
        str(index),
        "--llm",
        "offline",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ] + (["--database", database] if database else [])
    env = {k: v for k, v in os.environ.items() if k not in ("TYPEDRAG_SERVER_API_KEY", "TYPEDRAG_CONFIG")}
    env.update(PYTHONPATH=str(ROOT), TYPEDRAG_CACHE_DIR=str(folder / "cache"))
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_ready(server, url, f"the server ({database or 'no store'})", tries=1200)
    return server, url


async def one(client: httpx.AsyncClient, conversation: str | None, question: str) -> float:
    """One question, timed: in `conversation` (made beforehand, untimed) or, with none, to /v1/answer."""
    began = time.perf_counter()
    if conversation is not None:
        response = await client.post(
            f"/v1/conversations/{conversation}/answer", json={"question": question, "method": "rag"}
        )
    else:
        response = await client.post("/v1/answer", json={"question": question, "method": "rag"})
    response.raise_for_status()
    return time.perf_counter() - began


async def round_of(url: str, key: str | None, latency_n: int, requests: int, concurrency: int) -> dict:
    """One round on one server: `latency_n` questions one at a time, then `requests` at `concurrency`."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=600) as client:

        async def fresh() -> str | None:  # each question in a conversation of its own: the same history (none) as off
            return (await client.post("/v1/conversations", json={})).json()["id"] if key else None

        conversations = [await fresh() for _ in range(1 + latency_n + requests)]
        await one(client, conversations.pop(), QUESTIONS[0])  # warm: the connection, the key's check
        latencies = [await one(client, conversations.pop(), QUESTIONS[n % len(QUESTIONS)]) for n in range(latency_n)]
        queue = list(range(requests))

        async def worker() -> None:
            while queue:
                n = queue.pop()
                await one(client, conversations.pop(), QUESTIONS[n % len(QUESTIONS)])

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - began
    return {"median_s": statistics.median(latencies), "rps": requests / wall, "load": os.getloadavg()[0]}


def with_user(database: str) -> str:
    from typedrag.store import open_store

    store = open_store(database)
    try:
        store.add_user("bench", "admin")
        return store.create_key("bench").secret
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index")
    parser.add_argument("--postgres", default=os.environ.get("TYPEDRAG_TEST_POSTGRES_URL"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=int, default=15)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-serve-store-"))
    index = Path(args.index) if args.index else small_index(folder)
    modes: list[tuple[str, str | None]] = [("off", None), ("sqlite", f"sqlite:///{folder / 'store.db'}")]
    pg_name = None
    if args.postgres:
        import psycopg

        pg_name = f"bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(args.postgres, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{pg_name}"')
        modes.append(("postgresql", args.postgres.rsplit("/", 1)[0] + "/" + pg_name))
    servers: dict[str, tuple[subprocess.Popen, str, str | None]] = {}
    rounds: list[dict[str, dict]] = []
    try:
        for name, database in modes:
            key = with_user(database) if database else None
            server, url = start(index, database, folder)
            servers[name] = (server, url, key)
        for number in range(args.rounds):  # the servers take turns, in a rotating order: each meets the same load
            order = [name for name, _ in modes]
            order = order[number % len(order) :] + order[: number % len(order)]
            this = {}
            for name in order:
                _, url, key = servers[name]
                this[name] = asyncio.run(round_of(url, key, args.latency, args.requests, args.concurrency))
            rounds.append(this)
            print(f"round {number + 1}", json.dumps(this), flush=True)
    finally:
        for server, _, _ in servers.values():
            server.terminate()
            server.wait(60)
        if pg_name:
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
    summary = {}
    for name, _ in modes:
        summary[name] = {
            "median_s": statistics.median(r[name]["median_s"] for r in rounds),
            "rps": statistics.median(r[name]["rps"] for r in rounds),
            "latency_ratio_to_off": statistics.median(r[name]["median_s"] / r["off"]["median_s"] for r in rounds),
            "rps_ratio_to_off": statistics.median(r[name]["rps"] / r["off"]["rps"] for r in rounds),
        }
    loads = [r[name]["load"] for r in rounds for name in r]
    result = {"rounds": rounds, "summary": summary, "load": [min(loads), max(loads)]}
    print(json.dumps(summary, indent=1), "load", result["load"])
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
