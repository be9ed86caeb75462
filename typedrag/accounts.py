"""`typedrag users`: the accounts of `typedrag serve` on the command line: users and their roles, API keys
(shown once, stored hashed) and grants per collection, in the store of `--data DIR` or `--database URL`.

Whoever can run these commands on the data directory (or holds the database's password) is the admin: the
commands ask nobody's key. Every error is one line and exit code 2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from typedrag.commands import DatabaseOpt, DataOpt, errors, fail, settings_from, store_from
from typedrag.text import for_terminal

NameArg = Annotated[
    str,
    typer.Argument(
        help="The user's name (as they sign in, or as the SSO proxy's header gives it).", show_default=False
    ),
]
RoleOpt = Annotated[
    str, typer.Option("--role", help="admin (everything, every collection), editor (writes where granted) or reader.")
]

console = Console(soft_wrap=True)


@contextmanager
def _store(data, database, *, create: bool = False) -> Iterator[Any]:
    """The store the options name, closed afterwards; its refusals as one line each. Only `add` makes a new store."""
    from typedrag.store import StoreError, StoreUnavailable

    store = store_from(settings_from(data=data, database=database), create=create)
    try:
        yield store
    except (StoreError, StoreUnavailable) as error:
        fail(str(error))
    finally:
        store.close()


def _when(moment) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment is not None else "never"


def add(
    name: NameArg,
    role: RoleOpt = "reader",
    key: Annotated[bool, typer.Option("--key", help="Also create an API key and print it (once).")] = False,
    data: DataOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Add a user with a role; --key also prints their first API key. The first user makes the store."""
    with _store(data, database, create=True) as store:
        user = store.add_user(name, role)
        errors.print(f"added {for_terminal(user.name)!r} ({user.role})", markup=False)
        if key:
            _print_new_key(store.create_key(user.name))
        elif user.role != "admin":
            errors.print(
                f"next: typedrag users key create {for_terminal(user.name)!r}, and typedrag users grant ... COLLECTION",
                markup=False,
            )


def list_users(data: DataOpt = None, database: DatabaseOpt = None) -> None:
    """Every user with their role, active keys and grants."""
    with _store(data, database) as store:
        users = store.users()
        keys = store.keys()
        grants = store.grants()
    if not users:
        errors.print("no users yet: typedrag users add NAME --role admin --key", markup=False)
        return
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("name", "role", "keys", "grants", "added", "state"):
        table.add_column(column, overflow="fold")
    for user in users:
        active = [k for k in keys if k.user == user.name and k.active]
        granted = ", ".join(f"{g.collection}:{g.access}" for g in grants if g.user == user.name)
        table.add_row(
            Text(for_terminal(user.name)),
            user.role,
            str(len(active)),
            Text(for_terminal("every collection" if user.role == "admin" else granted or "none")),
            _when(user.created_at),
            "disabled" if user.disabled else "active",
        )
    console.print(table)


def remove(name: NameArg, data: DataOpt = None, database: DatabaseOpt = None) -> None:
    """Remove a user with their keys, grants, saved conversations and feedback."""
    with _store(data, database) as store:
        gone = store.remove_user(name)
    errors.print(f"removed {for_terminal(name.strip())!r} and {gone:,} saved conversations", markup=False)


def disable(name: NameArg, data: DataOpt = None, database: DatabaseOpt = None) -> None:
    """Stop a user's keys working at once, keeping their conversations (enable undoes it)."""
    with _store(data, database) as store:
        user = store.set_disabled(name, True)
    errors.print(f"disabled {for_terminal(user.name)!r}", markup=False)


def enable(name: NameArg, data: DataOpt = None, database: DatabaseOpt = None) -> None:
    """Let a disabled user's keys work again."""
    with _store(data, database) as store:
        user = store.set_disabled(name, False)
    errors.print(f"enabled {for_terminal(user.name)!r}", markup=False)


def role(
    name: NameArg,
    new_role: Annotated[str, typer.Argument(metavar="ROLE", help="admin, editor or reader.")],
    data: DataOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Change a user's role."""
    with _store(data, database) as store:
        user = store.set_role(name, new_role)
    errors.print(f"{for_terminal(user.name)!r} is now {user.role}", markup=False)


CollectionArg = Annotated[
    str,
    typer.Argument(metavar="COLLECTION", help="A collection's name, or '*' for every collection.", show_default=False),
]


def grant(
    name: NameArg,
    collection: CollectionArg,
    write: Annotated[
        bool,
        typer.Option(
            "--write", help="Also upload and delete documents (editors only); default: read (ask, open sources)."
        ),
    ] = False,
    data: DataOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Let a user read (or with --write, also change) a collection."""
    with _store(data, database) as store:
        given = store.grant(name, collection, "write" if write else "read")
    where = "every collection" if given.collection == "*" else repr(for_terminal(given.collection))
    errors.print(f"{for_terminal(given.user)!r} may {given.access} {where}", markup=False)


def revoke(name: NameArg, collection: CollectionArg, data: DataOpt = None, database: DatabaseOpt = None) -> None:
    """Take a user's grant on a collection away."""
    with _store(data, database) as store:
        gone = store.revoke_grant(name, collection)
    what = f"{for_terminal(name.strip())!r} on {for_terminal(collection.strip())!r}"
    errors.print(f"revoked the grant of {what}" if gone else f"no grant of {what} to revoke", markup=False)


def key_create(
    name: NameArg,
    label: Annotated[str, typer.Option("--label", help="What the key is for, e.g. laptop or ci.")] = "",
    data: DataOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Create an API key for a user and print it: it is shown this once and stored only hashed."""
    with _store(data, database) as store:
        _print_new_key(store.create_key(name, label))


def key_list(name: NameArg, data: DataOpt = None, database: DatabaseOpt = None) -> None:
    """A user's keys: prefix, label, created, last used, revoked (never the keys themselves)."""
    with _store(data, database) as store:
        keys = store.keys(name)
    if not keys:
        errors.print(f"{for_terminal(name.strip())!r} has no keys: typedrag users key create NAME", markup=False)
        return
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("key", "label", "created", "last used", "state"):
        table.add_column(column, overflow="fold")
    for key in keys:
        state = f"revoked {_when(key.revoked_at)}" if key.revoked_at else "active"
        table.add_row(
            f"tdk_{key.prefix}_…", Text(for_terminal(key.label)), _when(key.created_at), _when(key.last_used_at), state
        )
    console.print(table)


def key_revoke(
    name: NameArg,
    prefix: Annotated[
        str, typer.Argument(metavar="KEY", help="The key's prefix as `key list` shows it (tdk_0123abcd4567).")
    ],
    data: DataOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Revoke one of a user's keys: it stops working at once."""
    with _store(data, database) as store:
        key = store.revoke_key(name, prefix)
    errors.print(f"revoked tdk_{key.prefix}_… of {for_terminal(key.user)!r}", markup=False)


def _print_new_key(new) -> None:
    """The key alone on stdout (KEY=$(typedrag users key create NAME) works); what it is on stderr."""
    print(new.secret, flush=True)
    errors.print(
        f"API key tdk_{new.key.prefix}_… of {for_terminal(new.key.user)!r}: shown this once and stored only hashed; "
        f"send it as 'Authorization: Bearer KEY'",
        markup=False,
    )


def users_app() -> typer.Typer:
    """`typedrag users` and `typedrag users key` as groups."""
    group = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__.split("\n\n")[0] if __doc__ else None)
    commands: list[tuple[str, Callable[..., None]]] = [
        ("add", add),
        ("list", list_users),
        ("remove", remove),
        ("disable", disable),
        ("enable", enable),
        ("role", role),
        ("grant", grant),
        ("revoke", revoke),
    ]
    for name, function in commands:
        group.command(name, help=function.__doc__)(function)
    keys = typer.Typer(
        no_args_is_help=True, add_completion=False, help="A user's API keys: create (shown once), list, revoke."
    )
    for name, function in (("create", key_create), ("list", key_list), ("revoke", key_revoke)):
        keys.command(name, help=function.__doc__)(function)
    group.add_typer(keys, name="key")
    return group
