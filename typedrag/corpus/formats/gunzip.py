"""A gzipped document ("intro.md.gz", "manual.pdf.gz") uncompressed into a private temporary file named like the
document inside, within a bound: the readers, the viewer and the upload check all read a path, PDFium among them.
"""

from __future__ import annotations

import gzip
import os
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from typedrag.corpus.formats.common import Unreadable
from typedrag.corpus.formats.detect import gzipped_document

MAX_GUNZIPPED = 256 << 20  # bytes a gzipped document may expand to (the largest manual seen here, R's, is 40 MB)
BROKEN_GZIP = (EOFError, gzip.BadGzipFile, zlib.error)  # what reading a corrupt or truncated gzip raises
GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20


def gunzip_copy(raw: BinaryIO, name: str) -> Path:
    """`raw`'s content uncompressed into a new temporary file named like `name`, which the caller removes.
    At most MAX_GUNZIPPED bytes, so that a small file that expands without end (a gzip bomb) is refused, not
    written out; `Unreadable` (the copy removed) for that, a corrupt gzip, or no room for the copy."""
    try:
        handle, temporary = tempfile.mkstemp(prefix="typedrag-gunzip-", suffix=f"-{Path(name).name}")
    except OSError as e:
        raise Unreadable(f"cannot be uncompressed ({e.strerror or e}), skipped") from None
    copy, written = Path(temporary), 0
    try:
        # GzipFile never closes a file it was given: `raw` stays the caller's.
        with os.fdopen(handle, "wb") as out, gzip.GzipFile(fileobj=raw) as packed:
            while chunk := packed.read(_CHUNK):
                written += len(chunk)
                if written > MAX_GUNZIPPED:
                    raise Unreadable(f"expands past {MAX_GUNZIPPED // 2**20} MB uncompressed, skipped")
                out.write(chunk)
    except BaseException as e:
        copy.unlink(missing_ok=True)
        if isinstance(e, BROKEN_GZIP):
            raise Unreadable(f"corrupt or truncated gzip ({e}), skipped") from None
        if isinstance(e, OSError):  # no room for the copy
            raise Unreadable(f"cannot be uncompressed ({e.strerror or e}), skipped") from None
        raise
    return copy


@contextmanager
def uncompressed(path: Path, name: str) -> Iterator[tuple[Path, str]]:
    """(path, name) of the document as it reads: a gzipped one's temporary copy and its name without ".gz"
    (removed on leaving), any other file as it is."""
    inner = gzipped_document(name)
    if inner is None:
        yield path, name
        return
    with open(path, "rb") as raw:
        copy = gunzip_copy(raw, inner)
    try:
        yield copy, inner
    finally:
        copy.unlink(missing_ok=True)
