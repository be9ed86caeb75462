"""Who may read or write which collection: one function, `may`, that every route, the source viewer and the MCP
tools ask.

A caller is who sent the request: an account of the store (`typedrag users`), with its role and its grants as
they were read for this request; or someone without an account, who may do everything (the server's own key,
`serve --api-key-env`, or anyone at all on a server with neither a key nor accounts). Reading covers asking and
opening a source (the same right); writing covers uploads and deleting documents. Creating and deleting
collections is for admins (`may(caller, None, "write")`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from typedrag.store import User, access_from

Action = Literal["read", "write"]


@dataclass(frozen=True)
class Caller:
    """Who is asking. `user` is their account (None: the server's own key, or an open server, both admins);
    `grants` their grants as read for this request ({collection: "read" | "write"}, "*" for every collection)."""

    authenticated: bool = True
    name: str = "anyone"
    user: User | None = None
    grants: Mapping[str, str] = field(default_factory=dict)
    how: str = "open"  # open | key (a Bearer key) | session (the page's cookie) | header (an SSO proxy's)

    @property
    def role(self) -> str:
        return self.user.role if self.user is not None else "admin"

    @property
    def is_admin(self) -> bool:
        return self.authenticated and (self.user is None or self.user.is_admin)


def may(caller: Caller, collection: str | None, action: Action) -> bool:
    """Whether `caller` may `action` ("read" or "write") `collection`. None stands for the list of collections:
    everyone may read it (each sees the collections they may read), only admins write it (create, delete)."""
    if not caller.authenticated:
        return False
    if caller.user is None:
        return True
    if collection is None:
        return action == "read" or caller.is_admin
    have = access_from(caller.user.role, caller.user.disabled, caller.grants, collection)
    return have is not None and (action == "read" or have == "write")
