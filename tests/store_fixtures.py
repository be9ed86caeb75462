"""The store's tests run on SQLite and on a real PostgreSQL server (tests/test_store*.py import these fixtures).

PostgreSQL: the server at TYPEDRAG_TEST_POSTGRES_URL (.ci/run starts one), else a throwaway cluster this
session starts from Debian's `postgresql` package (scripts/throwaway_postgres.sh). Each test gets a database of
its own. Without either, the PostgreSQL half is skipped, saying why, except in CI (CI=true), where it fails:
PostgreSQL is a hard dependency of the store's tests there.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
POSTGRES_ENV = "TYPEDRAG_TEST_POSTGRES_URL"


class Clock:
    """A store's clock that moves only when told: times in tests without waiting."""

    def __init__(self) -> None:
        self.moment = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.moment

    def advance(self, **delta: float) -> None:
        self.moment += timedelta(**delta)


@pytest.fixture(scope="session")
def postgres_server():
    """The URL of a PostgreSQL server whose user may create databases."""
    given = os.environ.get(POSTGRES_ENV)
    if given:
        yield given
        return
    problem = "no PostgreSQL: set TYPEDRAG_TEST_POSTGRES_URL, or install Debian's postgresql package"
    if glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        folder = tempfile.mkdtemp(prefix="typedrag-pg-")
        os.chmod(folder, 0o755)  # the postgres user runs the server when the tests run as root
        started = subprocess.run(["bash", str(ROOT / "scripts" / "throwaway_postgres.sh"), "start", folder],
                                 capture_output=True, text=True, timeout=300)  # fmt: skip
        if started.returncode == 0:
            try:
                yield started.stdout.strip()
            finally:
                subprocess.run(["bash", str(ROOT / "scripts" / "throwaway_postgres.sh"), "stop", folder], timeout=120)
                shutil.rmtree(folder, ignore_errors=True)
            return
        problem = f"a throwaway PostgreSQL cluster did not start: {started.stderr.strip()[-500:]}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{problem} (CI=true: the store's tests need PostgreSQL)")
    pytest.skip(problem)


def fresh_postgres_database(server: str) -> tuple[str, str]:
    """(URL, name) of a new empty database on the server."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return server.rsplit("/", 1)[0] + "/" + name, name


def drop_postgres_database(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """An empty database of each kind: an SQLite file, or a database of its own on the PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'typedrag.db'}"
        return
    server = request.getfixturevalue("postgres_server")
    url, name = fresh_postgres_database(server)
    try:
        yield url
    finally:
        drop_postgres_database(server, name)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(store_url, clock):
    from typedrag.store import open_store

    opened = open_store(store_url, clock=clock)
    try:
        yield opened
    finally:
        opened.close()
