"""The default index: BM25 over ~100-word passages in an embedded tantivy index (no server).

tantivy scores with BM25 at k1=1.2, b=0.75, the Elasticsearch defaults the Typed-RAG paper used.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import glob
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path

import tantivy

import typedrag
from typedrag.corpus.chunker import CHUNKER_VERSION
from typedrag.errors import UserError
from typedrag.index.base import IndexBuildError, IndexUnusableError, empty_index_error
from typedrag.corpus.readers import FileFilter
from typedrag.index.ingest import FileRecord, corpus_sha256, count, filters_for, ingest, plan, scan_filtered
from typedrag.index.progress import BuildWatch
from typedrag.index.manifest import (
    FORMAT_VERSION,
    MANIFEST,
    file_checksums,
    is_typedrag_index,
    read_manifest,
    source_fingerprint,
    write_manifest,
)

try:
    import fcntl
except ImportError:  # Windows: no flock; builds there are not guarded against each other
    fcntl = None
from typedrag.records import IndexSummary, Passage, ScoredPassage, encode_lines, lines_of
from typedrag.text import SNOWBALL_STOPWORDS
from typedrag.embed import EMBEDDERS, embedder_for
from typedrag.index import dense, fusion
from typedrag.index.vectors import FILES as VECTOR_FILES
from typedrag.index.vectors import DenseVectors, Table, identity_of
from typedrag.index.sentences import SENTENCES, SentenceStore, section_of
from typedrag.embed import remember
from typedrag.index.nearest import GRAPH

ENGINE = "tantivy-bm25"
# tantivy built-in: split on non-alphanumerics, drop tokens > 40 chars, lowercase, English Snowball stemmer.
# On the shared Wikipedia corpus it put the Wiki-NFQA short answer in the top 20 for 38.7% of questions,
# against 37.4% for "default" (no stemming), at the same speed and index size.
TOKENIZER = "en_stem"
WRITER_HEAP_BYTES = 1 << 30  # split between the writer threads; bigger segments, fewer merges
WRITER_THREADS = 2
# Dropped from queries only (the index keeps every word): they match most passages, so scoring them
# costs most of the query time while adding almost nothing to BM25 (tiny IDF). English Snowball list;
# measured on Wiki-NFQA questions: p50 8.3 ms with no stopwords, 1.5 ms with tantivy's short Lucene
# list, 1.0 ms with this one, and answer coverage 37.6% / 38.0% / 38.7%.
QUERY_STOPWORDS = sorted(SNOWBALL_STOPWORDS)
# The fields a query searches, with their weights (docs/lab/2026-12-01-title-search.md).
SEARCH_FIELDS = {"text": 1.0, "section": 0.5}
# A reader's private folder of symlinks in the temporary folder: "<prefix><pid>-<random>".
MIRROR_PREFIX = "typedrag-index-"


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("passage_id", stored=True, tokenizer_name="raw")
    builder.add_text_field("doc_id", stored=True, tokenizer_name="raw")
    builder.add_text_field("file", stored=True, tokenizer_name="raw")  # the source file's key: a sync deletes by it
    # "freq" (no positions): BM25 needs term frequencies only; positions made the index 17% bigger
    # (the searchable part 60%) and the build 20% slower. Title and section are indexed, and searched
    # only as SEARCH_FIELDS says (docs/lab/2026-12-01-title-search.md has the measurements).
    builder.add_text_field("title", stored=True, tokenizer_name=TOKENIZER, index_option="freq")
    builder.add_text_field("section", stored=True, tokenizer_name=TOKENIZER, index_option="freq")
    builder.add_text_field("text", stored=True, tokenizer_name=TOKENIZER, index_option="freq")
    builder.add_unsigned_field("position", stored=True, indexed=True)
    builder.add_unsigned_field("page", stored=True)
    builder.add_unsigned_field("page_end", stored=True)
    # The kind of each line of the text ("p,i1,i2,c": records.encode_lines), stored for reading back, never searched.
    builder.add_bytes_field("lines", stored=True, indexed=False)
    return builder.build()


def _query_analyzer() -> tantivy.TextAnalyzer:
    """The index's `en_stem` chain with the stopword filter inserted before stemming."""
    F = tantivy.Filter
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(F.remove_long(40))
        .filter(F.lowercase())
        .filter(F.custom_stopword(QUERY_STOPWORDS))
        .filter(F.stemmer("english"))
        .build()
    )


def bm25_query(
    schema: tantivy.Schema, analyzer: tantivy.TextAnalyzer, query: str, fields: dict[str, float] | None = None
) -> tantivy.Query | None:
    """OR of the query's terms over the searched fields (field -> weight), never tantivy's parser (which
    chokes on `C++ (x)?`).

    A term written twice weighs twice (Okapi BM25's query-term frequency): strategies repeat a
    question's subject in its sub-queries so that it outweighs cue words like "causes".
    """
    clauses = []
    for term, frequency in Counter(analyzer.analyze(query)).items():
        for field, weight in (fields or SEARCH_FIELDS).items():
            clause = tantivy.Query.term_query(schema, field, term, index_option="freq")
            boost = frequency * weight
            clauses.append((tantivy.Occur.Should, clause if boost == 1 else tantivy.Query.boost_query(clause, float(boost))))
    return tantivy.Query.boolean_query(clauses) if clauses else None


def mentioned(searcher: tantivy.Searcher, query_for: Callable[[str], "tantivy.Query | None"], word: str) -> bool:
    """Whether any passage holds `word` (as the index's analyzer reads it), or the word without a plural or
    possessive ending the stemmer leaves on a name ("RPMs", "Debian's"). A word the analyzer drops (a stopword)
    is mentioned."""
    for form in dict.fromkeys([word, re.sub(r"(?:'s|s)$", "", word)]):
        query = query_for(form)
        if query is None or searcher.search(query, limit=1, count=False).hits:
            return True
    return False


def _rebuild_hint(index_dir: Path) -> str:
    return f"re-run `typedrag index SOURCE... --index {index_dir}` to rebuild it"


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
        sources, index_dir, passage_words=passage_words, strict=strict, show_progress=show_progress, rebuild=True,
        retrieval=retrieval, embedder=embedder, filters=filters, sentence_vectors=sentence_vectors,
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
    _check_target(index_dir)
    try:
        return _sync(
            sources, index_dir, passage_words, strict, show_progress, remove_missing, rebuild, retrieval, embedder, filters, watch,
            dense.asked_sentences(sentence_vectors),
        )
    except OSError as error:  # a full disk met outside the writes `_writes` names (the lock, the journal): one line too
        if error.errno not in (errno.ENOSPC, errno.EDQUOT) or isinstance(error, UserError):
            raise
        left = "the previous index is unchanged" if (index_dir / MANIFEST).is_file() else "nothing was written"
        raise IndexBuildError(f"cannot write the index {index_dir} (no space left on device); {left}") from None


def _sync(
    sources: list, index_dir: Path, passage_words: int, strict: bool, show_progress: bool, remove_missing: bool, rebuild: bool,
    retrieval: str | None, embedder: str | None, filters: FileFilter | None, watch: BuildWatch | None, sentence_vectors: bool | None,
) -> IndexSummary:
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(index_dir):
        _recover_interrupted_swap(index_dir)
        _check_target(index_dir)  # again under the lock: another build may have just finished
        previous = None if rebuild else _reusable_manifest(index_dir, passage_words)
        current = _current_manifest(index_dir)
        wanted = dense.wanted(current, retrieval, embedder)
        filters = filters_for(filters, current)
        choose = functools.partial(dense.sentence_choice, sentence_vectors, current, sources, wanted)
        return _sync_locked(sources, index_dir, previous, passage_words, strict, show_progress, remove_missing, wanted, filters, watch, choose)


def _current_manifest(index_dir: Path) -> dict | None:
    """The manifest of the index in place, checked, or None (no index, or an unusable one)."""
    if not (index_dir / MANIFEST).is_file():
        return None
    try:
        return read_manifest(index_dir, _rebuild_hint(index_dir))
    except IndexUnusableError:
        return None


def _reusable_manifest(index_dir: Path, passage_words: int) -> dict | None:
    """The current index's manifest if a sync can build on it: same format, engine and passage size."""
    if not (index_dir / MANIFEST).is_file():
        return None
    try:
        manifest = read_manifest(index_dir, _rebuild_hint(index_dir))
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
    sources, index_dir: Path, previous: dict | None, passage_words: int, strict: bool, show_progress: bool, remove_missing: bool,
    wanted: "dense.Wanted", filters: FileFilter, watch: BuildWatch | None, choose_sentences: Callable[..., "dense.SentenceChoice"],
) -> IndexSummary:
    started = time.perf_counter()
    summary = IndexSummary(index_dir=str(index_dir), synced=previous is not None)
    _remove_abandoned_builds(index_dir)
    held = {key: FileRecord.from_json(key, data) for key, data in previous["corpus"]["files"].items()} if previous else {}
    left_out: list[str] = []
    work = plan(scan_filtered(sources, summary, strict, filters, left_out), held, remove_missing=remove_missing, left_out=left_out)
    building = index_dir.parent / f".{index_dir.name}.building-{os.getpid()}-{secrets.token_hex(4)}"
    had_index = (index_dir / MANIFEST).is_file()
    try:
        with _writes():
            building.mkdir()
        try:
            with _writes():
                if previous is not None:
                    _link_index_files(index_dir, building, previous["files"])
                index = tantivy.Index(_schema(), path=str(building))
                writer = index.writer(WRITER_HEAP_BYTES, WRITER_THREADS)
            try:
                kept = _kept_document_check(index, set(work.to_delete)) if work.unchanged else _nothing_kept
                for key in work.to_delete:
                    writer.delete_documents_by_term("file", key)
                add = _adder(writer)
                records = ingest(
                    work.to_read, passage_words, strict, add, summary, known_document=kept, show_progress=show_progress, watch=watch
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
                vectors = dense.write(building, index, records, work, previous, index_dir, wanted, summary, show_progress, watch)
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
                _swap_into_place(building, index_dir)
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


def _manifest(building: Path, sources, records: dict[str, FileRecord], summary: IndexSummary, passage_words: int, filters: FileFilter) -> dict:
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


def _check_target(index_dir: Path) -> None:
    """Refuse any folder but an absent one, an empty one, or a typedrag index: never delete anything else."""
    resolved, cwd = index_dir.resolve(), Path.cwd().resolve()
    if cwd == resolved or cwd.is_relative_to(resolved):
        raise IndexBuildError(
            f"{index_dir} is the current folder or one of its parents; give --index a new or empty folder, "
            "e.g. --index typedrag-index"
        )
    if not index_dir.exists() and not index_dir.is_symlink():
        return
    if os.path.ismount(index_dir):
        raise IndexBuildError(f"{index_dir} is a mount point; give --index a new folder inside it")
    if not index_dir.is_dir() or index_dir.is_symlink():
        raise IndexBuildError(f"{index_dir} exists and is not a typedrag index (not a folder); refusing to replace it")
    if not any(index_dir.iterdir()):
        return
    ok, why = is_typedrag_index(index_dir, ENGINE)
    if not ok:
        raise IndexBuildError(
            f"{index_dir} exists and is not a typedrag index ({why}); refusing to replace it: "
            "give --index a new or empty folder"
        )


@contextlib.contextmanager
def _build_lock(index_dir: Path):
    """An exclusive flock on `.NAME.lock` beside the index for the whole build (not inside it: the folder is
    swapped for the new one); the kernel releases it when the process dies, so a killed build never leaves a
    stale lock. The file is removed when the build ends, still locked, so nothing is left beside the index; a
    build that locked a file removed meanwhile sees that the name is no longer its file and locks the name again
    (the protocol that lets lock files be deleted: two builds never hold two different files)."""
    if fcntl is None:
        yield
        return
    path = index_dir.parent / f".{index_dir.name}.lock"
    while True:
        handle = open(path, "a+b")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise IndexBuildError(
                f"another typedrag build is writing {index_dir} (it holds {path}); wait for it to finish"
            ) from None
        if _same_file(handle, path):
            break
        handle.close()  # the build that held it removed it while this one waited: lock the name anew
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        handle.close()  # releases the lock


def _same_file(handle, path: Path) -> bool:
    """Whether `path` still names the open file `handle`."""
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    opened = os.fstat(handle.fileno())
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def _recover_interrupted_swap(index_dir: Path) -> None:
    """Undo a kill during `_swap_into_place` (call under the build lock, so no swap is running).

    Killed between its two renames, the previous index sits alone in `.NAME.old-*`: put the newest
    typedrag index of those back in place. Killed before deleting it, `.old-*` is a superseded copy:
    delete it. Only folders that are typedrag indexes are touched.
    """
    olds = [
        p
        for p in index_dir.parent.glob(f".{glob.escape(index_dir.name)}.old-*")
        if p.is_dir() and not p.is_symlink() and is_typedrag_index(p, ENGINE)[0]
    ]
    olds.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    if olds and not index_dir.exists() and not index_dir.is_symlink():
        olds.pop(0).rename(index_dir)
    for old in olds:
        shutil.rmtree(old, ignore_errors=True)


def _remove_abandoned_builds(index_dir: Path) -> None:
    """Delete the temporary directories of earlier builds whose process is gone (killed mid-build)."""
    for stale in index_dir.parent.glob(f".{glob.escape(index_dir.name)}.building-*"):
        _remove_if_its_process_is_gone(stale, stale.name.rsplit("-", 2)[-2])


def _remove_if_its_process_is_gone(folder: Path, pid: str) -> None:
    """Delete a temporary folder named by the process that made it, once that process is gone (never a symlink)."""
    if pid.isdigit() and not _running(int(pid)) and not folder.is_symlink():
        shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    if os.name != "posix":  # no cheap liveness check (signal 0 means Ctrl-C on Windows): keep the directory
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, but another user's
        pass
    return True


def _swap_into_place(building: Path, index_dir: Path) -> None:
    """Two renames; readers that already opened the old index keep their open files."""
    old = None
    if index_dir.exists():
        old = index_dir.parent / f".{index_dir.name}.old-{secrets.token_hex(4)}"
        index_dir.rename(old)
    building.rename(index_dir)
    if old:
        shutil.rmtree(old, ignore_errors=True)


class TantivyRetriever:
    """Search over a built index: BM25, dense vectors, or both fused (hybrid). Read-only and safe to share
    between threads.

    `retrieval` None searches as the index was built (hybrid when it has vectors); an index built before
    vectors is searched with BM25 and says how to add them (`notice`). A sync swaps a new index folder in
    while this one is open: each search first checks (one `stat`) whether the manifest changed, and if so
    opens the new index, so a running server sees the new documents without a restart; searches under
    way finish on the index they started on.
    """

    def __init__(self, index_dir: Path | str, fields: dict[str, float] | None = None, retrieval: str | None = None):
        self.index_dir = Path(index_dir)
        self.fields = dict(fields or SEARCH_FIELDS)
        self.asked = retrieval
        self._analyzer = _query_analyzer()
        self._reopening = threading.Lock()
        self._view = _View.open(self.index_dir, retrieval)
        self.reloads = 0  # times a sync's new version was opened (the service's typedrag_index_reloads_total)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._starting = threading.Lock()

    @property
    def manifest(self) -> dict:
        return self._current().manifest

    @property
    def retrieval(self) -> str:
        """How this retriever searches now: bm25, dense or hybrid."""
        return self._current().mode

    @property
    def name(self) -> str:
        """The engine as traces show it: "tantivy-bm25", "tantivy-hybrid/minilm" (the embedder after the slash)."""
        view = self._current()
        return ENGINE if view.mode == "bm25" else f"tantivy-{view.mode}/{view.vectors.table.embedder}"

    @property
    def notice(self) -> str | None:
        """What a user should know about how this index is searched (an index without vectors), or None."""
        return self._current().notice

    def _current(self) -> "_View":
        """The open index, reopened first if a sync has replaced it since."""
        view = self._view
        if view.stamp == _stamp(self.index_dir) or not self._reopening.acquire(blocking=False):
            return view  # unchanged, or another thread is reopening: this search uses what is open
        try:
            stamp = _stamp(self.index_dir)
            if stamp is not None and stamp != self._view.stamp:
                try:
                    self._view = _View.open(self.index_dir, self.asked)
                    self.reloads += 1
                except IndexUnusableError:
                    pass  # caught mid-swap, or the new index is damaged: keep answering from the open one
            return self._view
        finally:
            self._reopening.release()

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        view = self._current()
        if view.mode == "bm25":
            return [ScoredPassage(_passage(doc), score) for score, doc in self._bm25(view, query, k)]
        return self._fused(view, [query], k)[0]

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        """Two threads: tantivy releases the GIL while it searches (checked: other threads keep running)."""
        view = self._current()
        if view.mode == "bm25":
            return list(self._threads().map(lambda q: self.search(q, k), queries))
        return self._fused(view, queries, k)

    def passage(self, passage_id: str) -> tuple[Passage, str, dict] | None:
        """One passage by its id, with the key of its source file and that file's manifest record (its hash,
        to tell whether an original is still the one indexed); None if the index has no such passage."""
        view = self._current()
        doc = self._docs(view, {passage_id}).get(passage_id)
        if doc is None:
            return None
        key = doc.get_first("file") or ""
        return _passage(doc), key, view.manifest.get("corpus", {}).get("files", {}).get(key, {})

    def mentions(self, word: str) -> bool:
        """Whether any passage of the index holds `word` (typedrag.abstain asks it of the names a question uses)."""
        view = self._current()
        with self._reading():
            return mentioned(view.searcher, lambda text: bm25_query(view.schema, self._analyzer, text, self.fields), word)

    def _bm25(self, view: "_View", query: str, k: int) -> list[tuple[float, tantivy.Document]]:
        q = bm25_query(view.schema, self._analyzer, query, self.fields)
        if q is None or k <= 0:
            return []
        with self._reading():
            hits = view.searcher.search(q, limit=k, count=False).hits
            return [(score, view.searcher.doc(address)) for score, address in hits]

    @contextlib.contextmanager
    def _reading(self):
        """Damage in a file the manifest checks by size only surfaces when it is read: one line naming the fix."""
        try:
            yield
        except BaseException as e:  # tantivy panics (a BaseException) on bytes it trusted
            if not _is_damage(e):
                raise
            raise IndexUnusableError(f"{self.index_dir} is damaged ({_one_line(e)}): {_rebuild_hint(self.index_dir)}") from None

    def _fused(self, view: "_View", queries: list[str], k: int) -> list[list[ScoredPassage]]:
        """Dense (and, for hybrid, BM25) rankings of every query, fused by reciprocal rank."""
        if k <= 0:
            return [[] for _ in queries]
        if view.mode == "hybrid":  # as BM25 does, hybrid finds nothing for a query of stopwords and punctuation alone
            searchable = [i for i, q in enumerate(queries) if bm25_query(view.schema, self._analyzer, q, self.fields) is not None]
            if len(searchable) < len(queries):
                found = self._fused(view, [queries[i] for i in searchable], k) if searchable else []
                results: list[list[ScoredPassage]] = [[] for _ in queries]
                for i, hits in zip(searchable, found):
                    results[i] = hits
                return results
        depth = max(k, fusion.HYBRID_DEPTH)
        nearest = view.vectors.search(view.embedder().embed(queries), depth if view.mode == "hybrid" else k)
        if view.mode == "dense":
            docs = self._docs(view, {pid for hits in nearest for pid, _ in hits})
            return [[ScoredPassage(_passage(docs[pid]), score) for pid, score in hits if pid in docs] for hits in nearest]
        lexical = list(self._threads().map(lambda q: self._bm25(view, q, depth), queries))
        known = {doc.get_first("passage_id"): doc for hits in lexical for _, doc in hits}
        known.update(self._docs(view, {pid for hits in nearest for pid, _ in hits} - known.keys()))
        fused = [
            fusion.hybrid(
                set(self._analyzer.analyze(query)),
                [(d.get_first("passage_id"), d.get_first("title") or "") for _, d in bm25],
                [(pid, known[pid].get_first("title") or "") for pid, _ in near if pid in known],
                k,
                self._title_terms,
            )
            for query, bm25, near in zip(queries, lexical, nearest)
        ]
        known.update(self._docs(view, {pid for hits in fused for pid, _ in hits} - known.keys()))
        return [[ScoredPassage(_passage(known[pid]), score) for pid, score in hits if pid in known] for hits in fused]

    def _title_terms(self, title: str) -> set[str]:
        return set(self._analyzer.analyze(title))

    def _docs(self, view: "_View", passage_ids: set[str]) -> dict[str, tantivy.Document]:
        """The stored documents of these passages, by id (one term-set query)."""
        if not passage_ids:
            return {}
        query = tantivy.Query.term_set_query(view.schema, "passage_id", sorted(passage_ids))
        with self._reading():
            hits = view.searcher.search(query, limit=len(passage_ids), count=False).hits
            docs = [view.searcher.doc(address) for _, address in hits]
        return {doc.get_first("passage_id"): doc for doc in docs}

    def _threads(self) -> ThreadPoolExecutor:
        """The search threads, started once (starting them per call cost more than six searches of a small
        index) and again in a forked child, which inherits the pool but not its threads."""
        with self._starting:
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="typedrag-search")
                self._pool_pid = os.getpid()
            return self._pool


def _passage(doc: tantivy.Document) -> Passage:
    text = doc.get_first("text")
    lines = doc.get_first("lines")  # None in an index built before line kinds were kept
    return Passage(
        doc.get_first("passage_id"),
        doc.get_first("doc_id"),
        doc.get_first("title"),
        text,
        section=doc.get_first("section") or "",
        page=doc.get_first("page"),
        page_end=doc.get_first("page_end"),
        lines=lines_of(text, bytes(lines).decode("ascii", "replace")) if lines else (),
    )


def _stamp(index_dir: Path) -> tuple[int, int, int] | None:
    """What identifies one version of an index: its manifest's inode, size and modification time."""
    try:
        info = os.stat(index_dir / MANIFEST)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


@dataclass
class _View:
    """One opened version of an index: its manifest, searcher and schema, and its vectors if it is searched with them."""

    stamp: tuple[int, int, int] | None
    manifest: dict
    searcher: tantivy.Searcher
    schema: tantivy.Schema
    mirror: tempfile.TemporaryDirectory | None  # kept alive as long as the searcher reads through it
    mode: str = "bm25"
    vectors: "DenseVectors | None" = None
    notice: str | None = None
    sentences: "SentenceStore | None" = None  # the vectors of its passages' sentences, for answers (embed.remember)

    def embedder(self):
        return embedder_for(self.vectors.table.embedder)

    @classmethod
    def open(cls, index_dir: Path, asked: str | None = None) -> "_View":
        hint = _rebuild_hint(index_dir)
        stamp = _stamp(index_dir)
        manifest = read_manifest(index_dir, hint)
        if manifest.get("engine", {}).get("name") != ENGINE:
            raise IndexUnusableError(f"{index_dir} was not built by the {ENGINE} engine: {hint}")
        mode, vectors, notice = _search_mode(index_dir, manifest, asked)
        # tantivy takes a lock file in the folder it opens, so opening in place needs write access
        # (and a read-only mount fails). Readers open a private folder of symlinks to the files the
        # manifest lists instead: the index folder is never written, and read-only ones open.
        # Builds never write into an existing index (they swap a new folder in), so the lock guards nothing.
        mirror = _symlink_mirror(index_dir, manifest["files"])
        try:
            index = tantivy.Index.open(mirror.name if mirror else str(index_dir))
            index.config_reader(reload_policy="Manual")  # each version is written once, never changed: no file watcher
            searcher = index.searcher()
        except BaseException as e:
            if not _is_damage(e):
                raise
            if _is_lock_failure(e):
                raise IndexUnusableError(
                    f"tantivy cannot take its lock file in {index_dir} ({_one_line(e)}); the index itself is "
                    "fine: give this process write access to the folder, or a writable TMPDIR for a read-only index"
                ) from None
            raise IndexUnusableError(f"tantivy cannot open {index_dir} ({_one_line(e)}): {hint}") from None
        sentences = SentenceStore(index_dir, built=section_of(manifest) is not None)
        remember(sentences)
        return cls(stamp, manifest, searcher, index.schema, mirror, mode, vectors, notice, sentences)


def _search_mode(index_dir: Path, manifest: dict, asked: str | None) -> tuple[str, "DenseVectors | None", str | None]:
    """(mode, vectors, notice): how an index is searched, given the retrieval asked for (None: as it was built)."""
    mode = asked or dense.recorded_retrieval(manifest)
    add = f"`typedrag index SOURCE... --index {index_dir} --retrieval hybrid` adds them (each passage is embedded once)"
    if mode == "bm25":  # chosen, or an index from before vectors (no `retrieval` recorded): that one is told
        old = asked is None and ("retrieval" not in manifest or manifest.get("vectors_skipped"))
        return "bm25", None, f"{index_dir} has no passage vectors, so it is searched with BM25 alone; {add}" if old else None
    table = Table.from_json(manifest.get("vectors"))
    if table is None:
        if asked:
            raise IndexUnusableError(f"{index_dir} has no passage vectors for --retrieval {asked}: {add}, or use --retrieval bm25")
        return "bm25", None, f"{index_dir} has no passage vectors, so it is searched with BM25 alone; {add}"
    if table.embedder not in EMBEDDERS or table.identity != identity_of(table.embedder):
        hint = f"`typedrag index SOURCE... --index {index_dir}` embeds them again with this typedrag's model"
        if asked:
            raise IndexUnusableError(f"{index_dir}'s vectors were made by another model ({table.identity}): {hint}")
        return "bm25", None, f"{index_dir}'s vectors were made by another model, so it is searched with BM25 alone; {hint}"
    try:
        vectors = DenseVectors(index_dir, table, manifest.get("vector_search"))
    except (OSError, ValueError) as error:
        raise IndexUnusableError(f"{index_dir}'s vector files are damaged ({_one_line(error)}): {_rebuild_hint(index_dir)}") from None
    return mode, vectors, None


def _symlink_mirror(index_dir: Path, files: dict) -> tempfile.TemporaryDirectory | None:
    """A temporary folder of symlinks to the index's files, where tantivy may write its lock files.

    None (open in place) where symlinks are unavailable (Windows without the privilege) or no temporary
    folder is writable. Removed when the retriever is garbage-collected or the process exits; the
    searcher keeps the files it mapped, so it is unaffected by a rebuild swapping a new index in.
    """
    _remove_abandoned_mirrors()
    try:
        mirror = tempfile.TemporaryDirectory(prefix=f"{MIRROR_PREFIX}{os.getpid()}-")
    except OSError:
        return None
    try:
        for name in files:
            os.symlink((index_dir / name).resolve(), os.path.join(mirror.name, name))
    except (OSError, NotImplementedError):
        mirror.cleanup()
        return None
    return mirror


def _remove_abandoned_mirrors() -> None:
    """Delete the symlink folders of readers whose process is gone: one killed (SIGKILL, OOM) never ran
    the cleanup that exit or garbage collection does, and each would stay in the temporary folder."""
    try:
        leftovers = list(Path(tempfile.gettempdir()).glob(f"{MIRROR_PREFIX}*-*"))
    except OSError:
        return
    for stale in leftovers:
        _remove_if_its_process_is_gone(stale, stale.name[len(MIRROR_PREFIX) :].split("-", 1)[0])


def _is_lock_failure(error: BaseException) -> bool:
    text = str(error).lower()
    return "lockfile" in text or "read-only file system" in text or "readonlyfilesystem" in text or "permission" in text


def _is_damage(error: BaseException) -> bool:
    """tantivy reports damaged files as OSError/ValueError, or panics (a BaseException) on bytes it trusted."""
    return isinstance(error, (OSError, ValueError)) or type(error).__name__ == "PanicException"


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:200]


def open_retriever(index_dir: Path | str, retrieval: str | None = None) -> TantivyRetriever:
    """Open a built index for search; `IndexUnusableError` (naming the fix) if it cannot be used.
    `retrieval` (bm25, dense, hybrid) overrides the index's own (None)."""
    return TantivyRetriever(index_dir, retrieval=retrieval)


def remove_index(index_dir: Path | str) -> bool:
    """Remove the typedrag index at `index_dir` (when its sources are all gone: a sync would refuse to write an
    empty index), under the build lock and by one rename first, so a reader never sees half of it. Only a
    typedrag index is removed; False when there was none."""
    index_dir = Path(index_dir)
    with _build_lock(index_dir):
        _recover_interrupted_swap(index_dir)
        if not index_dir.exists():
            return False
        _check_target(index_dir)
        old = index_dir.parent / f".{index_dir.name}.old-{secrets.token_hex(4)}"
        index_dir.rename(old)
        shutil.rmtree(old, ignore_errors=True)
        dense.finished(index_dir)
        return True
