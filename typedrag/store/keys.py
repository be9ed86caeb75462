"""API keys: how one looks, how it is hashed and how a presented one is checked.

A key is `tdk_<prefix>_<secret>`: the prefix (12 hex digits) is public, shown in `typedrag users key list`
and used to find the key's row; the secret (32 random bytes) is never stored. The row holds an argon2id
hash of the whole key (argon2-cffi), whose verification compares in constant time.

Argon2 is slow on purpose (tens of milliseconds), too slow for every request: once a key has verified,
`VerifiedKeys` remembers a SHA-256 digest of it for that row, and the next check of the same row compares
digests with `hmac.compare_digest`. The row is read on every check all the same, so a revoked key or a
disabled user is refused at once, in every process.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

KEY_PREFIX = "tdk_"
_KEY = re.compile(r"tdk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
_KEY_ANYWHERE = re.compile(r"tdk_([0-9a-f]{12})_[A-Za-z0-9_-]{8,}")

# OWASP's argon2id settings (19 MiB, 2 passes, 1 lane): a key has 256 random bits, so the hash needs no more
# cost against guessing; it keeps a stolen table from being used as keys.
HASHER = PasswordHasher(time_cost=2, memory_cost=19_456, parallelism=1)


@dataclass(frozen=True)
class KeyMaterial:
    """A new key: the whole key (to show once) and what is stored of it."""

    prefix: str
    hash: str = field(repr=False)
    key: str = field(repr=False)


def new_key() -> KeyMaterial:
    prefix = secrets.token_hex(6)
    key = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    return KeyMaterial(prefix=prefix, hash=HASHER.hash(key), key=key)


def prefix_of(presented: str) -> str | None:
    """The prefix of a well-formed key; None for anything else (nothing of it is echoed anywhere)."""
    match = _KEY.fullmatch(presented.strip()) if isinstance(presented, str) else None
    return match.group(1) if match else None


def mask_keys(text: str) -> str:
    """`text` with every key in it cut to its public prefix (`tdk_0123abcd4567_…`): for any message that echoes
    what a user typed, in case they pasted a key where a name goes."""
    return _KEY_ANYWHERE.sub(lambda m: f"tdk_{m.group(1)}_…", text)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class VerifiedKeys:
    """Which stored hashes a presented key has verified against, as digests: argon2 once per key and process.

    Remembered by the hash, never by the row's id: SQLite gives a deleted row's id to the next new row, and a new
    key under a remembered id would be refused."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._digests: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"VerifiedKeys({len(self._digests)} keys)"

    def check(self, stored_hash: str, presented: str) -> bool:
        """Whether `presented` is the key whose argon2 hash is `stored_hash`."""
        digest = _digest(presented.strip())
        with self._lock:
            known = self._digests.get(stored_hash)
        if known is not None:
            return hmac.compare_digest(known, digest)
        try:
            HASHER.verify(stored_hash, presented.strip())
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
        with self._lock:
            self._digests[stored_hash] = digest
            while len(self._digests) > self.capacity:
                self._digests.popitem(last=False)
        return True

    def forget(self, stored_hash: str) -> None:
        with self._lock:
            self._digests.pop(stored_hash, None)
