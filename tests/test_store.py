"""Issue 52, the store: users, keys, grants, conversations, messages, feedback and exports, each test on SQLite and
on a real PostgreSQL server (tests/store_fixtures.py), hostile input included."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
import sqlalchemy as sa

from store_fixtures import clock, postgres_server, store, store_url  # noqa: F401
from typedrag.store import (
    LIMITS,
    AlreadyExists,
    Forbidden,
    InvalidInput,
    NotFound,
    StoreUnavailable,
    open_store,
)
from typedrag.store.schema import metadata

SQL_METACHARACTERS = "x'); DROP TABLE users; -- \" % _ \\ ; /* */"
ONE_MB = "é" * 1_000_000


@pytest.fixture(scope="module")
def answered():
    """A real AnswerResult of the offline engine, with citations and sources."""
    from typedrag import ListRetriever, OfflineEngine, Pipeline

    pipeline = Pipeline(
        OfflineEngine(),
        ListRetriever(
            [
                "The Western Roman Empire fell because of heavy taxation, inflation and repeated invasions by Germanic tribes.",
                "Civil wars and short reigns undermined central authority in the Western Roman Empire.",
                "Bread is baked in a hot oven until the crust is brown.",
            ]
        ),
    )
    result = asyncio.run(pipeline.answer("Why did the Western Roman Empire fall?", "typed"))
    assert result.citations and len(result.sources) == 2 and not result.abstained
    return result


def _asked(store, user, collection, result, question="Why did the Western Roman Empire fall?"):
    conversation = store.start_conversation(user, collection)
    store.add_message(user, conversation.id, "user", question)
    answer = store.add_message(user, conversation.id, "assistant", result.answer, result=result, trace_id="trace-1")
    return conversation, answer


def _all_rows_as_text(store) -> str:
    with store.db.reading() as c:
        return "\n".join(repr(tuple(row)) for table in metadata.sorted_tables for row in c.execute(sa.select(table)))


# ---------------------------------------------------------------- users and keys


def test_users_are_added_listed_and_a_second_of_the_same_name_is_refused(store):
    alice = store.add_user("alice", "editor")
    store.add_user("bob")
    assert [(u.name, u.role) for u in store.users()] == [("alice", "editor"), ("bob", "reader")]
    assert store.user("alice") == alice
    with pytest.raises(AlreadyExists, match="exists already"):
        store.add_user("alice", "admin")
    with pytest.raises(InvalidInput, match="role must be one of admin, editor, reader"):
        store.add_user("carol", "owner")
    with pytest.raises(NotFound):
        store.user("nobody")


def test_sql_metacharacters_in_names_comments_and_titles_are_data(store, answered):
    user = store.add_user(SQL_METACHARACTERS, "admin")
    assert store.user(SQL_METACHARACTERS).id == user.id
    conversation, answer = _asked(store, user, SQL_METACHARACTERS, answered)
    store.rename_conversation(user, conversation.id, SQL_METACHARACTERS)
    saved = store.give_feedback(user, answer.id, "down", comment=SQL_METACHARACTERS)
    assert saved.comment == SQL_METACHARACTERS
    assert store.conversation(user, conversation.id).title == SQL_METACHARACTERS
    assert [c.id for c in store.conversations(user, search="DROP TABLE").items] == [conversation.id]
    assert [u.name for u in store.users()] == [SQL_METACHARACTERS]  # the table is still there
    # LIKE's own wildcards are searched for as themselves
    other = store.start_conversation(user, "docs", "nothing special")
    assert other.id not in [c.id for c in store.conversations(user, search="%").items]
    assert other.id not in [c.id for c in store.conversations(user, search="_").items]


@pytest.mark.parametrize("field", ["user name", "title", "comment", "key label", "collection"])
def test_a_one_megabyte_string_is_refused_with_a_clear_error_and_nothing_is_written(store, answered, field):
    user = store.add_user("alice", "admin")
    conversation, answer = _asked(store, user, "docs", answered)
    before = _all_rows_as_text(store)
    attempts = {
        "user name": lambda: store.add_user(ONE_MB),
        "title": lambda: store.rename_conversation(user, conversation.id, ONE_MB),
        "comment": lambda: store.give_feedback(user, answer.id, "up", comment=ONE_MB),
        "key label": lambda: store.create_key("alice", ONE_MB),
        "collection": lambda: store.start_conversation(user, ONE_MB),
    }
    with pytest.raises(InvalidInput) as refused:
        attempts[field]()
    message = str(refused.value)
    assert "too long: 1,000,000 characters, at most" in message and len(message) < 200
    assert _all_rows_as_text(store) == before


def test_control_characters_and_nul_are_dropped_from_stored_text(store, answered):
    user = store.add_user("alice", "admin")
    conversation, answer = _asked(store, user, "docs", answered)
    saved = store.give_feedback(user, answer.id, "up", comment="fine\x00 answer\x1b[31m\nsecond line")
    assert saved.comment == "fine answer[31m\nsecond line"  # PostgreSQL would refuse the NUL
    store.rename_conversation(user, conversation.id, "two\nlines\ttitle")
    assert store.conversation(user, conversation.id).title == "two lines title"


def test_a_key_is_shown_once_stored_hashed_and_authenticates_its_user(store):
    alice = store.add_user("alice", "editor")
    new = store.create_key("alice", "laptop")
    assert new.secret.startswith(f"tdk_{new.key.prefix}_") and len(new.secret) == 60
    assert store.authenticate(new.secret) == alice
    assert store.authenticate(" " + new.secret + "\n") == alice  # as pasted
    stored = _all_rows_as_text(store)
    # the random part whole: it may itself hold "_" (URL-safe base64), so it is not what follows the last "_"
    body = new.secret.removeprefix(f"tdk_{new.key.prefix}_")
    assert len(body) == 43 and new.secret not in stored and body not in stored
    assert "$argon2id$" in stored
    wrong = new.secret[:-4] + ("AAAA" if not new.secret.endswith("AAAA") else "BBBB")
    assert store.authenticate(wrong) is None  # right prefix, wrong secret
    for junk in ("", "Bearer " + new.secret, new.secret + "x", "tdk_", SQL_METACHARACTERS, ONE_MB, None, 42):
        assert store.authenticate(junk) is None


def test_a_revoked_key_stops_working_at_once_even_after_it_verified(store):
    store.add_user("alice", "editor")
    kept, revoked = store.create_key("alice", "kept"), store.create_key("alice", "lost")
    assert store.authenticate(revoked.secret) is not None  # verified once: its digest is remembered
    gone = store.revoke_key("alice", f"tdk_{revoked.key.prefix}")
    assert gone.revoked_at is not None and not gone.active
    assert store.authenticate(revoked.secret) is None
    assert store.authenticate(kept.secret) is not None
    # another process (a replica, the CLI) revoking it is seen as well: the row is read on every check
    other = open_store(str(store.db.url.render_as_string(hide_password=False)))
    try:
        assert other.authenticate(kept.secret) is not None
        store.revoke_key("alice", kept.key.prefix)
        assert other.authenticate(kept.secret) is None
    finally:
        other.close()
    with pytest.raises(NotFound):
        store.revoke_key("alice", "tdk_000000000000")


def test_a_disabled_or_removed_user_cannot_authenticate(store):
    store.add_user("alice", "editor")
    key = store.create_key("alice")
    assert store.authenticate(key.secret) is not None
    store.set_disabled("alice", True)
    assert store.authenticate(key.secret) is None
    store.set_disabled("alice", False)
    assert store.authenticate(key.secret) is not None
    store.remove_user("alice")
    assert store.authenticate(key.secret) is None
    assert store.keys() == []


def test_a_new_key_in_a_deleted_keys_place_works_in_a_process_that_knew_the_old_one(store):
    """SQLite gives the id of a deleted last row to the next one: a key remembered as verified by its row id made
    the new key of a re-added user fail until the server restarted."""
    store.add_user("bob", "reader")
    old = store.create_key("bob")
    assert store.authenticate(old.secret) is not None
    store.remove_user("bob")
    store.add_user("bob", "reader")
    new = store.create_key("bob")
    assert store.authenticate(new.secret) is not None
    assert store.authenticate(old.secret) is None


def test_last_used_is_written_at_most_once_a_minute(store, clock):
    store.add_user("alice", "editor")
    key = store.create_key("alice")
    assert store.keys("alice")[0].last_used_at is None
    store.authenticate(key.secret)
    first = store.keys("alice")[0].last_used_at
    assert first == clock()
    clock.advance(seconds=59)
    store.authenticate(key.secret)
    assert store.keys("alice")[0].last_used_at == first  # no write within the minute
    clock.advance(seconds=2)
    store.authenticate(key.secret)
    assert store.keys("alice")[0].last_used_at == clock()


def test_keys_never_appear_in_logs_reprs_or_error_messages(store, caplog):
    caplog.set_level(logging.DEBUG)
    logging.getLogger("sqlalchemy.engine").setLevel(logging.DEBUG)  # every statement and its parameters
    try:
        store.add_user("alice", "editor")
        store.add_user("bob", "reader")
        new = store.create_key("alice", "laptop")
        secret = new.secret
        seen = [repr(new), str(new), repr(new.key), repr(store.keys()), repr(store), repr(store._verified)]
        user = store.authenticate(secret)
        store.authenticate(secret)
        seen.append(repr(user))
        for attempt in (
            lambda: store.revoke_key("bob", secret),  # the whole key pasted where a prefix goes, on another user
            lambda: store.revoke_key("nobody", secret),
            lambda: store.add_user(secret * 100),
            lambda: store.create_key(secret),
            lambda: store.add_user(secret),
            lambda: store.start_conversation(user, f"docs {secret}"),
        ):
            with pytest.raises((NotFound, InvalidInput, Forbidden)) as error:
                attempt()
            seen.append(str(error.value))
        store.revoke_key("alice", new.key.prefix)
        store.authenticate(secret)
    finally:
        logging.getLogger("sqlalchemy.engine").setLevel(logging.WARNING)
    assert "INSERT INTO api_keys" in caplog.text  # the log did record the statements
    secret_part = secret.split("_", 2)[2]
    for text in [caplog.text, *seen]:
        assert secret_part not in text


def test_a_password_in_the_database_url_is_never_in_an_error_or_repr():
    with pytest.raises(StoreUnavailable) as error:
        open_store("postgresql://typedrag:s3cret-pw@127.0.0.1:1/nothing")
    assert "s3cret-pw" not in str(error.value) and "127.0.0.1" in str(error.value)
    with pytest.raises(InvalidInput, match="not supported"):
        open_store("mysql://root:s3cret-pw@localhost/db")


# ---------------------------------------------------------------- grants


def test_grants_give_read_or_write_a_reader_only_reads_and_an_admin_needs_none(store):
    admin, editor, reader = (
        store.add_user("root", "admin"),
        store.add_user("ed", "editor"),
        store.add_user("rita", "reader"),
    )
    assert store.access(admin, "anything") == "write"
    assert store.access(editor, "docs") is None
    store.grant("ed", "docs", "write")
    store.grant("ed", "*", "read")
    assert store.access(editor, "docs") == "write" and store.access(editor, "other") == "read"
    with pytest.raises(InvalidInput, match="reader"):
        store.grant("rita", "docs", "write")
    store.grant("rita", "docs")
    assert store.access(reader, "docs") == "read" and store.access(reader, "other") is None
    store.set_role("rita", "editor")
    store.grant("rita", "docs", "write")
    store.set_role("rita", "reader")  # demoted: the grant stays, but a reader never writes
    assert store.access(reader, "docs") == "read"
    store.require(reader, "docs", "read")
    with pytest.raises(Forbidden, match="no write access"):
        store.require(reader, "docs", "write")
    assert store.revoke_grant("rita", "docs") and not store.revoke_grant("rita", "docs")
    assert store.access(reader, "docs") is None
    assert [(g.user, g.collection, g.access) for g in store.grants()] == [("ed", "*", "read"), ("ed", "docs", "write")]
    assert store.readable(editor, ["docs", "other"]) == ["docs", "other"] and store.readable(reader, ["docs"]) == []
    store.set_disabled("root", True)
    assert store.access(admin, "anything") is None  # the User object is stale; the store is not


def test_a_conversation_needs_a_grant_and_its_collection_stays_guarded(store, answered):
    alice = store.add_user("alice", "reader")
    with pytest.raises(Forbidden):
        store.start_conversation(alice, "docs")
    store.grant("alice", "docs")
    conversation, answer = _asked(store, alice, "docs", answered)
    store.revoke_grant("alice", "docs")
    assert store.conversations(alice).items == []  # its sources come from a collection she may no longer read
    for attempt in (
        lambda: store.conversation(alice, conversation.id),
        lambda: store.messages(alice, conversation.id),
        lambda: store.add_message(alice, conversation.id, "user", "more?"),
        lambda: store.give_feedback(alice, answer.id, "up"),
        lambda: store.export_markdown(alice, conversation.id),
    ):
        with pytest.raises(Forbidden):
            attempt()


# ---------------------------------------------------------------- conversations


def test_a_user_never_sees_or_changes_another_users_conversation(store, answered):
    alice, bob = store.add_user("alice", "admin"), store.add_user("bob", "admin")
    conversation, answer = _asked(store, alice, "docs", answered)
    assert store.conversations(bob).items == []
    for attempt in (
        lambda: store.conversation(bob, conversation.id),
        lambda: store.messages(bob, conversation.id),
        lambda: store.history(bob, conversation.id),
        lambda: store.rename_conversation(bob, conversation.id, "mine"),
        lambda: store.delete_conversation(bob, conversation.id),
        lambda: store.add_message(bob, conversation.id, "user", "hijack"),
        lambda: store.give_feedback(bob, answer.id, "down"),
        lambda: store.export_json(bob, conversation.id),
    ):
        with pytest.raises(Forbidden, match="another user's") as refused:  # issue 52: 403, never its content
            attempt()
        assert "Roman" not in str(refused.value)
    assert store.feedback_on(bob, answer.id) is None
    assert store.conversation(alice, conversation.id).title == "Why did the Western Roman Empire fall?"
    for junk in ("../etc", "' OR 1=1 --", "0" * 33, 7):
        with pytest.raises(NotFound):
            store.conversation(alice, junk)


def test_an_answer_keeps_its_full_result_and_a_follow_up_reads_the_history(store, answered):
    from typedrag import ListRetriever, OfflineEngine, Pipeline
    from typedrag.result import AnswerResult

    alice = store.add_user("alice", "admin")
    conversation, answer = _asked(store, alice, "docs", answered)
    [question, saved] = store.messages(alice, conversation.id)
    assert (question.role, saved.role) == ("user", "assistant")
    assert AnswerResult.model_validate(saved.result) == answered  # the whole result, trace and all
    assert (saved.method, saved.type, saved.strategy, saved.trace_id) == (
        "typed",
        answered.type.type,
        answered.strategy,
        "trace-1",
    )
    history = store.history(alice, conversation.id)
    assert [t.role for t in history] == ["user", "assistant"]
    pipeline = Pipeline(OfflineEngine(), ListRetriever(["Germanic tribes invaded the western provinces repeatedly."]))
    follow_up = asyncio.run(pipeline.answer("Which tribes?", "rag", history=history))
    assert follow_up.rewrite is not None and follow_up.rewrite.history_turns == 2


def test_listing_is_keyset_paginated_newest_first_even_when_times_tie(store, clock):
    alice = store.add_user("alice", "admin")
    made = []
    for number in range(120):
        made.append(store.start_conversation(alice, "docs" if number % 3 else "other", f"conversation {number}"))
        if number % 10 == 0:
            clock.advance(seconds=1)  # most share their time with others: the id breaks the tie
    seen, cursor, pages = [], None, 0
    while True:
        page = store.conversations(alice, limit=50, cursor=cursor)
        seen += page.items
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert pages == 3 and len(seen) == 120 and len({c.id for c in seen}) == 120
    assert seen == sorted(made, key=lambda c: (c.updated_at, c.id), reverse=True)
    only = store.conversations(alice, collection="other", limit=200).items
    assert len(only) == 40 and {c.collection for c in only} == {"other"}
    with pytest.raises(InvalidInput, match="not a cursor"):
        store.conversations(alice, cursor="bm90IGEgY3Vyc29y")
    assert len(store.conversations(alice, limit=10_000).items) == 120  # capped at 200 a page


def test_pages_and_times_do_not_depend_on_the_database_servers_time_zone(store_url, clock):
    """A PostgreSQL server whose zone is not UTC: a cursor's time sent as a zoned value was read in that zone."""
    if store_url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(store_url, autocommit=True) as connection:
            connection.execute(f"ALTER DATABASE \"{store_url.rsplit('/', 1)[1]}\" SET timezone TO 'America/New_York'")
    store = open_store(store_url, clock=clock)
    try:
        alice = store.add_user("alice", "admin")
        made = []
        for number in range(30):
            made.append(store.start_conversation(alice, "docs", f"c{number}"))
            clock.advance(hours=1)
        first = store.conversations(alice, limit=10)
        second = store.conversations(alice, limit=10, cursor=first.next_cursor)
        assert [c.title for c in first.items + second.items] == [f"c{n}" for n in range(29, 9, -1)]
        assert store.conversation(alice, made[0].id).created_at == made[0].created_at
        clock.advance(hours=2)  # c0 was made 32 hours ago, c29 3 hours ago
        assert store.purge(retention_days=2) == 0
        clock.advance(days=1)
        assert store.purge(retention_days=2) == 8  # c0..c7, untouched for more than 48 hours
    finally:
        store.close()


def test_search_finds_titles_and_messages_ignoring_case(store, answered):
    alice = store.add_user("alice", "admin")
    rome, _ = _asked(store, alice, "docs", answered)
    bread = store.start_conversation(alice, "docs", "Baking")
    store.add_message(alice, bread.id, "user", "How long should BREAD rise?")
    assert [c.id for c in store.conversations(alice, search="bread").items] == [bread.id]
    assert [c.id for c in store.conversations(alice, search="roman empire").items] == [rome.id]
    assert [c.id for c in store.conversations(alice, search="baking").items] == [bread.id]
    assert store.conversations(alice, search="submarine").items == []
    assert len(store.conversations(alice, search="   ").items) == 2  # nothing to search for: all


def test_rename_delete_and_purge_by_retention(store, clock, answered):
    alice = store.add_user("alice", "admin")
    old, old_answer = _asked(store, alice, "docs", answered)
    store.give_feedback(alice, old_answer.id, "up")
    clock.advance(days=20)
    recent, _ = _asked(store, alice, "docs", answered)
    doomed = store.start_conversation(alice, "docs", "to delete")
    store.rename_conversation(alice, recent.id, "Rome, again")
    assert store.conversation(alice, recent.id).title == "Rome, again"
    with pytest.raises(InvalidInput, match="title is empty"):
        store.rename_conversation(alice, recent.id, "  ")
    store.delete_conversation(alice, doomed.id)
    with pytest.raises(NotFound):
        store.conversation(alice, doomed.id)
    assert {c.id for c in store.conversations(alice).items} == {old.id, recent.id}
    assert store.purge() == 1  # the deleted one, for good
    assert store.purge(retention_days=30) == 0
    assert store.purge(retention_days=10) == 1  # untouched for 20 days
    assert [c.id for c in store.conversations(alice).items] == [recent.id]
    assert store.feedback_counts() == []  # the purged answer's feedback went with it
    with store.db.reading() as c:
        assert c.execute(sa.text("SELECT count(*) FROM messages")).scalar() == 2
    with pytest.raises(InvalidInput, match="whole number of days"):
        store.purge(retention_days=0)


def test_removing_a_user_removes_their_conversations_keys_grants_and_feedback(store, answered):
    alice, bob = store.add_user("alice", "editor"), store.add_user("bob", "admin")
    store.grant("alice", "docs")
    store.create_key("alice")
    _, answer = _asked(store, alice, "docs", answered)
    store.give_feedback(alice, answer.id, "up")
    kept, kept_answer = _asked(store, bob, "docs", answered)
    store.give_feedback(bob, kept_answer.id, "down")
    assert store.remove_user("alice") == 1
    with store.db.reading() as c:
        counts = {t.name: c.execute(sa.select(sa.func.count()).select_from(t)).scalar() for t in metadata.sorted_tables}
    assert counts == {
        "users": 1,
        "api_keys": 0,
        "grants": 0,
        "conversations": 1,
        "messages": 2,
        "feedback": 1,
        "sessions": 0,
    }
    with pytest.raises(NotFound):
        store.remove_user("alice")


def test_messages_are_bounded_and_checked(store, answered):
    alice = store.add_user("alice", "admin")
    conversation = store.start_conversation(alice, "docs")
    with pytest.raises(InvalidInput, match="message role"):
        store.add_message(alice, conversation.id, "robot", "hi")
    with pytest.raises(InvalidInput, match="message is empty"):
        store.add_message(alice, conversation.id, "user", " \x00 ")
    with pytest.raises(InvalidInput, match="too long"):
        store.add_message(alice, conversation.id, "user", "w" * (LIMITS["message_text"] + 1))
    with pytest.raises(InvalidInput, match="not JSON"):
        store.add_message(alice, conversation.id, "assistant", "x", result="{not json")
    with pytest.raises(InvalidInput, match="'\\*' stands for every collection"):
        store.start_conversation(alice, "*")
    assert store.messages(alice, conversation.id) == []


# ---------------------------------------------------------------- feedback


def test_feedback_is_one_verdict_per_user_and_answer_with_helpful_sources(store, answered, clock):
    alice = store.add_user("alice", "admin")
    conversation, answer = _asked(store, alice, "docs", answered)
    question = store.messages(alice, conversation.id)[0]
    source = answered.sources[0].passage_id
    first = store.give_feedback(alice, answer.id, "up", "clear", [source, source])
    assert first.helpful == (source,)
    clock.advance(minutes=5)
    second = store.give_feedback(alice, answer.id, "down", "on reflection, wrong")
    assert second.id == first.id and second.verdict == "down" and second.created_at == first.created_at
    assert second.updated_at == clock() and second.helpful == ()
    assert store.feedback_on(alice, answer.id) == second
    with pytest.raises(InvalidInput, match="not among this answer's sources"):
        store.give_feedback(alice, answer.id, "up", helpful=["made-up#3"])
    with pytest.raises(InvalidInput, match="verdict must be one of up, down"):
        store.give_feedback(alice, answer.id, "meh")
    with pytest.raises(NotFound, match="no such answer"):
        store.give_feedback(alice, question.id, "up")  # a question is not an answer
    with pytest.raises(NotFound):
        store.give_feedback(alice, 10**9, "up")
    assert store.feedback_counts() == [(answered.type.type, answered.strategy, "down", 1)]
    [record] = store.feedback_records()
    assert (record.question, record.verdict, record.comment, record.collection) == (
        "Why did the Western Roman Empire fall?",
        "down",
        "on reflection, wrong",
        "docs",
    )
    assert store.feedback_records("elsewhere") == []


# ---------------------------------------------------------------- export


def test_export_markdown_has_the_answer_citations_and_sources(store, answered):
    alice = store.add_user("alice", "admin")
    conversation, _ = _asked(store, alice, "docs", answered)
    text = store.export_markdown(alice, conversation.id)
    assert text.startswith("# Why did the Western Roman Empire fall?\n")
    assert "## Question\n\nWhy did the Western Roman Empire fall?" in text
    assert answered.answer in text
    assert "### Citations" in text and "### Sources" in text
    for source in answered.sources:
        assert f"`{source.passage_id}`" in text
    assert "Trace id: `trace-1`" in text and f"type {answered.type.type}" in text


def test_export_json_has_every_message_the_full_result_and_the_verdict(store, answered):
    alice = store.add_user("alice", "admin")
    conversation, answer = _asked(store, alice, "docs", answered)
    store.give_feedback(alice, answer.id, "up", "good")
    exported = json.loads(json.dumps(store.export_json(alice, conversation.id)))
    assert exported["format"] == "typedrag-conversation/1"
    assert exported["conversation"]["id"] == conversation.id and exported["conversation"]["collection"] == "docs"
    [question, reply] = exported["messages"]
    assert question["role"] == "user" and reply["trace_id"] == "trace-1"
    assert reply["result"]["llm_calls"] == json.loads(answered.model_dump_json())["llm_calls"]
    assert reply["result"]["sources"][0]["passage_id"] == answered.sources[0].passage_id
    assert reply["feedback"]["verdict"] == "up" and reply["feedback"]["comment"] == "good"


# ---------------------------------------------------------------- sessions (the page's sign-in)


def test_a_session_lasts_while_its_key_its_user_and_its_lifetime_do(store, clock):
    from datetime import timedelta

    store.add_user("alice", "reader")
    key = store.create_key("alice")
    assert store.open_session("tdk_" + "x" * 40, timedelta(hours=1)) is None  # not a key
    opened = store.open_session(key.secret, timedelta(hours=1))
    assert opened is not None and opened.token not in repr(opened)
    assert store.session(opened.token).user.name == "alice"
    with store.db.reading() as c:  # the row holds the token's digest, never the token
        assert opened.token not in json.dumps([list(map(str, r)) for r in c.execute(sa.text("SELECT * FROM sessions"))])
    for forged in (opened.token[:-1] + ("A" if opened.token[-1] != "A" else "B"), "", "x" * 5000, None, 7):
        assert store.session(forged) is None
    clock.advance(minutes=59)
    assert store.session(opened.token) is not None
    clock.advance(minutes=2)
    assert store.session(opened.token) is None  # expired
    assert store.end_expired_sessions() == 1

    again = store.open_session(key.secret, timedelta(hours=1))
    store.set_disabled("alice", True)
    assert store.session(again.token) is None
    store.set_disabled("alice", False)
    assert store.session(again.token) is not None
    store.revoke_key("alice", key.key.prefix)
    assert store.session(again.token) is None  # revoking the key ends the sessions it opened

    other = store.open_session(store.create_key("alice").secret, timedelta(hours=1))
    assert store.end_session(other.token) is True and store.session(other.token) is None
    assert store.end_session(other.token) is False  # a replayed sign-out changes nothing


def test_a_session_of_the_servers_key_ends_when_the_key_changes(store):
    from datetime import timedelta

    opened = store.open_admin_session("the-servers-own-key", timedelta(hours=1))
    assert store.session(opened.token, "the-servers-own-key").user is None
    assert store.session(opened.token, "another-key-now") is None
    assert store.session(opened.token, None) is None
    with store.db.reading() as c:
        assert "the-servers-own-key" not in json.dumps(
            [list(map(str, r)) for r in c.execute(sa.text("SELECT * FROM sessions"))]
        )


def test_a_question_and_its_answer_are_kept_together_or_not_at_all(store, answered):
    alice = store.add_user("alice", "admin")
    conversation = store.start_conversation(alice, "docs")
    asked, reply, now = store.add_exchange(
        alice, conversation.id, "Why did Rome fall?", answered.answer, result=answered, trace_id="t" * 32
    )
    assert (asked.role, reply.role, reply.trace_id) == ("user", "assistant", "t" * 32)
    assert now.title == "Why did Rome fall?" and now.updated_at == reply.created_at
    assert store.conversation_with_history(alice, conversation.id) == (now, store.history(alice, conversation.id))
    assert [t.role for t in store.history(alice, conversation.id)] == ["user", "assistant"]
    with pytest.raises(InvalidInput):  # the answer is refused: the question is not kept either
        store.add_exchange(alice, conversation.id, "And then?", "x" * (2 << 20))
    assert [m.role for m in store.messages(alice, conversation.id)] == ["user", "assistant"]
    with pytest.raises(Forbidden):
        store.add_exchange(store.add_user("bob", "admin"), conversation.id, "hijack", "no")


def test_ten_thousand_conversations_list_a_page_at_a_time(store, clock):
    alice = store.add_user("alice", "admin")
    from typedrag.store.schema import conversations

    rows = [
        {
            "id": f"{n:032x}",
            "owner_id": alice.id,
            "collection": "docs",
            "title": f"conversation {n}",
            "created_at": clock(),
            "updated_at": clock(),
        }
        for n in range(10_000)
    ]
    with store.db.writing() as c:
        c.execute(sa.insert(conversations), rows)
    seen, cursor, pages = [], None, 0
    while True:
        page = store.conversations(alice, limit=200, cursor=cursor)
        seen += [c.id for c in page.items]
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert pages == 50 and len(seen) == len(set(seen)) == 10_000
    assert [c.title for c in store.conversations(alice, search="conversation 9999").items] == ["conversation 9999"]
