"""The store's tables, declared once with SQLAlchemy Core: the code queries these and the migrations must build
exactly these (tests/test_store_migrations.py compares a migrated database with this metadata).

Times are UTC, stored without a zone (SQLite has none) and handed out zone-aware. Free text has a bound in
characters (`LIMITS`); the API refuses longer input with a clear error before the database sees it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

# Bounds of each free-text field, in characters (the API checks them; VARCHAR lengths back them on PostgreSQL).
LIMITS = {
    "user_name": 128,
    "collection": 128,
    "title": 300,
    "key_label": 100,
    "message_text": 200_000,
    "result_json": 8_000_000,
    "trace_id": 128,
    "label": 64,  # method, type, strategy
    "comment": 4_000,
    "helpful_ids": 100,  # passage ids marked helpful on one answer
    "passage_id": 512,
    "search": 200,
}

ROLES = ("admin", "editor", "reader")
ACCESS = ("read", "write")
MESSAGE_ROLES = ("user", "assistant", "system")
VERDICTS = ("up", "down")

# Constraint names follow one convention, so a later migration can name what it alters on both databases.
metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A UTC time: stored naive (the same text order on SQLite, a plain timestamp on PostgreSQL), read aware."""

    impl = sa.DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("a stored time must be timezone-aware")
        return value.astimezone(timezone.utc).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc)


# SQLite makes only an INTEGER PRIMARY KEY an auto-incrementing rowid.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


users = sa.Table(
    "users",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(LIMITS["user_name"]), nullable=False, unique=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column(
        "disabled", sa.Boolean(name="disabled_bool", create_constraint=True), nullable=False, server_default=sa.false()
    ),
    sa.CheckConstraint(_in("role", ROLES), name="role"),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
    # The public part of a key (`tdk_<prefix>_<secret>`): found by it, then checked against the hash.
    sa.Column("prefix", sa.String(32), nullable=False, unique=True),
    sa.Column("hash", sa.String(256), nullable=False),  # argon2id of the whole key; the key itself is never stored
    sa.Column("label", sa.String(LIMITS["key_label"]), nullable=False, server_default=""),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("last_used_at", UTCDateTime(), nullable=True),
    sa.Column("revoked_at", UTCDateTime(), nullable=True),
)

grants = sa.Table(
    "grants",
    metadata,
    sa.Column("user_id", sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("collection", sa.String(LIMITS["collection"]), primary_key=True),  # "*": every collection
    sa.Column("access", sa.String(8), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint(_in("access", ACCESS), name="access"),
)

conversations = sa.Table(
    "conversations",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),  # random (secrets.token_hex): not guessable from another's
    sa.Column("owner_id", sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    sa.Column("collection", sa.String(LIMITS["collection"]), nullable=False),
    sa.Column("title", sa.String(LIMITS["title"]), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.Column("deleted_at", UTCDateTime(), nullable=True),  # hidden at once, removed by the next purge
    # A user's list, newest first, one page after another (keyset on updated_at, id).
    sa.Index("ix_conversations_owner_recent", "owner_id", "updated_at", "id"),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("conversation_id", sa.ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("text", sa.Text(), nullable=False),
    sa.Column("result", sa.Text(), nullable=True),  # an answer's full AnswerResult as JSON, trace included
    sa.Column("trace_id", sa.String(LIMITS["trace_id"]), nullable=True),
    sa.Column("method", sa.String(LIMITS["label"]), nullable=True),
    sa.Column("type", sa.String(LIMITS["label"]), nullable=True),
    sa.Column("strategy", sa.String(LIMITS["label"]), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint(_in("role", MESSAGE_ROLES), name="role"),
)

feedback = sa.Table(
    "feedback",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("message_id", sa.ForeignKey("messages.id", ondelete="CASCADE"), nullable=False),
    sa.Column("user_id", sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("verdict", sa.String(8), nullable=False),
    sa.Column("comment", sa.Text(), nullable=False, server_default=""),
    sa.Column("helpful", sa.Text(), nullable=False, server_default="[]"),  # JSON list of passage ids
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.UniqueConstraint("message_id", "user_id"),  # a second vote on an answer replaces the first
    sa.CheckConstraint(_in("verdict", VERDICTS), name="verdict"),
)

sessions = sa.Table(
    "sessions",
    metadata,
    # A signed-in page's cookie is a random token; the row is found by its SHA-256 (the token is stored nowhere).
    sa.Column("id", sa.String(64), primary_key=True),
    # A user's session is signed in with one of their keys: revoking the key, disabling or removing the user ends it.
    sa.Column("user_id", sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=True, index=True),
    sa.Column("key_id", sa.ForeignKey("api_keys.id", ondelete="CASCADE"), nullable=True),
    # A session of the server's own key (`serve --api-key-env`, no row of its own): an argon2 hash of that key, so
    # the session ends when the key is changed.
    sa.Column("admin_key_hash", sa.String(256), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("expires_at", UTCDateTime(), nullable=False, index=True),
    sa.CheckConstraint("(user_id IS NOT NULL AND key_id IS NOT NULL) OR admin_key_hash IS NOT NULL", name="owner"),
)
