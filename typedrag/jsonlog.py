"""Append-only JSONL logs that survive crashes: the store behind every resumable batch (eval, ask, classify).

Each record is one line, flushed and fsynced before the next starts. On open, a torn last line
(the process was killed mid-write) is cut off, so rerunning a batch neither loses nor duplicates
records. Only typedrag's own output is ever cut: every complete line must be a record of the
log's kind (a JSON object holding its keys), and a torn tail must begin as such a record does.
Any other file, notes or the question file itself given as `--out`, is refused untouched.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from typedrag.errors import RunError


class JsonlLogError(RunError):
    """The file is not a log of this kind, or is damaged before its last line: nothing is discarded silently."""


class JsonlLog:
    """An append-only JSONL file of records that each hold `keys`; a torn last line is cut off on open."""

    def __init__(self, path: Path, keys: tuple[str, ...]) -> None:
        if not keys:
            raise ValueError("a JsonlLog needs the keys its records hold, to recognise its own files")
        self.path = path
        self.keys = keys
        self.records = self._load()
        self._file = path.open("a", encoding="utf-8")

    def _load(self) -> list[dict]:
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        *lines, tail = data.split(b"\n")  # `tail` is what follows the last newline: b"" after a clean write
        records = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            record = _record(line)
            if record is None or not all(key in record for key in self.keys):
                raise JsonlLogError(
                    f"{self.path}:{number} is not a record typedrag wrote (a JSON object with {', '.join(self.keys)}); "
                    "refusing to touch the file: give a new file, or one an earlier run of this command wrote"
                )
            records.append(record)
        if tail.strip():
            if not tail.lstrip().startswith(b'{"' + self.keys[0].encode() + b'":'):
                raise JsonlLogError(
                    f"{self.path}:{len(lines) + 1} is not a record typedrag wrote; refusing to touch the file: "
                    "give a new file, or one an earlier run of this command wrote"
                )
            with self.path.open("r+b") as f:  # typedrag's own torn write: cut it so new records start on a fresh line
                f.truncate(len(data) - len(tail))
        return records

    def append(self, record: dict) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def _record(line: bytes) -> dict | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# ---------------------------------------------------------------- question files a user hands in

MAX_ROW_DEPTH = 64  # JSON nested deeper than a question file's rows ever are: refused before the parser recurses


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line of a UTF-8 file (a BOM is skipped); a line that is not UTF-8 is
    a ValueError naming the line (`UnicodeDecodeError` came from the middle of a file's iteration before)."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if number == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}:{number}: not UTF-8 text (byte {error.start + 1} of the line)") from None
            if line.strip():
                yield number, line


def json_row(line: str) -> object:
    """A line's JSON value; a ValueError for one that is not JSON or nests deeper than MAX_ROW_DEPTH (the parser
    would recurse until Python's limit: a RecursionError no reader caught)."""
    depth = deepest = 0
    quoted = escaped = False
    for char in line:  # brackets outside strings, counted without parsing
        if quoted:
            escaped, quoted = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    if deepest > MAX_ROW_DEPTH:
        raise ValueError(f"JSON nested {deepest} deep, over the {MAX_ROW_DEPTH} a row may be")
    return json.loads(line)
