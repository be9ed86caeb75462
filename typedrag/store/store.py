"""The store's API: users, keys, grants, conversations, messages and feedback, as the server and the commands use them.

Every method runs in one transaction (all or nothing) with bound parameters only. Methods that act for a user
take the `User` that `authenticate` returned and see only what that user owns: another user's conversation,
message or feedback is `Forbidden` (403 on the server), and nothing of it is shown. Managing users, keys and
grants is for admins; the store does not know who asks for those (the CLI is trusted, the server checks the
role) and says so in docs/store.md.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel

from typedrag.history import Turn
from typedrag.store.database import Database, database_url, open_database
from typedrag.store.errors import AlreadyExists, Forbidden, InvalidInput, NotFound, StoreError
from typedrag.store.keys import HASHER, VerifiedKeys, mask_keys, new_key, prefix_of
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
from typedrag.store.schema import (
    ACCESS,
    LIMITS,
    MESSAGE_ROLES,
    ROLES,
    VERDICTS,
    api_keys,
    conversations,
    feedback,
    grants,
    messages,
    sessions,
    users,
)

EVERY_COLLECTION = "*"  # a grant on it is a grant on each collection
LAST_USED_EVERY = timedelta(minutes=1)  # a key's last-used time is written at most this often
PAGE_LIMIT = 200  # the most conversations one page lists
_CONVERSATION_ID = re.compile(r"[0-9a-f]{32}")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # C0 controls but tab, newline, carriage return


# ---------------------------------------------------------------- input checks


def clean_text(value: Any, what: str, limit: int, *, one_line: bool = False, required: bool = True) -> str:
    """`value` as stored text: control characters dropped (NUL is refused by PostgreSQL), one line if asked,
    InvalidInput if it is not text, empty when required, or longer than `limit` characters."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text")
    text = _CONTROL.sub("", value)
    text = " ".join(text.split()) if one_line else text.strip()
    if required and not text:
        raise InvalidInput(f"{what} is empty")
    if len(text) > limit:
        raise InvalidInput(f"{what} is too long: {len(text):,} characters, at most {limit:,}")
    return text


def _choice(value: Any, what: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise InvalidInput(f"{what} must be one of {', '.join(allowed)}")
    return str(value)


def _collection(value: Any, *, wildcard: bool = False) -> str:
    name = clean_text(value, "the collection name", LIMITS["collection"], one_line=True)
    if name == EVERY_COLLECTION and not wildcard:
        raise InvalidInput("'*' stands for every collection in a grant; a conversation belongs to one collection")
    return name


def _shown(value: Any) -> str:
    """What a user typed, as a message may quote it: one line, bounded, any key in it masked."""
    text = clean_text(value, "value", 10**9, one_line=True, required=False) if isinstance(value, str) else ""
    return mask_keys(text[: LIMITS["collection"]])


def _conversation_id(value: Any) -> str:
    if not isinstance(value, str) or not _CONVERSATION_ID.fullmatch(value):
        raise NotFound("no such conversation")
    return value


def _message_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**63:
        raise NotFound("no such message")
    return value


def _result_json(result: Any) -> str | None:
    """An answer's result as the JSON stored: an AnswerResult, a dict or JSON text."""
    if result is None:
        return None
    if isinstance(result, BaseModel):
        text = result.model_dump_json()
    elif isinstance(result, dict):
        text = json.dumps(result, ensure_ascii=False)
    elif isinstance(result, str):
        try:
            parsed = json.loads(result)
        except ValueError:
            raise InvalidInput("the answer's result is not JSON") from None
        if not isinstance(parsed, dict):
            raise InvalidInput("the answer's result must be a JSON object")
        text = result
    else:
        raise InvalidInput("the answer's result must be an AnswerResult, a dict or JSON text")
    if len(text) > LIMITS["result_json"]:
        raise InvalidInput(
            f"the answer's result is too long: {len(text):,} characters of JSON, at most {LIMITS['result_json']:,}"
        )
    return text.replace("\\u0000", "")  # PostgreSQL's text holds no NUL, even escaped inside JSON


def _label(value: Any) -> str | None:
    return (
        clean_text(value, "a label", LIMITS["label"], one_line=True)
        if isinstance(value, str) and value.strip()
        else None
    )


# ---------------------------------------------------------------- the store


class Store:
    """Users, keys, grants, conversations, messages and feedback in one database (see the module docstring)."""

    def __init__(self, database: Database, *, clock: Callable[[], datetime] | None = None) -> None:
        self.db = database
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._verified = VerifiedKeys()

    def __repr__(self) -> str:
        return f"Store({self.db!r})"

    def close(self) -> None:
        self.db.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def now(self) -> datetime:
        return self._clock()

    # ------------------------------------------------------------ users

    def add_user(self, name: str, role: str = "reader") -> User:
        name = clean_text(name, "the user name", LIMITS["user_name"], one_line=True)
        if mask_keys(name) != name:
            raise InvalidInput(
                "that user name holds an API key: a key goes after 'Authorization: Bearer', never in a name"
            )
        role = _choice(role, "the role", ROLES)
        with self.db.writing() as c:
            if c.execute(sa.select(users.c.id).where(users.c.name == name)).first() is not None:
                raise AlreadyExists(f"a user named {name!r} exists already")
            created = self.now()
            user_id = c.execute(
                sa.insert(users).values(name=name, role=role, created_at=created, disabled=False)
            ).inserted_primary_key[0]  # type: ignore[index]
        return User(user_id, name, role, created, False)

    def user(self, name: str) -> User:
        with self.db.reading() as c:
            return self._user(c, name)

    def users(self) -> list[User]:
        with self.db.reading() as c:
            return [_user(row) for row in c.execute(sa.select(users).order_by(users.c.name))]

    def set_disabled(self, name: str, disabled: bool) -> User:
        """A disabled user's keys stop working at once; their conversations stay."""
        with self.db.writing() as c:
            user = self._user(c, name)
            c.execute(sa.update(users).where(users.c.id == user.id).values(disabled=disabled))
        return User(user.id, user.name, user.role, user.created_at, disabled)

    def set_role(self, name: str, role: str) -> User:
        role = _choice(role, "the role", ROLES)
        with self.db.writing() as c:
            user = self._user(c, name)
            c.execute(sa.update(users).where(users.c.id == user.id).values(role=role))
        return User(user.id, user.name, role, user.created_at, user.disabled)

    def remove_user(self, name: str) -> int:
        """Remove a user with their keys, grants, conversations and feedback; how many conversations went."""
        with self.db.writing() as c:
            user = self._user(c, name)
            count = c.execute(
                sa.select(sa.func.count()).select_from(conversations).where(conversations.c.owner_id == user.id)
            ).scalar_one()
            c.execute(sa.delete(users).where(users.c.id == user.id))  # the rest follows by ON DELETE CASCADE
        return int(count)

    def _user(self, c: sa.Connection, name: str) -> User:
        wanted = (
            clean_text(name, "the user name", 10**9, one_line=True, required=False) if isinstance(name, str) else ""
        )
        row = (
            c.execute(sa.select(users).where(users.c.name == wanted)).first()
            if 0 < len(wanted) <= LIMITS["user_name"]
            else None
        )
        if row is None:
            raise NotFound(f"no user named {mask_keys(wanted[: LIMITS['user_name']])!r}")
        return _user(row)

    # ------------------------------------------------------------ keys

    def create_key(self, user_name: str, label: str = "") -> NewKey:
        """A new key for the user: `NewKey.secret` is the key, to show once; only its hash is stored."""
        label = clean_text(label, "the key's label", LIMITS["key_label"], one_line=True, required=False)
        material = new_key()
        with self.db.writing() as c:
            user = self._user(c, user_name)
            created = self.now()
            key_id = c.execute(
                sa.insert(api_keys).values(
                    user_id=user.id, prefix=material.prefix, hash=material.hash, label=label, created_at=created
                )
            ).inserted_primary_key[0]  # type: ignore[index]
        return NewKey(ApiKey(key_id, user.name, material.prefix, label, created, None, None), material.key)

    def keys(self, user_name: str | None = None) -> list[ApiKey]:
        """Every key (of one user, or of all), oldest first, revoked ones included."""
        query = sa.select(api_keys, users.c.name).join(users).order_by(api_keys.c.id)
        with self.db.reading() as c:
            if user_name is not None:
                query = query.where(api_keys.c.user_id == self._user(c, user_name).id)
            return [_key(row) for row in c.execute(query)]

    def revoke_key(self, user_name: str, prefix: str) -> ApiKey:
        """Revoke the user's key with this prefix (`tdk_<prefix>_...`, as `keys` lists it); it stops working at once."""
        wanted = prefix.strip().removeprefix("tdk_")[:12] if isinstance(prefix, str) else ""
        with self.db.writing() as c:
            user = self._user(c, user_name)
            row = c.execute(
                sa.select(api_keys, users.c.name)
                .join(users)
                .where(api_keys.c.user_id == user.id, api_keys.c.prefix == wanted)
            ).first()
            if row is None:
                # nothing of what was given is echoed: it may be a whole key pasted in the wrong place
                raise NotFound(
                    f"{user.name!r} has no key with that prefix (`typedrag users key list` shows their keys)"
                )
            revoked = row.revoked_at or self.now()
            c.execute(sa.update(api_keys).where(api_keys.c.id == row.id).values(revoked_at=revoked))
        self._verified.forget(row.hash)
        key = _key(row)
        return ApiKey(key.id, key.user, key.prefix, key.label, key.created_at, key.last_used_at, revoked)

    def authenticate(self, presented: str) -> User | None:
        """The user a presented key belongs to; None for a malformed, unknown, wrong or revoked key, or a disabled
        user. The key is compared in constant time (argon2, then a digest); its last-used time is written at
        most once a minute."""
        found = self._authenticated(presented)
        return found[0] if found is not None else None

    def _authenticated(self, presented: str) -> tuple[User, int] | None:
        """(the user, the key's row id) of a presented key that authenticates."""
        prefix = prefix_of(presented) if isinstance(presented, str) else None
        if prefix is None:
            return None
        with self.db.reading() as c:
            row = c.execute(
                sa.select(
                    api_keys.c.id.label("key_id"),
                    api_keys.c.hash,
                    api_keys.c.revoked_at,
                    api_keys.c.last_used_at,
                    users.c.id,
                    users.c.name,
                    users.c.role,
                    users.c.created_at,
                    users.c.disabled,
                )
                .join(users)
                .where(api_keys.c.prefix == prefix)
            ).first()
        if row is None or row.revoked_at is not None or row.disabled:
            return None
        if not self._verified.check(row.hash, presented):
            return None
        now = self.now()
        if row.last_used_at is None or now - row.last_used_at >= LAST_USED_EVERY:
            stale = sa.or_(api_keys.c.last_used_at.is_(None), api_keys.c.last_used_at <= now - LAST_USED_EVERY)
            with self.db.writing() as c:  # conditional: of replicas checking the same key at once, one writes
                c.execute(sa.update(api_keys).where(api_keys.c.id == row.key_id, stale).values(last_used_at=now))
        return User(row.id, row.name, row.role, row.created_at, bool(row.disabled)), int(row.key_id)

    def has_users(self) -> bool:
        """Whether any account exists: a server with none (and no key of its own) stays open on loopback."""
        with self.db.reading() as c:
            return c.execute(sa.select(users.c.id).limit(1)).first() is not None

    # ------------------------------------------------------------ sessions

    def open_session(self, presented: str, lifetime: timedelta) -> NewSession | None:
        """Sign a page in with a user's key: a new session for `lifetime`, or None when the key does not authenticate.
        The session lasts while the key does: revoking it, or disabling or removing the user, ends the session."""
        found = self._authenticated(presented)
        if found is None:
            return None
        user, key_id = found
        return self._new_session(lifetime, user=user, user_id=user.id, key_id=key_id)

    def open_admin_session(self, server_key: str, lifetime: timedelta) -> NewSession:
        """A session of the server's own key (`serve --api-key-env`), which has no row: the session keeps an argon2
        hash of it and ends when the server's key is another."""
        return self._new_session(lifetime, user=None, admin_key_hash=HASHER.hash(server_key))

    def _new_session(self, lifetime: timedelta, *, user: User | None, **owner: Any) -> NewSession:
        token = secrets.token_urlsafe(32)
        now = self.now()
        with self.db.writing() as c:
            c.execute(
                sa.insert(sessions).values(id=_session_id(token), created_at=now, expires_at=now + lifetime, **owner)
            )
        return NewSession(Session(user, now + lifetime), token)

    def session(self, token: str, server_key: str | None = None) -> Session | None:
        """The session a cookie's token names, if it is still good: not expired, not signed out, its key not revoked
        and its user enabled (a session of the server's key: that key still `server_key`). None for anything else."""
        if not isinstance(token, str) or not 20 <= len(token) <= 100:
            return None
        query = (
            sa.select(
                sessions.c.admin_key_hash,
                sessions.c.expires_at,
                sessions.c.user_id,
                api_keys.c.revoked_at,
                users.c.name,
                users.c.role,
                users.c.created_at,
                users.c.disabled,
            )
            .select_from(
                sessions.outerjoin(users, users.c.id == sessions.c.user_id).outerjoin(
                    api_keys, api_keys.c.id == sessions.c.key_id
                )
            )
            .where(sessions.c.id == _session_id(token), sessions.c.expires_at > self.now())
        )
        with self.db.reading() as c:
            row = c.execute(query).first()
        if row is None:
            return None
        if row.user_id is not None:
            if row.name is None or row.disabled or row.revoked_at is not None:
                return None
            return Session(User(row.user_id, row.name, row.role, row.created_at, False), row.expires_at)
        if row.admin_key_hash and server_key and self._verified.check(row.admin_key_hash, server_key):
            return Session(None, row.expires_at)
        return None

    def end_session(self, token: str) -> bool:
        """Sign out: the session's row is removed, so its cookie is refused from now on, by every replica."""
        if not isinstance(token, str) or not 20 <= len(token) <= 100:
            return False
        with self.db.writing() as c:
            return bool(c.execute(sa.delete(sessions).where(sessions.c.id == _session_id(token))).rowcount)

    def end_expired_sessions(self) -> int:
        with self.db.writing() as c:
            return int(c.execute(sa.delete(sessions).where(sessions.c.expires_at <= self.now())).rowcount)

    # ------------------------------------------------------------ grants

    def grant(self, user_name: str, collection: str, access: str = "read") -> Grant:
        """Let the user read (ask, open sources) or write (also upload, delete documents) a collection, or every
        collection ('*'). A reader can only be granted read; an admin needs no grant."""
        collection = _collection(collection, wildcard=True)
        access = _choice(access, "the access", ACCESS)
        with self.db.writing() as c:
            user = self._user(c, user_name)
            if access == "write" and user.role == "reader":
                raise InvalidInput(f"{user.name!r} is a reader, who can only read; make them an editor to grant write")
            row = {"user_id": user.id, "collection": collection, "access": access, "created_at": self.now()}
            insert = _upsert(c)(grants).values(**row)
            c.execute(insert.on_conflict_do_update(index_elements=["user_id", "collection"], set_={"access": access}))
        return Grant(user.name, collection, access)

    def revoke_grant(self, user_name: str, collection: str) -> bool:
        """Take a user's grant on a collection away; False when there was none."""
        collection = _collection(collection, wildcard=True)
        with self.db.writing() as c:
            user = self._user(c, user_name)
            gone = c.execute(
                sa.delete(grants).where(grants.c.user_id == user.id, grants.c.collection == collection)
            ).rowcount
        return bool(gone)

    def grants(self, user_name: str | None = None) -> list[Grant]:
        query = (
            sa.select(users.c.name, grants.c.collection, grants.c.access)
            .join(users)
            .order_by(users.c.name, grants.c.collection)
        )
        with self.db.reading() as c:
            if user_name is not None:
                query = query.where(grants.c.user_id == self._user(c, user_name).id)
            return [Grant(row.name, row.collection, row.access) for row in c.execute(query)]

    def grants_of(self, user: User) -> dict[str, str]:
        """The user's grants as they are now, {collection: access} ('*' among them): what a request's caller carries,
        read once per request (`access_from` decides with them)."""
        with self.db.reading() as c:
            return {
                row.collection: row.access
                for row in c.execute(sa.select(grants.c.collection, grants.c.access).where(grants.c.user_id == user.id))
            }

    def access(self, user: User, collection: str) -> str | None:
        """What the user may do in a collection: "write", "read" or None. Admins write everywhere; others have
        their grant on it or on '*' (the higher); a reader never more than read; a disabled user nothing."""
        with self.db.reading() as c:
            return self._access(c, user, collection)

    def require(self, user: User, collection: str, need: str = "read") -> None:
        """Forbidden unless the user may `need` ("read" or "write") the collection."""
        have = self.access(user, collection)
        if have is None or (need == "write" and have != "write"):
            raise Forbidden(f"no {need} access to collection {_shown(collection)!r}")

    def readable(self, user: User, collections: Iterable[str]) -> list[str]:
        """The collections of these the user may read (to list only those)."""
        with self.db.reading() as c:
            return [name for name in collections if self._access(c, user, name) is not None]

    def _access(self, c: sa.Connection, user: User, collection: str) -> str | None:
        current = c.execute(sa.select(users.c.role, users.c.disabled).where(users.c.id == user.id)).first()
        if current is None or current.disabled:
            return None
        if current.role == "admin":
            return "write"
        found = c.execute(
            sa.select(grants.c.collection, grants.c.access).where(
                grants.c.user_id == user.id, grants.c.collection.in_([collection, EVERY_COLLECTION])
            )
        ).all()
        return access_from(current.role, False, {row.collection: row.access for row in found}, collection)

    # ------------------------------------------------------------ conversations

    def start_conversation(self, user: User, collection: str, title: str = "") -> Conversation:
        """A new conversation of the user's in a collection they may read; an empty title is set from the first question."""
        collection = _collection(collection)
        title = clean_text(title, "the title", LIMITS["title"], one_line=True, required=False)
        conversation_id = secrets.token_hex(16)
        with self.db.writing() as c:
            self._require(c, user, collection, "read")
            now = self.now()
            c.execute(
                sa.insert(conversations).values(
                    id=conversation_id,
                    owner_id=user.id,
                    collection=collection,
                    title=title,
                    created_at=now,
                    updated_at=now,
                )
            )
        return Conversation(conversation_id, collection, title, now, now)

    def conversation(self, user: User, conversation_id: str) -> Conversation:
        """One of the user's conversations; NotFound for a deleted one, Forbidden for another's or once the user may no
        longer read its collection."""
        with self.db.reading() as c:
            return self._conversation(c, user, conversation_id)

    def conversations(
        self,
        user: User,
        *,
        collection: str | None = None,
        search: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        """The user's conversations, newest first, one page at a time (keyset: `cursor` from the page before).
        `search` finds a phrase in titles and messages, ignoring case; only collections the user may read count."""
        limit = max(1, min(int(limit), PAGE_LIMIT))
        query = sa.select(conversations).where(
            conversations.c.owner_id == user.id, conversations.c.deleted_at.is_(None)
        )
        if collection is not None:
            query = query.where(conversations.c.collection == _collection(collection))
        if search:
            term = clean_text(search, "the search", LIMITS["search"], one_line=True, required=False)
            if term:
                in_messages = (
                    sa.select(messages.c.id)
                    .where(
                        messages.c.conversation_id == conversations.c.id,
                        messages.c.text.icontains(term, autoescape=True),
                    )
                    .exists()
                )
                query = query.where(sa.or_(conversations.c.title.icontains(term, autoescape=True), in_messages))
        if cursor:
            updated, last_id = _decode_cursor(cursor)
            # a row-value comparison: both databases seek the index to it (an OR of the two parts scans from the top).
            # Its values take the columns' types explicitly: a tuple does not pass them on, and a zoned time would be
            # read in the PostgreSQL server's zone.
            after = sa.tuple_(
                sa.literal(updated, conversations.c.updated_at.type), sa.literal(last_id, conversations.c.id.type)
            )
            query = query.where(sa.tuple_(conversations.c.updated_at, conversations.c.id) < after)
        query = query.order_by(conversations.c.updated_at.desc(), conversations.c.id.desc()).limit(limit + 1)
        query = query.where(_may_read(user))
        with self.db.reading() as c:
            rows = c.execute(query).all()
        items = [_conversation(row) for row in rows[:limit]]
        more = len(rows) > limit
        return Page(items, _encode_cursor(items[-1]) if more and items else None)

    def rename_conversation(self, user: User, conversation_id: str, title: str) -> Conversation:
        title = clean_text(title, "the title", LIMITS["title"], one_line=True)
        with self.db.writing() as c:
            found = self._conversation(c, user, conversation_id)
            c.execute(sa.update(conversations).where(conversations.c.id == found.id).values(title=title))
        return Conversation(found.id, found.collection, title, found.created_at, found.updated_at)

    def delete_conversation(self, user: User, conversation_id: str) -> None:
        """Gone from every list and lookup at once; its messages and feedback are removed by the next `purge`."""
        with self.db.writing() as c:
            found = self._conversation(c, user, conversation_id, check_access=False)
            c.execute(sa.update(conversations).where(conversations.c.id == found.id).values(deleted_at=self.now()))

    def add_message(
        self, user: User, conversation_id: str, role: str, text: str, *, result: Any = None, trace_id: str | None = None
    ) -> Message:
        """Append a message to one of the user's conversations. An answer carries its `result` (AnswerResult, dict
        or JSON), whose method, type and strategy are kept beside it, and the trace id the server gave it."""
        row = self._message_row(role, text, result, trace_id)
        with self.db.writing() as c:
            return self._append(c, user, conversation_id, row)

    def _message_row(self, role: str, text: str, result: Any, trace_id: str | None) -> dict[str, Any]:
        """A message's values, checked and bounded before a transaction starts."""
        role = _choice(role, "the message role", MESSAGE_ROLES)
        text = clean_text(text, "the message", LIMITS["message_text"], required=role != "assistant")
        result_json = _result_json(result)
        trace = (
            clean_text(trace_id, "the trace id", LIMITS["trace_id"], one_line=True, required=False)
            if trace_id is not None
            else None
        )
        data: dict[str, Any] = json.loads(result_json) if result_json else {}
        kind: dict[str, Any] = data["type"] if isinstance(data.get("type"), dict) else {}
        labels = {
            "method": _label(data.get("method")),
            "type": _label(kind.get("type")),
            "strategy": _label(data.get("strategy")),
        }
        return {"role": role, "text": text, "result": result_json, "trace_id": trace or None, **labels}

    def _append(self, c: sa.Connection, user: User, conversation_id: str, row: dict[str, Any]) -> Message:
        found = self._conversation(c, user, conversation_id)
        now = self.now()
        message_id = c.execute(
            sa.insert(messages).values(conversation_id=found.id, created_at=now, **row)
        ).inserted_primary_key[0]  # type: ignore[index]
        changes: dict[str, Any] = {"updated_at": now}
        if not found.title and row["role"] == "user":
            changes["title"] = clean_text(row["text"], "the title", 10**9, one_line=True)[: LIMITS["title"]]
        c.execute(sa.update(conversations).where(conversations.c.id == found.id).values(**changes))
        return Message(
            message_id,
            found.id,
            row["role"],
            row["text"],
            now,
            row["trace_id"],
            row["method"],
            row["type"],
            row["strategy"],
            row["result"],
        )

    def add_exchange(
        self,
        user: User,
        conversation_id: str,
        question: str,
        answer: str,
        *,
        result: Any = None,
        trace_id: str | None = None,
    ) -> tuple[Message, Message, Conversation]:
        """A question and its answer appended together, in one transaction: a server killed while saving leaves both
        or neither, never a question without its answer. Returns them and the conversation as it is now."""
        asked_row = self._message_row("user", question, None, None)
        answer_row = self._message_row("assistant", answer, result, trace_id)
        with self.db.writing() as c:
            asked = self._append(c, user, conversation_id, asked_row)
            answered = self._append(c, user, conversation_id, answer_row)
            return asked, answered, self._conversation(c, user, conversation_id, check_access=False)

    def messages(self, user: User, conversation_id: str) -> list[Message]:
        """A conversation's messages in the order they were added, answers with their full results."""
        with self.db.reading() as c:
            found = self._conversation(c, user, conversation_id)
            rows = c.execute(sa.select(messages).where(messages.c.conversation_id == found.id).order_by(messages.c.id))
            return [_message(row) for row in rows]

    def history(self, user: User, conversation_id: str) -> list[Turn]:
        """The conversation as `Pipeline.answer(question, history=...)` takes it, to answer a follow-up in it."""
        return self.conversation_with_history(user, conversation_id)[1]

    def conversation_with_history(self, user: User, conversation_id: str) -> tuple[Conversation, list[Turn]]:
        """The conversation and its turns, in one read: what a question asked in it needs (the answers' result JSON,
        kilobytes each, is not read)."""
        with self.db.reading() as c:
            found = self._conversation(c, user, conversation_id)
            rows = c.execute(
                sa.select(messages.c.role, messages.c.text)
                .where(messages.c.conversation_id == found.id)
                .order_by(messages.c.id)
            )
            return found, [Turn(role=row.role, content=row.text) for row in rows if row.text]

    def purge(self, retention_days: int | None = None) -> int:
        """Remove deleted conversations, and with `retention_days` those untouched for longer, with their messages
        and feedback; how many were removed. The server runs it on start and every hour."""
        if retention_days is not None and (
            isinstance(retention_days, bool) or not isinstance(retention_days, int) or retention_days < 1
        ):
            raise InvalidInput("the retention must be a whole number of days, 1 or more")
        expired: sa.ColumnElement[bool] = conversations.c.deleted_at.is_not(None)
        if retention_days is not None:
            expired = sa.or_(expired, conversations.c.updated_at < self.now() - timedelta(days=retention_days))
        with self.db.writing() as c:
            return int(c.execute(sa.delete(conversations).where(expired)).rowcount)

    def _conversation(
        self, c: sa.Connection, user: User, conversation_id: str, *, check_access: bool = True
    ) -> Conversation:
        row = c.execute(
            sa.select(conversations).where(
                conversations.c.id == _conversation_id(conversation_id),
                conversations.c.deleted_at.is_(None),
            )
        ).first()
        if row is None:
            raise NotFound("no such conversation")
        if row.owner_id != user.id:  # ids are random (128 bits): saying it is someone else's reveals nothing guessable
            raise Forbidden("this conversation is another user's")
        if check_access:
            self._require(c, user, row.collection, "read")
        return _conversation(row)

    def _require(self, c: sa.Connection, user: User, collection: str, need: str) -> None:
        have = self._access(c, user, collection)
        if have is None or (need == "write" and have != "write"):
            raise Forbidden(f"no {need} access to collection {_shown(collection)!r}")

    # ------------------------------------------------------------ feedback

    def give_feedback(
        self, user: User, message_id: int, verdict: str, comment: str = "", helpful: Iterable[str] = ()
    ) -> Feedback:
        """The user's verdict on an answer in one of their conversations, with an optional comment and the passages
        (among the answer's sources) that helped. A second verdict on the same answer replaces the first."""
        verdict = _choice(verdict, "the verdict", VERDICTS)
        comment = clean_text(comment, "the comment", LIMITS["comment"], required=False)
        if isinstance(helpful, str):
            raise InvalidInput("helpful passages must be a list of passage ids")
        marked = list(
            dict.fromkeys(clean_text(p, "a passage id", LIMITS["passage_id"], one_line=True) for p in helpful)
        )
        if len(marked) > LIMITS["helpful_ids"]:
            raise InvalidInput(f"too many helpful passages: {len(marked):,}, at most {LIMITS['helpful_ids']}")
        with self.db.writing() as c:
            row = c.execute(
                sa.select(messages.c.id, messages.c.role, messages.c.result, messages.c.conversation_id).where(
                    messages.c.id == _message_id(message_id)
                )
            ).first()
            if row is None or row.role != "assistant":
                raise NotFound("no such answer")
            self._conversation(c, user, row.conversation_id)  # the user's own, not deleted, collection still readable
            sources = (
                {s.get("passage_id") for s in (json.loads(row.result).get("sources") or [])} if row.result else set()
            )
            unknown = [p for p in marked if p not in sources]
            if unknown:
                raise InvalidInput(f"passage {unknown[0][:200]!r} is not among this answer's sources")
            now = self.now()
            values = {"verdict": verdict, "comment": comment, "helpful": json.dumps(marked), "updated_at": now}
            insert = _upsert(c)(feedback).values(message_id=row.id, user_id=user.id, created_at=now, **values)
            c.execute(insert.on_conflict_do_update(index_elements=["message_id", "user_id"], set_=values))
            saved = c.execute(
                sa.select(feedback).where(feedback.c.message_id == row.id, feedback.c.user_id == user.id)
            ).one()
        return _feedback(saved)

    def answer(self, user: User, message_id: int) -> Message:
        """An answer in one of the user's conversations (Forbidden for another's; NotFound for a deleted one's, or a question)."""
        with self.db.reading() as c:
            row = c.execute(sa.select(messages).where(messages.c.id == _message_id(message_id))).first()
            if row is None or row.role != "assistant":
                raise NotFound("no such answer")
            self._conversation(c, user, row.conversation_id)
            return _message(row)

    def feedback_on(self, user: User, message_id: int) -> Feedback | None:
        """The user's own verdict on an answer, if they gave one."""
        with self.db.reading() as c:
            row = c.execute(
                sa.select(feedback)
                .select_from(feedback.join(messages).join(conversations))
                .where(
                    feedback.c.message_id == _message_id(message_id),
                    feedback.c.user_id == user.id,
                    conversations.c.owner_id == user.id,
                    conversations.c.deleted_at.is_(None),
                )
            ).first()
        return _feedback(row) if row is not None else None

    def feedback_counts(self) -> list[tuple[str, str, str, int]]:
        """(type, strategy, verdict, count) over every kept answer, for /metrics ("unknown" where not recorded)."""
        query = (
            sa.select(messages.c.type, messages.c.strategy, feedback.c.verdict, sa.func.count())
            .select_from(feedback.join(messages).join(conversations))
            .where(conversations.c.deleted_at.is_(None))
            .group_by(messages.c.type, messages.c.strategy, feedback.c.verdict)
        )
        with self.db.reading() as c:
            return sorted((t or "unknown", s or "unknown", v, int(n)) for t, s, v, n in c.execute(query))

    def feedback_records(self, collection: str | None = None) -> list[FeedbackRecord]:
        """Every verdict on a kept answer (of one collection, or all), oldest first: what `typedrag eval
        export-feedback` turns into questions. No user names: a verdict counts, not who gave it."""
        query = (
            sa.select(
                feedback,
                messages.c.text.label("answer"),
                messages.c.result,
                messages.c.type,
                messages.c.strategy,
                messages.c.method,
                messages.c.trace_id,
                messages.c.conversation_id,
                conversations.c.collection,
            )
            .select_from(feedback.join(messages).join(conversations))
            .where(conversations.c.deleted_at.is_(None))
            .order_by(feedback.c.updated_at, feedback.c.id)
        )
        if collection is not None:
            query = query.where(conversations.c.collection == _collection(collection))
        records = []
        with self.db.reading() as c:
            for row in c.execute(query).all():
                data = json.loads(row.result) if row.result else {}
                question = data.get("standalone_question") or data.get("question") or self._question_before(c, row)
                records.append(
                    FeedbackRecord(
                        row.id,
                        row.verdict,
                        row.comment,
                        tuple(json.loads(row.helpful)),
                        row.updated_at,
                        row.collection,
                        question,
                        row.answer,
                        row.type,
                        row.strategy,
                        row.method,
                        row.trace_id,
                        row.message_id,
                    )
                )
        return records

    def _question_before(self, c: sa.Connection, row: Any) -> str:
        """The user message an answer without a recorded result answered."""
        text = c.execute(
            sa.select(messages.c.text)
            .where(
                messages.c.conversation_id == row.conversation_id,
                messages.c.id < row.message_id,
                messages.c.role == "user",
            )
            .order_by(messages.c.id.desc())
            .limit(1)
        ).scalar()
        return text or ""

    # ------------------------------------------------------------ export

    def export_json(self, user: User, conversation_id: str) -> dict[str, Any]:
        """One conversation as JSON: every message, answers with their full result and trace, the user's feedback."""
        from typedrag.store.export import conversation_json

        conversation = self.conversation(user, conversation_id)
        found = self.messages(user, conversation_id)
        verdicts = {m.id: self.feedback_on(user, m.id) for m in found if m.role == "assistant"}
        return conversation_json(conversation, found, verdicts, exported_at=self.now())

    def export_markdown(self, user: User, conversation_id: str) -> str:
        """One conversation as Markdown: each question, its answer, the sentences cited and the sources."""
        from typedrag.store.export import conversation_markdown

        return conversation_markdown(self.conversation(user, conversation_id), self.messages(user, conversation_id))


def open_store(
    database: str | None = None,
    data: Path | str | None = None,
    *,
    create: bool = True,
    migrate: bool = True,
    pool_size: int = 5,
    pool_timeout: float = 30.0,
    clock: Callable[[], datetime] | None = None,
) -> Store:
    """The store at `database` (a URL), else in the data directory's SQLite file; migrated to this typedrag's schema.
    With create=False a missing SQLite file is an error rather than a new empty store (commands that only read)."""
    url = database_url(database, data)
    if not create and url.get_backend_name() == "sqlite" and not Path(url.database or "").expanduser().is_file():
        raise StoreError(f"no store at {url.database}: give the --data DIR `typedrag serve` uses, or --database URL")
    return Store(open_database(url, migrate=migrate, pool_size=pool_size, pool_timeout=pool_timeout), clock=clock)


# ---------------------------------------------------------------- rows to records


def access_from(role: str, disabled: bool, granted: Mapping[str, str], collection: str) -> str | None:
    """What a user of `role` with these grants ({collection: access}, '*' for every collection) may do in a collection:
    "write", "read" or None. Admins write everywhere; others have their grant on it or on '*' (the higher); a reader
    never more than read; a disabled user nothing. `Store.access` and a request's caller decide with this."""
    if disabled:
        return None
    if role == "admin":
        return "write"
    found = {granted.get(collection), granted.get(EVERY_COLLECTION)} - {None}
    have = "write" if "write" in found else "read" if found else None
    return "read" if have and role == "reader" else have


def _session_id(token: str) -> str:
    """A session's row id: the SHA-256 of its cookie's token (a stolen table holds no usable cookie)."""
    return hashlib.sha256(token.encode()).hexdigest()


def _may_read(user: User) -> sa.ColumnElement[bool]:
    """The listed conversation's collection is one the user may read now: `Store.access` as a condition inside the
    listing's own query (one round trip to the database, not three)."""
    active = sa.exists().where(users.c.id == user.id, users.c.disabled == sa.false())
    admin = sa.exists().where(users.c.id == user.id, users.c.role == "admin")
    granted = sa.exists().where(
        grants.c.user_id == user.id, grants.c.collection.in_([conversations.c.collection, EVERY_COLLECTION])
    )
    return sa.and_(active, sa.or_(admin, granted))


def _upsert(c: sa.Connection) -> Callable[..., Any]:
    """INSERT ... ON CONFLICT for the connection's database (both speak it, with the same SQLAlchemy API)."""
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert if c.dialect.name == "postgresql" else sqlite.insert


def _user(row: Any) -> User:
    return User(row.id, row.name, row.role, row.created_at, bool(row.disabled))


def _key(row: Any) -> ApiKey:
    return ApiKey(row.id, row.name, row.prefix, row.label, row.created_at, row.last_used_at, row.revoked_at)


def _conversation(row: Any) -> Conversation:
    return Conversation(row.id, row.collection, row.title, row.created_at, row.updated_at)


def _message(row: Any) -> Message:
    return Message(
        row.id,
        row.conversation_id,
        row.role,
        row.text,
        row.created_at,
        row.trace_id,
        row.method,
        row.type,
        row.strategy,
        row.result,
    )


def _feedback(row: Any) -> Feedback:
    return Feedback(
        row.id, row.message_id, row.verdict, row.comment, tuple(json.loads(row.helpful)), row.created_at, row.updated_at
    )


def _encode_cursor(last: Conversation) -> str:
    raw = json.dumps([last.updated_at.isoformat(), last.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        if not isinstance(cursor, str) or len(cursor) > 200:
            raise ValueError
        updated, last_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        when = datetime.fromisoformat(updated)
        if when.tzinfo is None or not isinstance(last_id, str) or not _CONVERSATION_ID.fullmatch(last_id):
            raise ValueError
        return when, last_id
    except (ValueError, TypeError, binascii.Error):
        raise InvalidInput("not a cursor of this listing: ask for the first page again") from None
