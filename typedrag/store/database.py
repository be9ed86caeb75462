"""Opening the store's database: which URL, the engine's settings on each kind, and the migrations run on open.

SQLite (the embedded default, a file in the data directory) runs in WAL mode: readers never wait, one
writer at a time. A write transaction starts with BEGIN IMMEDIATE, so it takes the write lock before it
reads anything and waits for it (busy timeout) instead of failing when another connection wrote in between;
within a process, writers also queue on a lock (`Database.writing`), so threads do not spin on the busy
timeout. PostgreSQL (`postgresql://...`, psycopg 3) is for a store shared by replicas.

Migrations (Alembic, in migrations/ beside this file) run on every open, inside one transaction that holds
the database's write lock (SQLite) or an advisory lock (PostgreSQL): two processes starting at once migrate once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection

from typedrag.extras import require
from typedrag.redact import redact_text
from typedrag.store.errors import InvalidInput, SchemaTooNew, StoreUnavailable

DEFAULT_FILE = "typedrag.db"  # in the data directory
BUSY_TIMEOUT_MS = 15_000  # how long an SQLite writer waits for another's transaction to end
MIGRATIONS = Path(__file__).parent / "migrations"
_ADVISORY_LOCK = 0x7479_7065_6472_6167 & 0x7FFF_FFFF_FFFF_FFFF  # "typedrag": one migration at a time on PostgreSQL


def database_url(database: str | None = None, data: Path | str | None = None) -> sa.URL:
    """The URL to open: `database` as given (sqlite:///PATH, postgresql://...), else an SQLite file in `data`."""
    if not database:
        folder = Path(data if data is not None else "typedrag-data").expanduser()
        return sa.URL.create("sqlite", database=str(folder / DEFAULT_FILE))
    try:
        url = sa.make_url(database)
    except sa.exc.ArgumentError:
        raise InvalidInput(
            "--database is not a database URL: give sqlite:///PATH or postgresql://USER@HOST/NAME"
        ) from None
    if url.get_backend_name() == "sqlite":
        if url.database in (None, "", ":memory:"):
            raise InvalidInput(
                "--database sqlite:// needs a file (sqlite:///PATH): an in-memory store forgets everything"
            )
        return url.set(drivername="sqlite")
    if url.get_backend_name() in ("postgresql", "postgres"):
        return url.set(drivername="postgresql+psycopg")
    raise InvalidInput(
        f"--database {url.get_backend_name()!r} is not supported: give sqlite:///PATH or postgresql://USER@HOST/NAME"
    )


def shown(url: sa.URL) -> str:
    """The URL with its password masked, for messages."""
    return url.render_as_string(hide_password=True)


class Database:
    """An engine for the store's URL, and the transactions the store runs on it."""

    def __init__(self, url: sa.URL, *, pool_size: int = 5, pool_timeout: float = 30.0) -> None:
        self.url = url
        self.kind = url.get_backend_name()
        self._write_lock = threading.Lock() if self.kind == "sqlite" else None
        if self.kind == "sqlite":
            folder = Path(url.database or "").expanduser().parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise StoreUnavailable(f"cannot make the data directory {folder}: {error.strerror or error}") from None
            self.engine = sa.create_engine(
                url,
                hide_parameters=True,
                pool_size=pool_size,
                max_overflow=2 * pool_size,
                pool_timeout=pool_timeout,
                connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000},
            )
            event.listen(self.engine, "connect", _sqlite_on_connect)
            event.listen(self.engine, "begin", _sqlite_on_begin)
        else:
            require("psycopg", "postgres", "a PostgreSQL store (--database postgresql://...)")
            # pre-ping: a replica behind a load balancer outlives connections the server or a proxy dropped
            self.engine = sa.create_engine(
                url,
                hide_parameters=True,
                pool_size=pool_size,
                max_overflow=2 * pool_size,
                pool_timeout=pool_timeout,
                pool_pre_ping=True,
            )

    def __repr__(self) -> str:
        return f"Database({shown(self.url)!r})"

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection to read on: on SQLite a read transaction (one snapshot); on PostgreSQL each statement on its
        own, as READ COMMITTED gives each statement its own snapshot anyway (no BEGIN and COMMIT round trips)."""
        with self._failures(), self.engine.connect() as connection:
            if self.kind == "postgresql":
                yield connection.execution_options(isolation_level="AUTOCOMMIT")
                return
            with connection.begin():
                yield connection

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """A write transaction: all of it or none of it. On SQLite, one writer at a time."""
        with self._failures():
            if self._write_lock is None:
                with self.engine.begin() as connection:
                    yield connection
                return
            with self._write_lock, self.engine.connect() as connection:
                with connection.execution_options(typedrag_write=True).begin():
                    yield connection

    @contextmanager
    def _failures(self) -> Iterator[None]:
        """The database cannot be reached, stayed locked, or no pooled connection came free in time: one line naming
        it (its password masked)."""
        try:
            yield
        except (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError) as error:
            reason = redact_text(" ".join(str(getattr(error, "orig", None) or error).split()))[:300]
            raise StoreUnavailable(f"the store at {shown(self.url)} cannot be used: {reason}") from None

    def migrate(self) -> str | None:
        """Bring the schema to the newest revision this typedrag knows; the revision it is at afterwards."""
        from alembic import command
        from alembic.config import Config
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        scripts = ScriptDirectory.from_config(config)
        head = scripts.get_current_head()
        with self.writing() as connection:
            if self.kind == "postgresql":
                connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY_LOCK})
            current = MigrationContext.configure(connection).get_current_revision()
            if current == head:
                return head
            if current is not None and current not in {s.revision for s in scripts.walk_revisions()}:
                raise SchemaTooNew(
                    f"the store at {shown(self.url)} has schema revision {current}, which this typedrag does not know "
                    f"(its newest is {head}): a newer typedrag migrated it; upgrade typedrag to use it"
                )
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        return head

    def revision(self) -> str | None:
        from alembic.runtime.migration import MigrationContext

        with self.reading() as connection:
            return MigrationContext.configure(connection).get_current_revision()

    def dispose(self) -> None:
        self.engine.dispose()


def open_database(url: sa.URL, *, migrate: bool = True, pool_size: int = 5, pool_timeout: float = 30.0) -> Database:
    """An engine on `url` with its schema migrated to the newest revision; StoreUnavailable when it cannot be reached."""
    database = Database(url, pool_size=pool_size, pool_timeout=pool_timeout)
    try:
        if migrate:
            database.migrate()
    except BaseException:
        database.dispose()
        raise
    return database


def _sqlite_on_connect(dbapi_connection, _record) -> None:
    dbapi_connection.isolation_level = None  # transactions are begun by _sqlite_on_begin, not by the driver
    cursor = dbapi_connection.cursor()
    for pragma in (
        f"busy_timeout = {BUSY_TIMEOUT_MS}",
        "journal_mode = WAL",
        "synchronous = NORMAL",
        "foreign_keys = ON",
    ):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    writing = connection.get_execution_options().get("typedrag_write", False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")
