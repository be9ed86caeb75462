"""The store behind `typedrag serve`: users, API keys, grants per collection, saved conversations and feedback,
in SQLite (embedded, in the data directory) or PostgreSQL (shared by replicas), through SQLAlchemy Core with
Alembic migrations run on open. docs/store.md describes the schema and the API.

    >>> store = open_store(data="typedrag-data")           # doctest: +SKIP
    >>> alice = store.add_user("alice", "editor")           # doctest: +SKIP
    >>> print(store.create_key("alice").secret)             # doctest: +SKIP
"""

from typedrag.store.database import database_url
from typedrag.store.errors import (
    AlreadyExists,
    Forbidden,
    InvalidInput,
    NotFound,
    SchemaTooNew,
    StoreError,
    StoreUnavailable,
)
from typedrag.store.schema import LIMITS
from typedrag.store.records import (
    ApiKey,
    Conversation,
    Feedback,
    FeedbackRecord,
    Grant,
    Message,
    NewKey,
    NewSession,
    Page,
    Session,
    User,
)
from typedrag.store.store import EVERY_COLLECTION, Store, access_from, open_store

__all__ = [
    "EVERY_COLLECTION",
    "LIMITS",
    "AlreadyExists",
    "ApiKey",
    "Conversation",
    "Feedback",
    "FeedbackRecord",
    "Forbidden",
    "Grant",
    "InvalidInput",
    "Message",
    "NewKey",
    "NewSession",
    "NotFound",
    "Page",
    "SchemaTooNew",
    "Session",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "User",
    "access_from",
    "database_url",
    "open_store",
]
