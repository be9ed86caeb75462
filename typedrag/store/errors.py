"""What the store raises on purpose. The server maps them by class: InvalidInput 400, Forbidden 403,
NotFound 404, AlreadyExists 409, StoreUnavailable 503. None of their messages holds a key or a password."""

from __future__ import annotations

from typedrag.errors import TypedragError, UserError


class StoreError(UserError):
    """A request the store refuses; the message says why in one line."""


class InvalidInput(StoreError):
    """A name, title, comment or other field that is empty, too long or not one of the allowed values."""


class NotFound(StoreError):
    """No such user, key or conversation, or not one the asking user may see (the same answer for both)."""


class Forbidden(StoreError):
    """The user has no grant for this collection, or not the write grant an action needs."""


class AlreadyExists(StoreError):
    """A user of that name exists already."""


class SchemaTooNew(StoreError):
    """The database was migrated by a newer typedrag than this one."""


class StoreUnavailable(TypedragError):
    """The database cannot be reached, or stayed locked past the busy timeout: not the asking user's fault."""
