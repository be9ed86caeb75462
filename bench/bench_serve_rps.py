"""`typedrag serve` plain-RAG requests per second at a given concurrency, for two checkouts side by side.

Each checkout's server is started on a free loopback port over the same index, and they take turns: a round of
`--requests` questions at `--concurrency` to one, then to the other, `--rounds` times, so both meet the same load.
A round's figure is requests per wall second and the server's CPU-seconds per request (from /proc), with the load
average beside it. The servers start fresh (their caches empty), as after a restart.

    python bench/bench_serve_rps.py --index IDX --old /work/main --new /work/wt-56 --concurrency 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_of(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def questions(postgres_only: bool) -> list[str]:
    found = []
    for line in (DATA / "conversations.jsonl").read_text(encoding="utf-8").splitlines():
        conversation = json.loads(line)
        if conversation["corpus"] == "postgres":
            found.extend(turn["user"] for turn in conversation["turns"])
    for name in () if postgres_only else ("keyterms-debian-handbook.jsonl", "keyterms-python-docs.jsonl"):  # any corpus
        for line in (DATA / name).read_text(encoding="utf-8").splitlines()[:40]:
            found.append(json.loads(line)["question"])
    return list(dict.fromkeys(found))


def start(checkout: str, index: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": checkout}
    server = subprocess.Popen(
        [sys.executable, "-m", "typedrag.cli", "serve", "--index", index, "--port", str(port), "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    import httpx

    for _ in range(600):  # until ready, or the server has died
        if server.poll() is not None:
            raise SystemExit(f"the server of {checkout} exited with {server.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return server, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.terminate()
    raise SystemExit(f"the server of {checkout} was not ready")


async def round_of(url: str, asked: list[str], concurrency: int) -> None:
    import httpx

    queue = list(asked)

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            question = queue.pop()
            response = await client.post(f"{url}/v1/answer", json={"question": question, "method": "rag"}, timeout=600)
            response.raise_for_status()
            if os.environ.get("BENCH_VERBOSE"):
                print(f"  {response.elapsed.total_seconds():.2f} s {question[:50]!r}: {response.json()['answer'][:60]!r}", flush=True)

    async with httpx.AsyncClient() as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True)
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--postgres-only", action="store_true", help="only the PostgreSQL questions (22)")
    args = parser.parse_args()
    pool = questions(args.postgres_only)
    servers = {name: start(path, args.index) for name, path in (("old", args.old), ("new", args.new))}
    figures: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
    try:
        for number in range(args.rounds):
            asked = [pool[(number * args.requests + i) % len(pool)] for i in range(args.requests)]
            for name, (server, url) in servers.items():
                cpu0, started = cpu_of(server.pid), time.perf_counter()
                asyncio.run(round_of(url, asked, args.concurrency))
                seconds, cpu = time.perf_counter() - started, cpu_of(server.pid) - cpu0
                figures[name].append((args.requests / seconds, cpu / args.requests))
                print(f"round {number + 1} {name}: {args.requests / seconds:.2f} requests/s, {cpu / args.requests:.3f} CPU-s a "
                      f"request; load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait(timeout=30)
    old, new = figures["old"], figures["new"]
    print(f"requests/s at concurrency {args.concurrency}: old p50 {statistics.median(r for r, _ in old):.2f}, new p50 "
          f"{statistics.median(r for r, _ in new):.2f} ({statistics.median(r for r, _ in new) / statistics.median(r for r, _ in old):.1f}x); "
          f"CPU-s a request old {statistics.median(c for _, c in old):.3f}, new {statistics.median(c for _, c in new):.3f} "
          f"({statistics.median(c for _, c in old) / statistics.median(c for _, c in new):.1f}x less)")


if __name__ == "__main__":
    main()
