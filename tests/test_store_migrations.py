"""Issue 52: the store's schema migrations run on open and are tested from each earlier schema, on SQLite and
PostgreSQL: a database at any revision (`database_at`), with the rows that revision could hold (`SEEDS`), is
opened by the store, reaches the newest revision, matches the tables typedrag.store.schema declares and keeps
its rows.

A new migration adds its revision to SEEDS (rows written as that revision's tables had them) and a test of what
it changes; the parametrised tests below then run it from every earlier revision.
"""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from store_fixtures import postgres_server, store_url  # noqa: F401
from typedrag.store import SchemaTooNew, open_store
from typedrag.store.database import MIGRATIONS, Database, database_url
from typedrag.store.schema import metadata


def _config(connection=None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


SCRIPTS = ScriptDirectory.from_config(_config())
HEAD = SCRIPTS.get_current_head()
EARLIER = ["base"] + [s.revision for s in reversed(list(SCRIPTS.walk_revisions())) if s.revision != HEAD]


def database_at(url: str, revision: str) -> Database:
    """A database whose schema is at `revision` ("base": empty), built by the migrations up to it."""
    database = Database(database_url(url))
    if revision != "base":
        with database.writing() as connection:
            command.upgrade(_config(connection), revision)
    return database


def _seed_0001(connection: sa.Connection) -> None:
    when = datetime(2026, 1, 2, 3, 4, 5)
    connection.execute(
        sa.text("INSERT INTO users (name, role, created_at, disabled) VALUES ('old', 'editor', :t, false)"), {"t": when}
    )
    connection.execute(
        sa.text("INSERT INTO grants (user_id, collection, access, created_at) VALUES (1, 'docs', 'write', :t)"),
        {"t": when},
    )
    connection.execute(
        sa.text(
            "INSERT INTO conversations (id, owner_id, collection, title, created_at, updated_at) "
            "VALUES ('0123456789abcdef0123456789abcdef', 1, 'docs', 'kept across migrations', :t, :t)"
        ),
        {"t": when},
    )
    connection.execute(
        sa.text(
            "INSERT INTO messages (conversation_id, role, text, created_at) VALUES ('0123456789abcdef0123456789abcdef', 'user', 'why?', :t)"
        ),
        {"t": when},
    )


def _seed_0002(connection: sa.Connection) -> None:
    _seed_0001(connection)
    when = datetime(2026, 1, 2, 3, 4, 5)
    connection.execute(
        sa.text(
            "INSERT INTO api_keys (user_id, prefix, hash, label, created_at) VALUES (1, '0123456789ab', 'x', '', :t)"
        ),
        {"t": when},
    )
    connection.execute(
        sa.text("INSERT INTO sessions (id, user_id, key_id, created_at, expires_at) VALUES (:id, 1, 1, :t, :t)"),
        {"id": "0" * 64, "t": when},
    )


# Rows a database at each revision may hold, written with that revision's tables.
SEEDS = {"base": None, "0001": _seed_0001, "0002": _seed_0002}


def test_every_revision_has_its_seed_rows():
    assert set(SEEDS) == {"base", *(s.revision for s in SCRIPTS.walk_revisions())}


@pytest.mark.parametrize("revision", EARLIER)
def test_opening_a_database_at_an_earlier_revision_migrates_it_to_the_declared_schema(store_url, revision):
    database = database_at(store_url, revision)
    seed = SEEDS[revision]
    if seed is not None:
        with database.writing() as connection:
            seed(connection)
    database.dispose()
    store = open_store(store_url)
    try:
        assert store.db.revision() == HEAD
        with store.db.reading() as connection:
            differences = compare_metadata(
                MigrationContext.configure(connection, opts={"compare_type": True}), metadata
            )
        assert differences == []
        if seed is not None:
            user = store.user("old")
            assert store.access(user, "docs") == "write"
            assert [c.title for c in store.conversations(user).items] == ["kept across migrations"]
    finally:
        store.close()


def test_the_newest_schema_matches_the_declared_tables_and_reopening_changes_nothing(store_url):
    store = open_store(store_url)
    store.add_user("alice")
    store.close()
    again = open_store(store_url)
    try:
        assert again.db.revision() == HEAD and [u.name for u in again.users()] == ["alice"]
        with again.db.reading() as connection:
            assert compare_metadata(MigrationContext.configure(connection, opts={"compare_type": True}), metadata) == []
            tables = set(sa.inspect(connection).get_table_names())
        assert tables == {t.name for t in metadata.sorted_tables} | {"alembic_version"}
    finally:
        again.close()


def test_every_migration_downgrades_and_upgrades_again(store_url):
    database = database_at(store_url, HEAD)
    with database.writing() as connection:
        command.downgrade(_config(connection), "base")
    with database.reading() as connection:
        assert set(sa.inspect(connection).get_table_names()) <= {"alembic_version"}
    database.dispose()
    store = open_store(store_url)
    assert store.db.revision() == HEAD
    store.close()


def test_a_database_migrated_by_a_newer_typedrag_is_refused_untouched(store_url):
    open_store(store_url).close()
    database = Database(database_url(store_url))
    with database.writing() as connection:
        connection.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    database.dispose()
    with pytest.raises(
        SchemaTooNew, match="schema revision 9999, which this typedrag does not know .* upgrade typedrag"
    ):
        open_store(store_url)
    database = Database(database_url(store_url))
    assert database.revision() == "9999"
    database.dispose()
