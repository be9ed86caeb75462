"""What the store hands out: plain frozen records, never rows or database objects, and never a key's hash."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class User:
    """An account: who asks, with which role. `Store.authenticate` hands it out; every per-user method takes it."""

    id: int
    name: str
    role: str  # admin | editor | reader
    created_at: datetime
    disabled: bool = False

    @property
    def is_admin(self) -> bool:
        return self.role == "admin" and not self.disabled


@dataclass(frozen=True)
class ApiKey:
    """What is known of a key after its creation: never the key itself, nor its hash."""

    id: int
    user: str
    prefix: str
    label: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True)
class NewKey:
    """A key just created: `secret` is the whole key, to be shown once; it is stored nowhere."""

    key: ApiKey
    secret: str = field(repr=False)


@dataclass(frozen=True)
class Grant:
    """A user's right on a collection: read (ask, open sources) or write (also change its documents)."""

    user: str
    collection: str  # "*": every collection
    access: str  # read | write


@dataclass(frozen=True)
class Conversation:
    """One saved conversation of a user in one collection (its messages come from `Store.messages`)."""

    id: str
    collection: str
    title: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Message:
    """A question, an answer (with its full result and trace id) or instructions, in a conversation's order."""

    id: int
    conversation_id: str
    role: str  # user | assistant | system
    text: str
    created_at: datetime
    trace_id: str | None = None
    method: str | None = None
    type: str | None = None
    strategy: str | None = None
    result_json: str | None = field(default=None, repr=False)  # an answer's AnswerResult, trace included

    @property
    def result(self) -> dict[str, Any] | None:
        return json.loads(self.result_json) if self.result_json else None


@dataclass(frozen=True)
class Feedback:
    """A user's verdict on one answer, with a comment and the passages that helped."""

    id: int
    message_id: int
    verdict: str  # up | down
    comment: str
    helpful: tuple[str, ...]  # passage ids the user marked as helpful
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Page:
    """One page of a listing, newest first; `next_cursor` asks for the next one (None: this was the last)."""

    items: list[Conversation]
    next_cursor: str | None


@dataclass(frozen=True)
class FeedbackRecord:
    """One verdict with what it was given on, for the evaluation set (typedrag eval export-feedback)."""

    feedback_id: int
    verdict: str
    comment: str
    helpful: tuple[str, ...]
    updated_at: datetime
    collection: str
    question: str  # as answered: a follow-up's standalone rewrite where there was one
    answer: str
    type: str | None
    strategy: str | None
    method: str | None
    trace_id: str | None
    message_id: int
