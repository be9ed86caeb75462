"""What an uploaded file must be to join a collection, each refusal one line: a plain file name (no folder part,
no hidden name), a type typedrag reads and the server accepts, content that is what its name says, not empty,
within the size limits, and for a DOCX a zip that does not expand out of bounds (a zip bomb). A gzipped document
("manual.pdf.gz", as Debian ships manuals) is accepted when the document inside is, and checked uncompressed.

A file is received into the collection's `incoming/` folder under a random name while it streams (`Staging`),
checked, and only then renamed among the collection's documents: an upload cut off halfway leaves nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from typedrag.config import LibraryLimits
from typedrag.corpus.formats.common import Unreadable
from typedrag.corpus.formats.detect import Kind, gzipped_document, is_docx, looks_binary, sniff, suffix_kind
from typedrag.corpus.formats.gunzip import GZIP_MAGIC, uncompressed
from typedrag.corpus.formats.docx import check_sizes

MAX_NAME_BYTES = 200
_UNSAFE = re.compile(r"[^\w .,()+\-@&=\[\]]")  # characters kept in a stored name; others become "_"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class Rejected(Exception):
    """One uploaded file refused, with its reason in one line."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name, self.reason = name, reason


def document_name(raw: str, limits: LibraryLimits) -> str:
    """The name a file is kept under: the client's own name when it is a plain file name of an accepted type,
    its odd characters replaced by "_"; else `Rejected`, saying why."""
    shown = _CONTROL.sub("?", raw)[:120]
    if not raw.strip():
        raise Rejected(shown or "(no name)", "the file has no name")
    if "/" in raw or "\\" in raw or raw.strip() in (".", "..") or re.match(r"^[A-Za-z]:", raw):
        raise Rejected(shown, "the file name has a folder part or is a path; send the file under its own name")
    if _CONTROL.search(raw):
        raise Rejected(shown, "the file name holds control or text-direction characters")
    name = _UNSAFE.sub("_", unicodedata.normalize("NFC", raw).strip())
    if name.startswith("."):
        raise Rejected(shown, "hidden file names (starting with a dot) are not read")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise Rejected(shown, f"the file name is longer than {MAX_NAME_BYTES} bytes")
    lowered = (gzipped_document(name) or name).lower()
    if not any(lowered.endswith(ending) for ending in limits.upload_types):
        ending = Path(lowered).suffix or "no ending"
        raise Rejected(
            shown, f"type not accepted ({ending}); accepted: {', '.join(limits.upload_types)}, each also gzipped (.gz)"
        )
    return name


@dataclass
class Staged:
    """A file received whole into the staging folder: its stored name, where it is, its size and hash."""

    name: str
    path: Path
    size: int
    sha256: str


@dataclass
class Staging:
    """Receives one upload's files into `folder` as they stream, within the limits; `discard()` removes them all."""

    folder: Path
    limits: LibraryLimits
    staged: list[Staged] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    received: int = 0  # bytes of every file of the upload

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._file = None
        self._path: Path | None = None
        self._name = ""
        self._size = 0
        self._hash = hashlib.sha256()
        self._refused: Rejected | None = None
        self._files = 0

    def begin(self, raw_name: str) -> None:
        """A new file of the upload begins."""
        self._files += 1
        self._size, self._hash, self._refused = 0, hashlib.sha256(), None
        self._name = raw_name
        if self._files > self.limits.max_files_per_upload:
            self._refused = Rejected(
                _CONTROL.sub("?", raw_name)[:120], f"more than {self.limits.max_files_per_upload} files in one upload"
            )
            return
        try:
            self._name = document_name(raw_name, self.limits)
        except Rejected as refused:
            self._refused = refused
            return
        self._path = self.folder / f"upload-{os.getpid()}-{secrets.token_hex(8)}"
        self._file = open(self._path, "xb")

    def write(self, data: bytes) -> None:
        """More of the current file (thrown away once it is refused)."""
        self.received += len(data)
        if self._refused is not None:
            return
        self._size += len(data)
        if self._size > self.limits.max_file_bytes:
            self._refuse(f"larger than the limit of {_size(self.limits.max_file_bytes)}")
            return
        self._hash.update(data)
        self._file.write(data)

    def end(self) -> None:
        """The current file is complete: checked, and kept or refused."""
        if self._refused is None:
            self._file.close()
            self._file = None
            try:
                check_content(self._path, self._name, self._size)
            except Rejected as refused:
                self._refuse(refused.reason)
            else:
                self.staged.append(Staged(self._name, self._path, self._size, self._hash.hexdigest()))
                self._path = None
        if self._refused is not None:
            self.rejected.append(self._refused)
            self._refused = None

    def _refuse(self, reason: str) -> None:
        self._refused = Rejected(self._name, reason)
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._path is not None:
            self._path.unlink(missing_ok=True)
            self._path = None

    def discard(self) -> None:
        """Remove every file received so far (the upload failed, or its files were moved on already)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        for path in [self._path, *(s.path for s in self.staged)]:
            if path is not None:
                path.unlink(missing_ok=True)
        self._path = None


def check_content(path: Path, name: str, size: int) -> None:
    """`Rejected` unless the file's content is what its name says, and readable within bounds."""
    if size == 0:
        raise Rejected(name, "the file is empty")
    with open(path, "rb") as f:
        head = f.read(8192)
    if gzipped_document(name) is not None:
        if not head.startswith(GZIP_MAGIC):
            raise Rejected(name, "named .gz, but its content is not gzip-compressed")
        try:
            with uncompressed(path, name) as (plain, inner):
                check_content(plain, inner, plain.stat().st_size)
        except Unreadable as error:
            raise Rejected(name, error.reason.removesuffix(", skipped")) from None
        except Rejected as refused:
            raise Rejected(name, f"uncompressed, {refused.reason}") from None
        return
    kind, seen = suffix_kind(name), sniff(head)
    if kind is Kind.PDF:
        if seen is not Kind.PDF:
            raise Rejected(name, "named .pdf, but its content is not a PDF (it does not start with %PDF-)")
        return
    if kind is Kind.DOCX:
        if not is_docx(path):
            raise Rejected(name, "named .docx, but its content is not a Word document (no word/document.xml in a zip)")
        try:
            check_sizes(path)
        except Unreadable as error:
            raise Rejected(name, error.reason.removesuffix(", skipped")) from None
        return
    if seen in (Kind.PDF, Kind.DOCX) or looks_binary(head):
        what = seen.value if seen in (Kind.PDF, Kind.DOCX) else "binary data"
        raise Rejected(name, f"named as {kind.value if kind else 'text'}, but its content is {what}")


def _size(count: int) -> str:
    return f"{count / (1 << 20):,.0f} MB" if count >= 1 << 20 else f"{count:,} bytes"
