"""Build or sync the embedded index: copy on write, from hard links to the version in place plus the changes."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path

import tantivy

import typedrag
from typedrag.corpus.chunker import CHUNKER_VERSION
from typedrag.corpus.readers import FileFilter
from typedrag.errors import UserError
from typedrag.index import dense
from typedrag.index.base import IndexBuildError, IndexUnusableError, empty_index_error
from typedrag.index.ingest import FileRecord, corpus_sha256, count, filters_for, ingest, plan, scan_filtered
from typedrag.index.manifest import (
    FORMAT_VERSION,
    MANIFEST,
    file_checksums,
    read_manifest,
    source_fingerprint,
    write_manifest,
)
from typedrag.index.nearest import GRAPH
from typedrag.index.progress import BuildWatch
from typedrag.index.sentences import SENTENCES
from typedrag.index.tantivy.folder import (
    build_lock,
    check_target,
    recover_interrupted_swap,
    remove_abandoned_builds,
    swap_into_place,
)
from typedrag.index.tantivy.schema import ENGINE, TOKENIZER, rebuild_hint, schema
from typedrag.index.vectors import FILES as VECTOR_FILES
from typedrag.records import IndexSummary, Passage, encode_lines


WRITER_HEAP_BYTES = 1 << 30  # split between the writer threads; bigger segments, fewer merges

WRITER_THREADS = 2


def build_index(
    sources: Iterable[Path | str],
    index_dir: Path | str,
    *,
    passage_words: int = 100,
    strict: bool = False,
    show_progress: bool = True,
    retrieval: str | None = None,
    embedder: str | None = None,
    filters: FileFilter | None = None,
    sentence_vectors: bool | None = None,
) -> IndexSummary:
    """A fresh tantivy index of `sources` at `index_dir`, every file read (see `sync_index`)."""
    return sync_index(
        sources,
        index_dir,
        passage_words=passage_words,
        strict=strict,
        show_progress=show_progress,
        rebuild=True,
        retrieval=retrieval,
        embedder=embedder,
        filters=filters,
        sentence_vectors=sentence_vectors,
    )


def sync_index(
    sources: Iterable[Path | str],
    index_dir: Path | str,
    *,
    passage_words: int = 100,
    strict: bool = False,
    show_progress: bool = True,
    remove_missing: bool = True,
    rebuild: bool = False,
    retrieval: str | None = None,
    embedder: str | None = None,
    watch: BuildWatch | None = None,
    filters: FileFilter | None = None,
    sentence_vectors: bool | None = None,
) -> IndexSummary:
    """Bring the tantivy index at `index_dir` in line with `sources`: add new files, re-index changed ones
    (by content hash), drop files gone from the sources (unless `remove_missing` is False), keep the rest.

    `filters` say which files of the folders given are read (`FileFilter`); None keeps the index's (none for a
    new index). They are recorded in the manifest; files they now leave out leave the index.

    `retrieval` ("bm25", "dense" or "hybrid") says whether the index keeps a vector per passage (the
    dense leg, `typedrag.index.dense`) and how it is searched by default; None keeps what the index has
    (a new index: hybrid). `embedder` names the model of the vectors (None: the index's, else the default).
    The vectors are written and swapped in with the rest: unchanged files keep theirs, new text is
    embedded, and an embedding interrupted part way resumes where it stopped. `sentence_vectors` says whether the
    sentences of every passage are embedded for answers too (`typedrag.index.dense.sentence_choice`; None: as
    TYPEDRAG_SENTENCE_VECTORS says, else as the index was first asked, else yes with MiniLM vectors but for the demo).

    With no usable index there (or `rebuild`, or other passage words) every file is read. Copy on
    write: the new index is made in a temporary sibling directory, from hard links to the current
    one's segment files (tantivy never changes a segment file) plus the changes, with the manifest
    written last, then renamed into place; so a failed or killed sync leaves the previous index
    usable, and a rerun completes it. Readers of the old index keep their open files, and
    `TantivyRetriever` reopens on its next search. The temporary directory is named after the
    building process; the next build removes those whose process is gone (killed by SIGKILL or the
    OOM killer, which no cleanup code survives). Only an absent or empty folder, or a typedrag index,
    is written (`IndexBuildError` otherwise), and a lock beside it (`.NAME.lock`, removed at the end) keeps two builds
    from writing the same folder. Sources that give no readable document raise `EmptyIndexError`
    and leave any existing index untouched. `watch`, if given, hears the progress (files read, passages
    embedded) and may cancel the build (`BuildCancelled`, the index in place untouched).
    """
    sources = list(sources)
    index_dir = Path(index_dir)
    check_target(index_dir)
    try:
        return _sync(
            sources,
            index_dir,
            passage_words,
            strict,
            show_progress,
            remove_missing,
            rebuild,
            retrieval,
            embedder,
            filters,
            watch,
            dense.asked_sentences(sentence_vectors),
        )
    except OSError as error:  # a full disk met outside the writes `_writes` names (the lock, the journal): one line too
        if error.errno not in (errno.ENOSPC, errno.EDQUOT) or isinstance(error, UserError):
            raise
        left = "the previous index is unchanged" if (index_dir / MANIFEST).is_file() else "nothing was written"
        raise IndexBuildError(f"cannot write the index {index_dir} (no space left on device); {left}") from None


def _sync(
    sources: list,
    index_dir: Path,
    passage_words: int,
    strict: bool,
    show_progress: bool,
    remove_missing: bool,
    rebuild: bool,
    retrieval: str | None,
    embedder: str | None,
    filters: FileFilter | None,
    watch: BuildWatch | None,
    sentence_vectors: bool | None,
) -> IndexSummary:
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(index_dir):
        recover_interrupted_swap(index_dir)
        check_target(index_dir)  # again under the lock: another build may have just finished
        previous = None if rebuild else _reusable_manifest(index_dir, passage_words)
        current = _current_manifest(index_dir)
        wanted = dense.wanted(current, retrieval, embedder)
        filters = filters_for(filters, current)
        choose = functools.partial(dense.sentence_choice, sentence_vectors, current, sources, wanted)
        return _sync_locked(
            sources,
            index_dir,
            previous,
            passage_words,
            strict,
            show_progress,
            remove_missing,
            wanted,
            filters,
            watch,
            choose,
        )


def _current_manifest(index_dir: Path) -> dict | None:
    """The manifest of the index in place, checked, or None (no index, or an unusable one)."""
    if not (index_dir / MANIFEST).is_file():
        return None
    try:
        return read_manifest(index_dir, rebuild_hint(index_dir))
    except IndexUnusableError:
        return None


def _reusable_manifest(index_dir: Path, passage_words: int) -> dict | None:
    """The current index's manifest if a sync can build on it: same format, engine and passage size."""
    if not (index_dir / MANIFEST).is_file():
        return None
    try:
        manifest = read_manifest(index_dir, rebuild_hint(index_dir))
    except IndexUnusableError:
        return None  # damaged or another format: rebuilt from scratch
    engine = manifest.get("engine", {})
    same = {"name": ENGINE, "passage_words": passage_words, "tokenizer": TOKENIZER, "chunker": CHUNKER_VERSION}
    if any(engine.get(key) != value for key, value in same.items()):
        return None
    if not isinstance(manifest.get("corpus", {}).get("files"), dict):
        return None
    return manifest


def _sync_locked(
    sources,
    index_dir: Path,
    previous: dict | None,
    passage_words: int,
    strict: bool,
    show_progress: bool,
    remove_missing: bool,
    wanted: "dense.Wanted",
    filters: FileFilter,
    watch: BuildWatch | None,
    choose_sentences: Callable[..., "dense.SentenceChoice"],
) -> IndexSummary:
    started = time.perf_counter()
    summary = IndexSummary(index_dir=str(index_dir), synced=previous is not None)
    remove_abandoned_builds(index_dir)
    held = (
        {key: FileRecord.from_json(key, data) for key, data in previous["corpus"]["files"].items()} if previous else {}
    )
    left_out: list[str] = []
    work = plan(
        scan_filtered(sources, summary, strict, filters, left_out),
        held,
        remove_missing=remove_missing,
        left_out=left_out,
    )
    building = index_dir.parent / f".{index_dir.name}.building-{os.getpid()}-{secrets.token_hex(4)}"
    had_index = (index_dir / MANIFEST).is_file()
    try:
        with _writes():
            building.mkdir()
        try:
            with _writes():
                if previous is not None:
                    _link_index_files(index_dir, building, previous["files"])
                index = tantivy.Index(schema(), path=str(building))
                writer = index.writer(WRITER_HEAP_BYTES, WRITER_THREADS)
            try:
                kept = _kept_document_check(index, set(work.to_delete)) if work.unchanged else _nothing_kept
                for key in work.to_delete:
                    writer.delete_documents_by_term("file", key)
                add = _adder(writer)
                records = ingest(
                    work.to_read,
                    passage_words,
                    strict,
                    add,
                    summary,
                    known_document=kept,
                    show_progress=show_progress,
                    watch=watch,
                )
                records.update({record.key: record for record in work.unchanged})
                count(summary, work, records)
                if summary.documents == 0:
                    writer.rollback()
                    raise empty_index_error(summary, f"the index at {index_dir}" if had_index else None)
                with _writes():
                    writer.commit()
            except BaseException:
                with contextlib.suppress(ValueError):  # the error being raised already says why the threads failed
                    writer.wait_merging_threads()
                raise
            with _writes():
                writer.wait_merging_threads()  # joins the writer's threads before the files are touched
            with _writes(engine=False):  # the vector files and the journal: the file system's errors alone
                vectors = dense.write(
                    building, index, records, work, previous, index_dir, wanted, summary, show_progress, watch
                )
            if watch is not None:
                watch.writing()
            with _writes(engine=False):
                choice = choose_sentences(vectors)
                kept = dense.write_sentences(building, index, previous, index_dir, choice, summary, show_progress)
                searched = dense.search_entries(building, vectors, summary)
            with _writes():
                file_mode = building.stat().st_mode & 0o666  # tantivy writes meta.json 0600; follow the umask instead
                for path in building.iterdir():
                    path.chmod(file_mode)
                summary.seconds = time.perf_counter() - started
                manifest = _manifest(building, sources, records, summary, passage_words, filters)
                manifest.update(dense.manifest_entries(wanted, vectors, building))
                manifest.update(searched)
                if kept is not None:
                    manifest["sentences"] = kept
                if choice.asked:  # a later sync keeps the choice
                    manifest["sentence_vectors"] = choice.build
                write_manifest(building, manifest)
                swap_into_place(building, index_dir)
            dense.finished(index_dir)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    except _CannotWrite as error:
        left = "the previous index is unchanged" if had_index else "nothing was written"
        raise IndexBuildError(f"cannot write the index {index_dir} ({error}); {left}") from None
    return summary


_SHORT_WRITE = re.compile(r"^\d+ requested and \d+ written$")


class _CannotWrite(Exception):
    """The file system or tantivy's writer refused a write; the message says why, as far as it is known."""


@contextlib.contextmanager
def _writes(engine: bool = True):
    """A failed write as `_CannotWrite`: the file system raises OSError (its errno says why), tantivy a
    ValueError (its writer thread met an io::Error it does not name: a full disk, most often; `engine`: the
    writes are tantivy's). Errors the user can fix otherwise (a missing source, no document) pass as they are."""
    try:
        yield
    except UserError:
        raise
    except OSError as error:
        where = f": {error.filename}" if error.filename else ""
        full = error.errno in (errno.ENOSPC, errno.EDQUOT)
        if error.errno is None and _SHORT_WRITE.search(str(error)):  # numpy's tofile: "601 requested and 496 written"
            raise _CannotWrite("no space left on device?") from error
        raise _CannotWrite("no space left on device" if full else f"{error.strerror or error}{where}") from error
    except ValueError as error:
        if not engine:
            raise
        raise _CannotWrite("no space left on device?") from error


def _link_index_files(index_dir: Path, building: Path, files: dict) -> None:
    """The current index's files in the new directory: segment files (written once, never changed) as hard
    links, the JSON files tantivy rewrites (meta.json, .managed.json) as copies, so nothing written to the
    new index can reach the one readers use. The vector files (passages', sentences') are not taken: every
    version writes its own."""
    for name in files:
        if name in VECTOR_FILES or name in (SENTENCES, GRAPH):
            continue
        source, target = index_dir / name, building / name
        if name.endswith(".json"):
            shutil.copy2(source, target)
            continue
        try:
            os.link(source, target)
        except OSError:  # another file system, or links not allowed: a copy does the same, slower
            shutil.copy2(source, target)


def _nothing_kept(doc_id: str) -> bool:
    return False


def _kept_document_check(index: tantivy.Index, leaving: set[str]):
    """Whether a document id is already held by a file the sync keeps (a duplicate across files)."""
    searcher, schema = index.searcher(), index.schema

    def kept(doc_id: str) -> bool:
        hits = searcher.search(tantivy.Query.term_query(schema, "doc_id", doc_id), limit=4, count=False).hits
        return any(searcher.doc(address).get_first("file") not in leaving for _, address in hits)

    return kept


def _adder(writer):
    """Adds one passage to the index being written; its file key comes from the passage's doc, set by `ingest`."""

    def add(passage: Passage, file_key: str) -> None:
        record = tantivy.Document(
            passage_id=passage.passage_id,
            doc_id=passage.doc_id,
            file=file_key,
            title=passage.title,
            section=passage.section,
            text=passage.text,
        )
        record.add_unsigned("position", _position(passage))  # a keyword int would be i64 and kill the writer
        if passage.page is not None:
            record.add_unsigned("page", passage.page)
        if passage.page_end is not None:
            record.add_unsigned("page_end", passage.page_end)
        if passage.lines:
            record.add_bytes("lines", encode_lines(passage.lines).encode())
        try:
            writer.add_document(record)
        except ValueError as error:  # "An index writer was killed": a writer thread failed to write
            raise _CannotWrite("no space left on device?") from error

    return add


def _position(passage: Passage) -> int:
    return int(passage.passage_id.rsplit("#", 1)[1])


def _manifest(
    building: Path,
    sources,
    records: dict[str, FileRecord],
    summary: IndexSummary,
    passage_words: int,
    filters: FileFilter,
) -> dict:
    manifest = {
        "format_version": FORMAT_VERSION,
        "typedrag_version": typedrag.__version__,
        "engine": {
            "name": ENGINE,
            "tantivy": package_version("tantivy"),
            "k1": 1.2,
            "b": 0.75,
            "tokenizer": TOKENIZER,
            "passage_words": passage_words,
            "chunker": CHUNKER_VERSION,
        },
        "corpus": {
            "sources": [source_fingerprint(s) for s in sources],
            "passages_sha256": corpus_sha256(records.values()),
            "files": {key: records[key].to_json() for key in sorted(records)},
        },
        "counts": {"documents": summary.documents, "passages": summary.passages, "skipped": summary.skipped},
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "build_seconds": round(summary.seconds, 1),
        "files": file_checksums(building),
    }
    if filters:
        manifest["corpus"]["filters"] = filters.to_json()
    return manifest


def remove_index(index_dir: Path | str) -> bool:
    """Remove the typedrag index at `index_dir` (when its sources are all gone: a sync would refuse to write an
    empty index), under the build lock and by one rename first, so a reader never sees half of it. Only a
    typedrag index is removed; False when there was none."""
    index_dir = Path(index_dir)
    with build_lock(index_dir):
        recover_interrupted_swap(index_dir)
        if not index_dir.exists():
            return False
        check_target(index_dir)
        old = index_dir.parent / f".{index_dir.name}.old-{secrets.token_hex(4)}"
        index_dir.rename(old)
        shutil.rmtree(old, ignore_errors=True)
        dense.finished(index_dir)
        return True
