"""`typedrag serve` plain-RAG requests per second at given concurrencies, for two checkouts (or more) side by side.

Each checkout's server is started on a free loopback port over the same index (or each over its own:
`--server NAME=CHECKOUT,INDEX`, repeatable), and they take turns: a round of `--requests` questions at each
`--concurrency` to one, then to the next, `--rounds` times, so all meet the same load. A round's figure is requests
per wall second and the server's CPU-seconds per request (from /proc), with the load average beside it; each
server's resident memory is read when it is ready and at the end (VmRSS, and VmHWM its peak). The servers start
fresh (their caches empty), as after a restart. `--distinct` asks no question twice of a server.

    python bench/bench_serve_rps.py --index IDX --old /work/main --new /work/wt-56 --concurrency 4
    python bench/bench_serve_rps.py --server old=/old,IDX1 --server new=/new,IDX2 --concurrency 1,4,16 \\
        --questions bench/data/keyterms.jsonl --requests 20 --rounds 1 --distinct
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _serve import free_port, wait_ready  # bench/, the script's own folder

DATA = Path(__file__).resolve().parent / "data"


def cpu_of(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_of(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB."""
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def questions(postgres_only: bool, path: Path | None = None) -> list[str]:
    if path is not None:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return list(dict.fromkeys(json.loads(line)["question"] if line.startswith("{") else line for line in lines))
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
        [
            sys.executable,
            "-m",
            "typedrag.cli",
            "serve",
            "--index",
            index,
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(server, url, f"the server of {checkout}")
    return server, url


async def round_of(url: str, asked: list[str], concurrency: int) -> None:
    import httpx

    queue = list(asked)

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            question = queue.pop()
            response = await client.post(f"{url}/v1/answer", json={"question": question, "method": "rag"}, timeout=600)
            response.raise_for_status()
            if os.environ.get("BENCH_VERBOSE"):
                print(
                    f"  {response.elapsed.total_seconds():.2f} s {question[:50]!r}: {response.json()['answer'][:60]!r}",
                    flush=True,
                )

    async with httpx.AsyncClient() as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index")
    parser.add_argument("--old")
    parser.add_argument("--new")
    parser.add_argument("--server", action="append", default=[], metavar="NAME=CHECKOUT,INDEX")
    parser.add_argument("--concurrency", default="4", help="one or more, comma-separated: 1,4,16")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--questions", type=Path, help="a .jsonl of {question} or a .txt, one a line")
    parser.add_argument("--distinct", action="store_true", help="never the same question twice to a server")
    parser.add_argument("--postgres-only", action="store_true", help="only the PostgreSQL questions (22)")
    args = parser.parse_args()
    wanted = [(name, args.index, path) for name, path in (("old", args.old), ("new", args.new)) if path]
    for spec in args.server:
        name, rest = spec.split("=", 1)
        checkout, index = rest.split(",", 1)
        wanted.append((name, index, checkout))
    if len(wanted) < 2 or any(index is None for _, index, _ in wanted):
        parser.error("two servers at least: --index with --old and --new, or --server NAME=CHECKOUT,INDEX")
    pool = questions(args.postgres_only, args.questions)
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    if args.distinct and len(concurrencies) * args.rounds * args.requests > len(pool):
        parser.error(
            f"--distinct: {len(pool)} questions for {len(concurrencies) * args.rounds * args.requests} requests"
        )
    servers = {name: start(checkout, index) for name, index, checkout in wanted}
    for name, (server, _) in servers.items():
        print(f"{name}: ready, RSS {memory_of(server.pid)[0]:.0f} MiB", flush=True)
    figures: dict[tuple[str, int], list[tuple[float, float]]] = {}
    turn = 0
    try:
        for number in range(args.rounds):
            for concurrency in concurrencies:
                asked = [pool[(turn * args.requests + i) % len(pool)] for i in range(args.requests)]
                turn += 1
                for name, (server, url) in servers.items():
                    cpu0, started = cpu_of(server.pid), time.perf_counter()
                    asyncio.run(round_of(url, asked, concurrency))
                    seconds, cpu = time.perf_counter() - started, cpu_of(server.pid) - cpu0
                    figures.setdefault((name, concurrency), []).append((args.requests / seconds, cpu / args.requests))
                    print(
                        f"round {number + 1} concurrency {concurrency} {name}: {args.requests / seconds:.2f} requests/s, "
                        f"{cpu / args.requests:.3f} CPU-s a request; load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
        for name, (server, _) in servers.items():
            rss, peak = memory_of(server.pid)
            print(f"{name}: RSS at the end {rss:.0f} MiB, peak {peak:.0f} MiB", flush=True)
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait(timeout=30)
    first = wanted[0][0]
    for concurrency in concurrencies:
        base = figures[(first, concurrency)]
        for name in servers:
            found = figures[(name, concurrency)]
            rate, cpu = statistics.median(r for r, _ in found), statistics.median(c for _, c in found)
            print(
                f"concurrency {concurrency} {name}: {rate:.2f} requests/s ({rate / statistics.median(r for r, _ in base):.1f}x "
                f"{first}'s), {cpu:.3f} CPU-s a request ({statistics.median(c for _, c in base) / cpu:.1f}x less)"
            )


if __name__ == "__main__":
    main()
