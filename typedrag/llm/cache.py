"""On-disk response cache keyed by model + messages + parameters (never the API key).

SQLite in WAL mode: safe for concurrent readers and writers in one or several processes,
and a crash never leaves a half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

from typedrag.errors import ConfigError


class CacheError(ConfigError):
    """The cache file cannot be used (damaged, or not a cache); the message names the fix."""


log = logging.getLogger("typedrag.cache")
_DISK_ERRORS = (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR) if hasattr(sqlite3, "SQLITE_FULL") else ()


def _is_disk_problem(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None and _DISK_ERRORS and (code & 0xFF) in _DISK_ERRORS:
        return True
    text = str(error).lower()
    return "disk is full" in text or "disk i/o error" in text


class ResponseCache:
    """Replies by request, in `<directory>/llm-cache.sqlite`. `namespace` (the prompt version) is part of
    every key, so replies cached under older prompts are never replayed."""

    def __init__(self, directory: Path | str, namespace: str = "") -> None:
        self.namespace = namespace
        self.path = Path(directory) / "llm-cache.sqlite"
        self.warning: str | None = None  # set when writes were given up (disk full): answers go on uncached
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        try:
            with self._connection() as db:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                db.execute(
                    "CREATE TABLE IF NOT EXISTS file_hashes (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, sha256 TEXT)"
                )
        except sqlite3.Error as error:
            raise self._unusable(error) from None

    def _unusable(self, error: sqlite3.Error) -> CacheError:
        return CacheError(f"{self.path} is unusable ({error}): delete it, or set TYPEDRAG_CACHE_DIR to another folder")

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30)
            self._local.db = db
        return db

    def file_sha256(self, path: Path) -> str:
        """The sha256 of a (model) file, remembered by path, size and modification time: a 4 GB GGUF is
        read once, not on every run."""
        resolved = path.resolve()
        info = resolved.stat()
        try:
            row = (
                self._connection()
                .execute(
                    "SELECT sha256 FROM file_hashes WHERE path = ? AND size = ? AND mtime_ns = ?",
                    (str(resolved), info.st_size, info.st_mtime_ns),
                )
                .fetchone()
            )
        except sqlite3.Error as error:
            raise self._unusable(error) from None
        if row:
            return row[0]
        with open(resolved, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        try:
            with self._connection() as db:
                db.execute(
                    "INSERT OR REPLACE INTO file_hashes VALUES (?, ?, ?, ?)",
                    (str(resolved), info.st_size, info.st_mtime_ns, digest),
                )
        except sqlite3.Error:
            pass  # not remembered: hashed again next time
        return digest

    def key(self, request: dict[str, Any]) -> str:
        """The cache key of a request: its parameters and this cache's namespace, never the API key."""
        keyed = {**request, "namespace": self.namespace} if self.namespace else request
        return hashlib.sha256(json.dumps(keyed, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            row = self._connection().execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as error:
            raise self._unusable(error) from None
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store a reply; never fails an answer. A full disk (or an I/O error) turns caching off for this
        process with one warning that says so; the file itself is sound and is kept."""
        if self.warning is not None:
            return
        try:
            with self._connection() as db:
                db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, json.dumps(value)))
        except sqlite3.Error as error:
            if _is_disk_problem(error):
                self.warning = (
                    f"the disk holding {self.path} is full or failing ({error}): answers are no longer cached; "
                    "free some space, or set TYPEDRAG_CACHE_DIR to another folder"
                )
            else:
                self.warning = str(self._unusable(error)) + "; answers are no longer cached"
            log.warning(self.warning)
