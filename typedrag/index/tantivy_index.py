"""The default index: BM25 over ~100-word passages in an embedded tantivy index (no server).

tantivy scores with BM25 at k1=1.2, b=0.75, the Elasticsearch defaults the Typed-RAG paper used.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import tempfile
import secrets
import shutil
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path

import tantivy
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

import typedrag
from typedrag.corpus import iter_documents
from typedrag.corpus.chunker import iter_passages
from typedrag.index.base import IndexBuildError, IndexUnusableError
from typedrag.index.manifest import (
    FORMAT_VERSION,
    file_checksums,
    hash_passage,
    is_typedrag_index,
    read_manifest,
    source_fingerprint,
    write_manifest,
)

try:
    import fcntl
except ImportError:  # Windows: no flock; builds there are not guarded against each other
    fcntl = None
from typedrag.records import IndexSummary, Passage, ScoredPassage
from typedrag.text import SNOWBALL_STOPWORDS

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


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("passage_id", stored=True, tokenizer_name="raw")
    builder.add_text_field("doc_id", stored=True, tokenizer_name="raw")
    # "freq" (no positions): BM25 needs term frequencies only; positions made the index 17% bigger
    # (the searchable part 60%) and the build 20% slower. Title is indexed (for lookups) but not
    # searched: adding it to queries lowered that top-20 answer coverage from 38.7% to 33.2%
    # (38.6% boosted by 0.1).
    builder.add_text_field("title", stored=True, tokenizer_name=TOKENIZER, index_option="freq")
    builder.add_text_field("text", stored=True, tokenizer_name=TOKENIZER, index_option="freq")
    builder.add_unsigned_field("position", stored=True, indexed=True)
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


def bm25_query(schema: tantivy.Schema, analyzer: tantivy.TextAnalyzer, query: str) -> tantivy.Query | None:
    """OR of the query's terms over the passage text, never tantivy's parser (which chokes on `C++ (x)?`).

    A term written twice weighs twice (Okapi BM25's query-term frequency): strategies repeat a
    question's subject in its sub-queries so that it outweighs cue words like "causes".
    """
    clauses = []
    for term, count in Counter(analyzer.analyze(query)).items():
        clause = tantivy.Query.term_query(schema, "text", term, index_option="freq")
        clauses.append((tantivy.Occur.Should, clause if count == 1 else tantivy.Query.boost_query(clause, float(count))))
    return tantivy.Query.boolean_query(clauses) if clauses else None


def _rebuild_hint(index_dir: Path) -> str:
    return f"re-run `typedrag index SOURCE... --index {index_dir}` to rebuild it"


def build_index(
    sources: Iterable[Path | str],
    index_dir: Path | str,
    *,
    passage_words: int = 100,
    strict: bool = False,
    show_progress: bool = True,
) -> IndexSummary:
    """Stream `sources` -> documents -> passages into a fresh tantivy index at `index_dir`.

    Built in a temporary sibling directory with the manifest written last, then renamed into
    place, so a failed or interrupted build leaves any previous index at `index_dir` usable.
    The temporary directory is named after the building process; the next build removes those
    whose process is gone (killed by SIGKILL or the OOM killer, which no cleanup code survives).
    Only an absent or empty folder, or a typedrag index, is built into (`IndexBuildError` otherwise),
    and a lock beside it (`.NAME.lock`) keeps two builds from writing the same folder.
    """
    sources = list(sources)
    index_dir = Path(index_dir)
    _check_target(index_dir)
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(index_dir):
        _recover_interrupted_swap(index_dir)
        _check_target(index_dir)  # again under the lock: another build may have just finished
        return _build_locked(sources, index_dir, passage_words, strict, show_progress)


def _build_locked(sources, index_dir: Path, passage_words: int, strict: bool, show_progress: bool) -> IndexSummary:
    started = time.perf_counter()
    summary = IndexSummary(index_dir=str(index_dir))
    _remove_abandoned_builds(index_dir)
    building = index_dir.parent / f".{index_dir.name}.building-{os.getpid()}-{secrets.token_hex(4)}"
    building.mkdir()
    try:
        writer = tantivy.Index(_schema(), path=str(building)).writer(WRITER_HEAP_BYTES, WRITER_THREADS)
        try:
            passages_sha256 = _write_passages(writer, sources, summary, passage_words, strict, show_progress)
        finally:
            writer.wait_merging_threads()  # joins the writer's threads, on failure too, before the cleanup below
        file_mode = building.stat().st_mode & 0o666  # tantivy writes meta.json 0600; follow the umask instead
        for path in building.iterdir():
            path.chmod(file_mode)
        summary.skipped = len(summary.problems)
        summary.seconds = time.perf_counter() - started
        write_manifest(
            building,
            {
                "format_version": FORMAT_VERSION,
                "typedrag_version": typedrag.__version__,
                "engine": {
                    "name": ENGINE,
                    "tantivy": package_version("tantivy"),
                    "k1": 1.2,
                    "b": 0.75,
                    "tokenizer": TOKENIZER,
                    "passage_words": passage_words,
                },
                "corpus": {
                    "sources": [source_fingerprint(s) for s in sources],
                    "passages_sha256": passages_sha256,
                },
                "counts": {"documents": summary.documents, "passages": summary.passages, "skipped": summary.skipped},
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
                "build_seconds": round(summary.seconds, 1),
                "files": file_checksums(building),
            },
        )
        _swap_into_place(building, index_dir)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return summary


def _write_passages(
    writer, sources, summary: IndexSummary, passage_words: int, strict: bool, show_progress: bool
) -> str:
    """Chunk, add and commit every document, counting into `summary`; returns the sha256 of all passages."""
    passages_hash = hashlib.sha256()
    started = time.perf_counter()
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TextColumn("{task.fields[documents]:,} documents, {task.completed:,} passages"),
        TextColumn("{task.fields[rate]:,.0f} passages/s"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, disable=not show_progress) as progress:
        task = progress.add_task("indexing", total=None, documents=0, rate=0.0)
        for doc in iter_documents(sources, strict=strict, problems=summary.problems):
            for position, passage in enumerate(iter_passages(doc, passage_words, summary.notes.append)):
                hash_passage(passages_hash, passage)
                record = tantivy.Document(
                    passage_id=passage.passage_id, doc_id=passage.doc_id, title=passage.title, text=passage.text
                )
                record.add_unsigned("position", position)  # a keyword int would be i64 and kill the writer
                writer.add_document(record)
                summary.passages += 1
            summary.documents += 1
            if summary.documents % 256 == 0:
                rate = summary.passages / (time.perf_counter() - started)
                progress.update(task, completed=summary.passages, documents=summary.documents, rate=rate)
        progress.update(task, description="committing", completed=summary.passages, documents=summary.documents)
        writer.commit()
        progress.update(task, description="indexed")
    return passages_hash.hexdigest()


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
    """An exclusive flock on `.NAME.lock` beside the index for the whole build; the kernel releases it
    when the process dies, so a killed build never leaves a stale lock. The file itself is kept
    (deleting a lock file lets two processes lock two different files)."""
    if fcntl is None:
        yield
        return
    path = index_dir.parent / f".{index_dir.name}.lock"
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexBuildError(
                f"another typedrag build is writing {index_dir} (it holds {path}); wait for it to finish"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


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
        pid = stale.name.rsplit("-", 2)[-2]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


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
    """BM25 search over a built index. Read-only and safe to share between threads."""

    name = ENGINE

    def __init__(self, index_dir: Path | str):
        self.index_dir = Path(index_dir)
        hint = _rebuild_hint(self.index_dir)
        self.manifest = read_manifest(self.index_dir, hint)
        if self.manifest.get("engine", {}).get("name") != ENGINE:
            raise IndexUnusableError(f"{self.index_dir} was not built by the {ENGINE} engine: {hint}")
        # tantivy takes a lock file in the folder it opens, so opening in place needs write access
        # (and a read-only mount fails). Readers open a private folder of symlinks to the files the
        # manifest lists instead: the index folder is never written, and read-only ones open.
        # Builds never write into an existing index (they swap a new folder in), so the lock guards nothing.
        self._mirror = _symlink_mirror(self.index_dir, self.manifest["files"])
        try:
            index = tantivy.Index.open(self._mirror.name if self._mirror else str(self.index_dir))
            index.config_reader(reload_policy="Manual")  # built once, never written: no file watcher
            self._searcher = index.searcher()
        except BaseException as e:
            if not _is_damage(e):
                raise
            if _is_lock_failure(e):
                raise IndexUnusableError(
                    f"tantivy cannot take its lock file in {self.index_dir} ({_one_line(e)}); the index itself is "
                    "fine: give this process write access to the folder, or a writable TMPDIR for a read-only index"
                ) from None
            raise IndexUnusableError(f"tantivy cannot open {self.index_dir} ({_one_line(e)}): {hint}") from None
        self._schema = index.schema
        self._analyzer = _query_analyzer()

    def _query(self, query: str) -> tantivy.Query | None:
        return bm25_query(self._schema, self._analyzer, query)

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        q = self._query(query)
        if q is None or k <= 0:
            return []
        try:
            hits = self._searcher.search(q, limit=k, count=False).hits
            docs = [(score, self._searcher.doc(address)) for score, address in hits]
        except BaseException as e:  # damage in a file the manifest checks by size only surfaces here
            if not _is_damage(e):
                raise
            raise IndexUnusableError(f"{self.index_dir} is damaged ({_one_line(e)}): {_rebuild_hint(self.index_dir)}") from None
        results = []
        for score, doc in docs:
            passage = Passage(
                doc.get_first("passage_id"), doc.get_first("doc_id"), doc.get_first("title"), doc.get_first("text")
            )
            results.append(ScoredPassage(passage, score))
        return results

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        """Two threads: tantivy releases the GIL while it searches (checked: other threads keep running)."""
        with ThreadPoolExecutor(max_workers=2) as pool:
            return list(pool.map(lambda q: self.search(q, k), queries))


def _symlink_mirror(index_dir: Path, files: dict) -> tempfile.TemporaryDirectory | None:
    """A temporary folder of symlinks to the index's files, where tantivy may write its lock files.

    None (open in place) where symlinks are unavailable (Windows without the privilege) or no temporary
    folder is writable. Removed when the retriever is garbage-collected or the process exits; the
    searcher keeps the files it mapped, so it is unaffected by a rebuild swapping a new index in.
    """
    try:
        mirror = tempfile.TemporaryDirectory(prefix="typedrag-index-")
    except OSError:
        return None
    try:
        for name in files:
            os.symlink((index_dir / name).resolve(), os.path.join(mirror.name, name))
    except (OSError, NotImplementedError):
        mirror.cleanup()
        return None
    return mirror


def _is_lock_failure(error: BaseException) -> bool:
    text = str(error).lower()
    return "lockfile" in text or "read-only file system" in text or "readonlyfilesystem" in text or "permission" in text


def _is_damage(error: BaseException) -> bool:
    """tantivy reports damaged files as OSError/ValueError, or panics (a BaseException) on bytes it trusted."""
    return isinstance(error, (OSError, ValueError)) or type(error).__name__ == "PanicException"


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:200]


def open_retriever(index_dir: Path | str) -> TantivyRetriever:
    """Open a built index for search; `IndexUnusableError` (naming the fix) if it cannot be used."""
    return TantivyRetriever(index_dir)
