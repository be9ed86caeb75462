"""Two `typedrag serve` replicas sharing one PostgreSQL store, as behind a load balancer (issue 52): a page signed in
on one is signed in on the other, a conversation started on one continues on the other (its follow-up read against
the history the first one kept), a verdict given on one is seen on the other, and a key revoked or a session ended
on one is refused by the other at once. Real processes, a real PostgreSQL (tests/store_fixtures.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from store_fixtures import drop_postgres_database, fresh_postgres_database, postgres_server  # noqa: F401

from typedrag.store import open_store

TYPEDRAG = Path(sys.executable).with_name("typedrag")  # the console script of this environment
HANG_GUARD = 300  # seconds a replica may take to start before the test says it hung (never a speed check)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def env(tmp_path: Path) -> dict[str, str]:
    cleared = (
        "TYPEDRAG_CONFIG",
        "TYPEDRAG_LLM",
        "TYPEDRAG_BASE_URL",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "TYPEDRAG_SERVER_API_KEY",
    )
    return {**{k: v for k, v in os.environ.items() if k not in cleared}, "TYPEDRAG_CACHE_DIR": str(tmp_path / "cache")}


@pytest.fixture()
def replicas(postgres_server, small_index, tmp_path):  # noqa: F811
    database, name = fresh_postgres_database(postgres_server)
    store = open_store(database)
    store.add_user("alice", "reader")
    store.grant("alice", "default", "read")
    key = store.create_key("alice").secret
    processes, urls, logs = [], [], []
    try:
        for number in range(2):
            port = free_port()
            log = (tmp_path / f"replica{number}.log").open("w")
            logs.append(log)
            processes.append(subprocess.Popen(
                [str(TYPEDRAG), "serve", "--index", str(small_index), "--llm", "offline", "--port", str(port),
                 "--database", database],
                stdout=log, stderr=log, env=env(tmp_path)))  # fmt: skip
            urls.append(f"http://127.0.0.1:{port}")
        for process, url, number in zip(processes, urls, range(2)):
            deadline = time.monotonic() + HANG_GUARD
            while True:
                assert process.poll() is None, (tmp_path / f"replica{number}.log").read_text()
                assert time.monotonic() < deadline, "a replica did not start"
                try:
                    if httpx.get(f"{url}/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
        yield urls, key, store
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(30)
        for log in logs:
            log.close()
        store.close()
        drop_postgres_database(postgres_server, name)


def test_a_conversation_started_on_one_replica_continues_on_the_other(replicas):
    (one, two), key, store = replicas
    signed = httpx.post(f"{one}/v1/session", json={"key": key})
    assert signed.status_code == 200
    csrf = signed.json()["csrf"]
    on_one = httpx.Client(base_url=one, cookies=signed.cookies, headers={"X-CSRF-Token": csrf}, timeout=120)
    on_two = httpx.Client(base_url=two, cookies=signed.cookies, headers={"X-CSRF-Token": csrf}, timeout=120)
    with on_one, on_two:
        assert on_two.get("/v1/session").json()["user"] == "alice"  # the session is in the shared store
        conversation = on_one.post("/v1/conversations", json={}).json()
        first = on_one.post(
            f"/v1/conversations/{conversation['id']}/answer",
            json={"question": "Why did the Western Roman Empire fall?", "method": "rag"},
        )
        assert first.status_code == 200, first.text
        follow_up = on_two.post(
            f"/v1/conversations/{conversation['id']}/answer",
            json={"question": "And what came after it?", "method": "rag"},
        )
        assert follow_up.status_code == 200, follow_up.text
        assert follow_up.json()["answer"]["result"]["rewrite"]["history_turns"] == 2  # read with replica one's turns
        answer = first.json()["answer"]["id"]
        assert (
            on_two.post(f"/v1/messages/{answer}/feedback", json={"verdict": "up", "comment": "good"}).status_code == 200
        )
        assert on_one.get(f"/v1/messages/{answer}/feedback").json()["feedback"]["comment"] == "good"
        listed = on_one.get("/v1/conversations").json()["conversations"]
        assert [c["id"] for c in listed] == [conversation["id"]]
        saved = on_two.get(f"/v1/conversations/{conversation['id']}").json()
        assert [m["role"] for m in saved["messages"]] == ["user", "assistant", "user", "assistant"]

        # signed out on one: the cookie is refused by the other; a key revoked in the store: refused by both
        assert on_two.delete("/v1/session").status_code == 200
        assert httpx.get(f"{one}/v1/conversations", cookies=signed.cookies).status_code == 401
    bearer = {"Authorization": f"Bearer {key}"}
    assert httpx.get(f"{two}/v1/conversations", headers=bearer).status_code == 200
    [listed_key] = store.keys("alice")
    store.revoke_key("alice", listed_key.prefix)
    assert httpx.get(f"{one}/v1/conversations", headers=bearer).status_code == 401
    assert httpx.get(f"{two}/v1/conversations", headers=bearer).status_code == 401
