"""Issue 52, hostile cases of the store under load, on SQLite and PostgreSQL: writers in many threads and in two
processes at once lose nothing; two processes opening a new database migrate it once; a process killed with
SIGKILL in the middle of a write leaves nothing half-written and the database usable; an SQLite writer waits
for another process's transaction instead of failing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from store_fixtures import postgres_server, store, store_url, clock  # noqa: F401
from typedrag.store import open_store
from typedrag.store.schema import conversations, messages

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, *args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)  # fmt: skip


def _counts(store) -> dict[str, int]:
    with store.db.reading() as c:
        return {
            t.name: c.execute(sa.select(sa.func.count()).select_from(t)).scalar() for t in (conversations, messages)
        }


def _updated_matches_last_message(store) -> bool:
    """Every conversation's updated_at is its last message's time: the insert and the update committed together."""
    last = (
        sa.select(sa.func.max(messages.c.created_at))
        .where(messages.c.conversation_id == conversations.c.id)
        .scalar_subquery()
    )
    with store.db.reading() as c:
        rows = c.execute(sa.select(conversations.c.updated_at, last.label("last"))).all()
    return all(row.last is None or row.last.replace(tzinfo=None) == row.updated_at.replace(tzinfo=None) for row in rows)


def test_writers_in_many_threads_lose_nothing(store):
    store.add_user("alice", "admin")
    alice = store.user("alice")
    key = store.create_key("alice")
    failures: list[BaseException] = []

    def writer(number: int) -> None:
        try:
            conversation = store.start_conversation(alice, "docs", f"thread {number}")
            for turn in range(25):
                store.add_message(alice, conversation.id, "user", f"question {turn} of thread {number}")
                store.add_message(alice, conversation.id, "assistant", f"answer {turn}")
                assert store.authenticate(key.secret) is not None
                store.conversations(alice, search=f"thread {number}", limit=5)
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert _counts(store) == {"conversations": 8, "messages": 8 * 50}
    for conversation in store.conversations(alice).items:
        texts = [m.text for m in store.messages(alice, conversation.id)]
        assert texts[0::2] == [f"question {t} of {conversation.title}" for t in range(25)]


WRITER = """
    import sys
    from typedrag.store import open_store
    store = open_store(sys.argv[1])
    me = store.user(sys.argv[2])
    conversation = store.start_conversation(me, "docs", sys.argv[2])
    print("ready", flush=True)
    sys.stdin.readline()  # both start writing at once
    for turn in range(int(sys.argv[3])):
        store.add_message(me, conversation.id, "user", f"question {turn}")
        answer = store.add_message(me, conversation.id, "assistant", f"answer {turn}")
        store.give_feedback(me, answer.id, "up" if turn % 2 else "down")
    print("done", flush=True)
"""


def test_two_processes_writing_at_once_lose_nothing(store):
    for name in ("one", "two"):
        store.add_user(name, "admin")
    url = store.db.url.render_as_string(hide_password=False)
    writers = [_python(WRITER, url, name, "60") for name in ("one", "two")]
    for writer in writers:
        assert writer.stdout.readline().strip() == "ready", writer.stderr.read()
    for writer in writers:
        writer.stdin.write("go\n")
        writer.stdin.flush()
    for writer in writers:
        out, err = writer.communicate(timeout=600)
        assert writer.returncode == 0 and out.strip() == "done", err
    assert _counts(store) == {"conversations": 2, "messages": 240}
    assert sum(n for *_, n in store.feedback_counts()) == 120
    assert _updated_matches_last_message(store)


def test_processes_opening_a_new_database_at_once_migrate_it_once(store_url):
    code = """
        import sys
        from typedrag.store import open_store
        store = open_store(sys.argv[1])
        print(store.db.revision(), flush=True)
    """
    openers = [_python(code, store_url) for _ in range(3)]
    revisions = []
    for opener in openers:
        out, err = opener.communicate(timeout=600)
        assert opener.returncode == 0, err
        revisions.append(out.strip())
    store = open_store(store_url)
    try:
        assert revisions == [store.db.revision()] * 3
        with store.db.reading() as c:
            assert c.execute(sa.text("SELECT count(*) FROM alembic_version")).scalar() == 1
    finally:
        store.close()


def test_sigkill_in_the_middle_of_a_write_leaves_nothing_half_written(store):
    store.add_user("writer", "admin")
    url = store.db.url.render_as_string(hide_password=False)
    code = """
        import sys, time
        from datetime import datetime, timezone
        import sqlalchemy as sa
        from typedrag.store import open_store
        from typedrag.store.schema import conversations, messages
        store = open_store(sys.argv[1])
        me = store.user("writer")
        now = datetime.now(timezone.utc)
        with store.db.writing() as c:  # the transaction every store method writes in
            c.execute(sa.insert(conversations).values(id="f" * 32, owner_id=me.id, collection="docs", title="torn",
                                                      created_at=now, updated_at=now))
            for turn in range(500):
                c.execute(sa.insert(messages).values(conversation_id="f" * 32, role="user", text=f"q {turn}", created_at=now))
            print("inside", flush=True)
            time.sleep(600)
    """
    child = _python(code, url)
    assert child.stdout.readline().strip() == "inside", child.stderr.read()
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert _counts(store) == {"conversations": 0, "messages": 0}
    writer = store.user("writer")
    conversation = store.start_conversation(writer, "docs", "after the kill")  # the write lock was released
    store.add_message(writer, conversation.id, "user", "still usable?")
    assert _counts(store) == {"conversations": 1, "messages": 1}
    if store.db.kind == "sqlite":
        with store.db.reading() as c:
            assert c.execute(sa.text("PRAGMA integrity_check")).scalar() == "ok"


def test_sigkill_while_the_api_writes_in_a_loop_keeps_every_conversation_whole(store):
    store.add_user("writer", "admin")
    url = store.db.url.render_as_string(hide_password=False)
    code = """
        import sys
        from typedrag.store import open_store
        store = open_store(sys.argv[1])
        me = store.user("writer")
        turn = 0
        while True:
            conversation = store.start_conversation(me, "docs", f"c{turn}")
            for _ in range(3):
                store.add_message(me, conversation.id, "user", "q" * 2000)
                store.give_feedback(me, store.add_message(me, conversation.id, "assistant", "a" * 5000).id, "up")
            turn += 1
            if turn == 5:
                print("writing", flush=True)
    """
    child = _python(code, url)
    assert child.stdout.readline().strip() == "writing", child.stderr.read()
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    counts = _counts(store)
    assert counts["conversations"] >= 5 and counts["messages"] >= 30
    assert _updated_matches_last_message(store)
    with store.db.reading() as c:  # every answer kept has its feedback: the two were separate transactions, each whole
        orphans = c.execute(
            sa.text(
                "SELECT count(*) FROM messages m WHERE m.role = 'assistant' AND NOT EXISTS (SELECT 1 FROM feedback f WHERE f.message_id = m.id)"
            )
        ).scalar()
    assert orphans <= 1  # at most the answer whose feedback the kill came before
    assert store.add_user("after", "reader").name == "after"


def test_an_sqlite_writer_waits_for_another_process_to_commit(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(url)
    code = """
        import sys
        import sqlalchemy as sa
        from typedrag.store import open_store
        store = open_store(sys.argv[1])
        with store.db.writing() as c:  # holds the write lock from BEGIN IMMEDIATE on
            c.execute(sa.text("INSERT INTO users (name, role, created_at, disabled) VALUES ('holder', 'reader', '2026-01-01 00:00:00', 0)"))
            print("holding", flush=True)
            sys.stdin.readline()
        print("committed", flush=True)
    """
    holder = _python(code, url)
    assert holder.stdout.readline().strip() == "holding", holder.stderr.read()
    done = threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            store.add_user("waiter")
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    assert not done.wait(0.5)  # it cannot finish while the other process holds the write lock
    holder.stdin.write("commit\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "committed"
    thread.join()
    holder.wait(timeout=60)
    assert failures == []
    assert [u.name for u in store.users()] == ["holder", "waiter"]
    store.close()


@pytest.mark.parametrize("pool_size", [1])
def test_more_threads_than_connections_queue_instead_of_failing(tmp_path, pool_size):
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}", pool_size=pool_size)
    user = store.add_user("alice", "admin")
    conversation = store.start_conversation(user, "docs")
    threads = [
        threading.Thread(target=store.add_message, args=(user, conversation.id, "user", f"q{n}")) for n in range(12)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store.messages(user, conversation.id)) == 12
    store.close()


def test_no_free_connection_in_time_is_store_unavailable_not_a_raw_error(tmp_path):
    """A server whose every pooled connection is busy answers 503 with a line, not a 500 with SQLAlchemy's trace."""
    from contextlib import ExitStack

    from typedrag.store import StoreUnavailable

    store = open_store(f"sqlite:///{tmp_path / 'store.db'}", pool_size=1, pool_timeout=0.2)
    with ExitStack() as held:
        for _ in range(3):  # the pool's one connection and its two of overflow
            held.enter_context(store.db.reading())
        with pytest.raises(StoreUnavailable, match="cannot be used: .*QueuePool limit"):
            store.users()
    assert store.users() == []
    store.close()
