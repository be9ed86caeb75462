"""Who may read or write which collection: one function, so that accounts and grants (issue 52) are added here.

Today a server has one key (`serve --api-key-env`) or none: a caller that passed it (or any caller, with no key)
may do everything. Reading covers asking and opening a source (the same right), writing covers uploads,
deletions, and creating or deleting collections.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Action = Literal["read", "write"]


@dataclass(frozen=True)
class Caller:
    """Who is asking: today only whether they passed the server's key (or the server has none)."""

    authenticated: bool = True
    name: str = "anyone"


def may(caller: Caller, collection: str | None, action: Action) -> bool:
    """Whether `caller` may `action` ("read" or "write") `collection` (None: the list of collections itself)."""
    return caller.authenticated
