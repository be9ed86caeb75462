"""Append-only JSONL logs that survive crashes: the store behind every resumable batch (eval, ask, classify).

Each record is one line, flushed and fsynced before the next starts; on open, a torn last
line (the process was killed mid-write) is cut off, so rerunning a batch neither loses nor
duplicates records.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from typedrag.errors import RunError


class JsonlLogError(RunError):
    """A damaged line that is not the last one: not a torn write, so nothing is discarded silently."""


class JsonlLog:
    """An append-only JSONL file: one fsynced line per record; a torn last line is cut off on open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records = self._load()
        self._file = path.open("a", encoding="utf-8")

    def _load(self) -> list[dict]:
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        lines = data.split(b"\n")  # the last item is the unterminated tail: b"" after a clean write
        records, good_end = [], 0
        for number, line in enumerate(lines[:-1], 1):
            try:
                if line.strip():
                    records.append(json.loads(line))
            except ValueError:
                if number < len(lines) - 1:
                    raise JsonlLogError(f"{self.path}:{number} is not valid JSON; fix or remove that line") from None
                break  # a damaged final line is a torn write too
            good_end += len(line) + 1
        if good_end < len(data):
            with self.path.open("r+b") as f:  # cut the torn tail so new records start on a fresh line
                f.truncate(good_end)
        return records

    def append(self, record: dict) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()
