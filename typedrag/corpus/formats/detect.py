"""Which reader a file needs, from its content as well as its name.

A `.html` that is really a PDF, or a downloaded manual with no suffix at all, still reads: PDF and
DOCX are recognised by their magic bytes whatever the name; HTML, by its opening tag, when the suffix
does not say; a file with no suffix that decodes as UTF-8 is plain text.
"""

from __future__ import annotations

import enum
import errno
import zipfile
from pathlib import Path

from typedrag.corpus.formats.common import Unreadable


class Kind(enum.Enum):
    """A format typedrag reads; the value is its name in messages."""

    JSONL = "JSON lines"
    TSV = "DPR passages TSV"
    TEXT = "plain text"
    MARKDOWN = "Markdown"
    RST = "reStructuredText"
    HTML = "HTML"
    PDF = "PDF"
    DOCX = "Word DOCX"


SUFFIX_KINDS = {
    ".jsonl": Kind.JSONL,
    ".jsonl.gz": Kind.JSONL,
    ".tsv": Kind.TSV,
    ".txt": Kind.TEXT,
    ".text": Kind.TEXT,
    ".md": Kind.MARKDOWN,
    ".markdown": Kind.MARKDOWN,
    ".rst": Kind.RST,
    ".rest": Kind.RST,
    ".html": Kind.HTML,
    ".htm": Kind.HTML,
    ".xhtml": Kind.HTML,
    ".pdf": Kind.PDF,
    ".docx": Kind.DOCX,
}
SUFFIXES = tuple(SUFFIX_KINDS)
_RECORDS = (Kind.JSONL, Kind.TSV)  # named by suffix alone: their content is ordinary text
# A document gzipped ("intro.md.gz"): Debian compresses every text document over 4 kB in /usr/share/doc. Read as the
# file its name has without ".gz"; a name with no document suffix inside ("changelog.gz") stays unread.
GZIPPED = ".gz"
_HEAD = 8192


def _suffix(name: str) -> tuple[str, Kind] | None:
    """The document suffix `name` ends with, and its kind."""
    name = name.lower()
    return next(((suffix, kind) for suffix, kind in SUFFIX_KINDS.items() if name.endswith(suffix)), None)


def suffix_kind(name: str) -> Kind | None:
    found = _suffix(name)
    return found[1] if found else None


def gzipped_document(name: str) -> str | None:
    """The name a gzipped document has uncompressed ("intro.md" for "intro.md.gz"), when it names a document kind
    (not JSON lines, which are read compressed as they are); None otherwise."""
    if not name.lower().endswith(GZIPPED):
        return None
    inner = name[: -len(GZIPPED)]
    return inner if suffix_kind(inner) not in (None, *_RECORDS) else None


# Which of one document's renderings is read when a folder holds several ("bashref.html", "bashref.pdf";
# "api/fs.md", "api/fs.html"; "manual.html", "manual.pdf.gz", "manual.txt.gz"): the one whose structure is
# read best (headings, lists, tables and code are marked), a compressed copy after a plain one.
RENDERING_ORDER = (Kind.HTML, Kind.MARKDOWN, Kind.RST, Kind.DOCX, Kind.PDF, Kind.TEXT)


def rendering(name: str) -> tuple[str, int] | None:
    """(the document's name without its format, the rendering's rank, lower read first) for a one-document
    file: "bashref.pdf" gives ("bashref", 8); None for records (JSONL, TSV) and names of no document kind."""
    inner = gzipped_document(name) or name
    found = _suffix(inner)
    if found is None or found[1] not in RENDERING_ORDER:
        return None
    suffix, kind = found
    return inner[: -len(suffix)].lower(), 2 * RENDERING_ORDER.index(kind) + (inner != name)


def sniff(head: bytes) -> Kind | None:
    """The kind the first bytes of a file show, if they show one (a DOCX needs `is_docx` on the file too)."""
    if head.startswith(b"%PDF-"):
        return Kind.PDF
    if head.startswith(b"PK\x03\x04"):
        return Kind.DOCX
    start = head[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if start.startswith((b"<!doctype html", b"<html")) or (start.startswith(b"<?xml") and b"<html" in start):
        return Kind.HTML
    return None


def is_docx(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return "word/document.xml" in archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def looks_binary(head: bytes) -> bool:
    """NUL bytes or many control characters: no text or markup file has those."""
    if not head:
        return False
    if b"\x00" in head:
        return True
    controls = sum(head.count(bytes([c])) for c in (*range(1, 9), *range(14, 27), *range(28, 32)))
    return controls > len(head) // 20


def is_utf8_text(head: bytes) -> bool:
    if looks_binary(head):
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(head) - 3  # only a character cut by the end of the sample
    return True


def read_head(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(_HEAD)
    except PermissionError:
        raise Unreadable("permission denied") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Unreadable("symbolic link loop, skipped") from None
        raise Unreadable(f"cannot open ({e.strerror or e})") from None


def choose(path: Path, name: str | None = None) -> Kind:
    """The reader for `path`, whose file name is `name` (when `path` is another way to open it); `Unreadable`
    when none fits."""
    name = path.name if name is None else name
    by_name = suffix_kind(name)
    if by_name in _RECORDS:
        return by_name
    head = read_head(path)
    sniffed = sniff(head)
    if sniffed is Kind.DOCX and not is_docx(path):
        sniffed = None
    if sniffed in (Kind.PDF, Kind.DOCX):
        return sniffed
    if by_name is not None:
        return by_name
    if sniffed is Kind.HTML:
        return Kind.HTML
    if not Path(name).suffix and is_utf8_text(head):
        return Kind.TEXT
    raise Unreadable(
        f"unsupported file type (expected one of {', '.join(SUFFIXES)}, gzipped or not, or text without a suffix), "
        "skipped"
    )
