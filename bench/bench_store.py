"""The store (typedrag.store) under the sizes a team reaches: 10,000 conversations of one user, listed page by page
and searched, on SQLite and PostgreSQL, each timing beside the same query as bare SQL on the same connection
pool (the ratio is the store's own cost: its access check, its types, its records); and messages written per
second by concurrent threads, each message a real answer's result JSON.

    python bench/bench_store.py [--postgres URL] [--conversations 10000] [--threads 8] [--out bench/store.json]

Without --postgres (or TYPEDRAG_TEST_POSTGRES_URL) only SQLite is measured. The PostgreSQL database must be empty
or disposable: the benchmark makes and drops a database of its own on that server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from typedrag.store import open_store  # noqa: E402
from typedrag.store.schema import conversations, messages  # noqa: E402

OTHER_USERS = 2  # with as many conversations each, so the owner's index matters
RARE = "zebrafish"  # in one conversation of the measured user


def answer_json() -> str:
    from typedrag import ListRetriever, OfflineEngine, Pipeline

    pipeline = Pipeline(
        OfflineEngine(),
        ListRetriever(
            [
                "The Western Roman Empire fell because of heavy taxation, inflation and repeated invasions by Germanic tribes.",
                "Civil wars and short reigns undermined central authority in the Western Roman Empire.",
            ]
        ),
    )
    return asyncio.run(pipeline.answer("Why did the Western Roman Empire fall?", "typed")).model_dump_json()


def seed(store, count: int, result: str) -> object:
    """`count` conversations of two messages for the measured user and for each other user, in bulk."""
    measured = store.add_user("measured", "editor")
    store.grant("measured", "*", "read")
    owners = [measured] + [store.add_user(f"other{n}", "editor") for n in range(OTHER_USERS)]
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for owner in owners:
        for chunk in range(0, count, 1000):
            rows, texts = [], []
            for n in range(chunk, min(count, chunk + 1000)):
                cid = secrets.token_hex(16)
                when = start + timedelta(seconds=n)
                topic = RARE if owner is measured and n == count // 2 else f"topic {n % 97}"
                rows.append(
                    {
                        "id": cid,
                        "owner_id": owner.id,
                        "collection": "docs",
                        "title": f"Question about {topic}",
                        "created_at": when,
                        "updated_at": when,
                    }
                )
                texts.append(
                    {
                        "conversation_id": cid,
                        "role": "user",
                        "text": f"Why does {topic} matter? ({n})",
                        "created_at": when,
                    }
                )
                texts.append(
                    {
                        "conversation_id": cid,
                        "role": "assistant",
                        "text": f"Because of {topic} [1].",
                        "result": result,
                        "created_at": when,
                        "method": "typed",
                        "type": "REASON",
                        "strategy": "reason",
                    }
                )
            with store.db.writing() as c:
                c.execute(sa.insert(conversations), rows)
                c.execute(sa.insert(messages), texts)
    if store.db.kind == "postgresql":
        with store.db.writing() as c:
            c.execute(sa.text("ANALYZE"))
    return measured


def timed(function, repeat: int) -> tuple[float, float]:
    """(fastest, median) seconds of `repeat` calls after one warm-up. On a loaded machine the median carries the
    waits for a core; the fastest run is the work itself."""
    function()
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        function()
        samples.append(time.perf_counter() - began)
    return min(samples), statistics.median(samples)


BARE_PAGE = (
    "SELECT id, collection, title, created_at, updated_at FROM conversations WHERE owner_id = :owner AND deleted_at IS NULL "
    "{after} ORDER BY updated_at DESC, id DESC LIMIT 51"
)
BARE_SEARCH = (
    "SELECT id, collection, title, created_at, updated_at FROM conversations c WHERE owner_id = :owner AND deleted_at IS NULL "
    "AND (lower(title) LIKE :term OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND lower(m.text) LIKE :term)) "
    "ORDER BY updated_at DESC, id DESC LIMIT 51"
)


def measure_listing(store, user, count: int, repeat: int) -> dict:
    engine = store.db.engine

    def bare(sql: str, **params):
        def run():
            with engine.connect() as c:
                return c.execute(sa.text(sql), params).all()

        return run

    def walk(times: list[float]) -> int:
        seen, cursor = 0, None
        while True:
            began = time.perf_counter()
            page = store.conversations(user, limit=50, cursor=cursor)
            times.append(time.perf_counter() - began)
            seen += len(page.items)
            if page.next_cursor is None:
                return seen
            cursor = page.next_cursor

    def bare_walk(times: list[float]) -> int:
        seen, after = 0, None
        while True:
            began = time.perf_counter()
            with engine.connect() as c:  # a connection from the pool for each page, as the store takes one
                if after is None:
                    rows = c.execute(sa.text(BARE_PAGE.format(after="")), {"owner": user.id}).all()
                else:
                    rows = c.execute(
                        sa.text(BARE_PAGE.format(after="AND (updated_at, id) < (:t, :i)")),
                        {"owner": user.id, "t": after[0], "i": after[1]},
                    ).all()
            times.append(time.perf_counter() - began)
            seen += min(len(rows), 50)
            if len(rows) <= 50:
                return seen
            after = (rows[49].updated_at, rows[49].id)

    def walked(function, runs: int = 3) -> tuple[float, float]:
        """(sum over pages of each page's fastest of `runs` walks, the fastest whole walk) in seconds."""
        walks = []
        for _ in range(runs):
            times: list[float] = []
            assert function(times) == count
            walks.append(times)
        return sum(min(page) for page in zip(*walks)), min(sum(w) for w in walks)

    assert walk([]) == count and bare_walk([]) == count
    middle = store.conversations(user, limit=50)
    for _ in range(count // 100):  # the cursor half-way down
        middle = store.conversations(user, limit=50, cursor=middle.next_cursor)
    cursor = middle.next_cursor
    with engine.connect() as c:  # the same position as the bare query's parameters, in the driver's own types
        raw = c.execute(
            sa.text("SELECT updated_at, id FROM conversations WHERE id = :i"), {"i": middle.items[-1].id}
        ).one()
    assert [c.title for c in store.conversations(user, search=RARE).items] == [f"Question about {RARE}"]
    figures = {
        "first page (50)": (
            lambda: store.conversations(user, limit=50),
            bare(BARE_PAGE.format(after=""), owner=user.id),
        ),
        "page half-way down": (
            lambda: store.conversations(user, limit=50, cursor=cursor),
            bare(BARE_PAGE.format(after="AND (updated_at, id) < (:t, :i)"), owner=user.id, t=raw[0], i=raw[1]),
        ),
        "search, a rare word": (
            lambda: store.conversations(user, search=RARE),
            bare(BARE_SEARCH, owner=user.id, term=f"%{RARE}%"),
        ),
        "search, a common phrase": (
            lambda: store.conversations(user, search="topic 5"),
            bare(BARE_SEARCH, owner=user.id, term="%topic 5%"),
        ),
    }
    out = {}
    mine, mine_whole = walked(walk)
    base, base_whole = walked(bare_walk)
    out[f"all {count:,} in pages of 50"] = {
        "store_ms": round(mine * 1000, 2),
        "bare_ms": round(base * 1000, 2),
        "ratio": round(mine / base, 2),
        "store_median_ms": round(mine_whole * 1000, 2),
        "bare_median_ms": round(base_whole * 1000, 2),  # the fastest whole walk
    }
    for name, (ours, theirs) in figures.items():
        mine, mine_median = timed(ours, repeat)
        base, base_median = timed(theirs, repeat)
        out[name] = {
            "store_ms": round(mine * 1000, 2),
            "bare_ms": round(base * 1000, 2),
            "ratio": round(mine / base, 2),
            "store_median_ms": round(mine_median * 1000, 2),
            "bare_median_ms": round(base_median * 1000, 2),
        }
    return out


def measure_inserts(store, result: str, threads: int, per_thread: int) -> dict:
    user = store.add_user(f"writer-{uuid.uuid4().hex[:6]}", "admin")
    targets = [store.start_conversation(user, "docs", f"load {n}") for n in range(threads)]
    failures: list[BaseException] = []
    start = threading.Barrier(threads + 1)

    def work(conversation) -> None:
        start.wait()
        try:
            for n in range(per_thread):
                store.add_message(user, conversation.id, "assistant", f"answer {n}", result=result, trace_id=f"t{n}")
        except BaseException as error:  # noqa: BLE001 - reported
            failures.append(error)

    pool = [threading.Thread(target=work, args=(t,)) for t in targets]
    for thread in pool:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in pool:
        thread.join()
    seconds = time.perf_counter() - began
    if failures:
        raise failures[0]
    total = threads * per_thread
    return {
        "threads": threads,
        "messages": total,
        "seconds": round(seconds, 2),
        "per_second": round(total / seconds, 1),
        "result_json_bytes": len(result),
    }


def run(url: str, kind: str, args, result: str) -> dict:
    store = open_store(url, pool_size=args.threads)
    try:
        began = time.perf_counter()
        user = seed(store, args.conversations, result)
        seeded = time.perf_counter() - began
        listing = measure_listing(store, user, args.conversations, args.repeat)
        inserts = measure_inserts(store, result, args.threads, args.per_thread)
    finally:
        store.close()
    return {"kind": kind, "seed_seconds": round(seeded, 1), "listing": listing, "inserts": inserts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=os.environ.get("TYPEDRAG_TEST_POSTGRES_URL"))
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--per-thread", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path("bench/store.json"))
    args = parser.parse_args()
    result = answer_json()
    reports = []
    with tempfile.TemporaryDirectory() as folder:
        reports.append(run(f"sqlite:///{folder}/typedrag.db", "sqlite", args, result))
    if args.postgres:
        import psycopg

        name = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(args.postgres, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        try:
            reports.append(run(args.postgres.rsplit("/", 1)[0] + "/" + name, "postgresql", args, result))
        finally:
            with psycopg.connect(args.postgres, autocommit=True) as c:
                c.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    args.out.write_text(json.dumps(reports, indent=1))
    for report in reports:
        print(
            f"\n{report['kind']}: {args.conversations:,} conversations of one user (+{OTHER_USERS} others as many), "
            f"seeded in {report['seed_seconds']} s"
        )
        print("(all pages: the sum of each page's fastest of 3 walks / the fastest whole walk)")
        print(
            "| query | store ms (fastest / median) | bare SQL ms (fastest / median) | ratio (fastest) |\n| --- | ---: | ---: | ---: |"
        )
        for name, row in report["listing"].items():
            print(
                f"| {name} | {row['store_ms']} / {row['store_median_ms']} | {row['bare_ms']} / {row['bare_median_ms']} | {row['ratio']} |"
            )
        i = report["inserts"]
        print(
            f"inserts: {i['messages']:,} messages ({i['result_json_bytes']:,} B of result JSON each) by {i['threads']} threads "
            f"in {i['seconds']} s = {i['per_second']} /s"
        )


if __name__ == "__main__":
    main()
