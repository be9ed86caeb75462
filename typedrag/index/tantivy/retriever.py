"""Search a built embedded index: BM25, dense vectors, or both fused, reopened when a sync swaps a new version in."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import tantivy

from typedrag.embed import EMBEDDERS, embedder_for, remember
from typedrag.index import dense, fusion
from typedrag.index.base import Description, IndexUnusableError, Retriever
from typedrag.index.manifest import MANIFEST, read_manifest
from typedrag.index.sentences import SentenceStore, section_of
from typedrag.index.tantivy.folder import symlink_mirror
from typedrag.index.tantivy.schema import ENGINE, SEARCH_FIELDS, bm25_query, mentioned, query_analyzer, rebuild_hint
from typedrag.index.vectors import DenseVectors, Table, identity_of
from typedrag.records import Passage, ScoredPassage, lines_of


class TantivyRetriever(Retriever):
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
        self._analyzer = query_analyzer()
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

    def describe(self) -> Description:
        view = self._current()
        return Description(self.name, self.index_dir, view.manifest, view.notice, self.reloads)

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
            return mentioned(
                view.searcher, lambda text: bm25_query(view.schema, self._analyzer, text, self.fields), word
            )

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
            raise IndexUnusableError(
                f"{self.index_dir} is damaged ({_one_line(e)}): {rebuild_hint(self.index_dir)}"
            ) from None

    def _fused(self, view: "_View", queries: list[str], k: int) -> list[list[ScoredPassage]]:
        """Dense (and, for hybrid, BM25) rankings of every query, fused by reciprocal rank."""
        if k <= 0:
            return [[] for _ in queries]
        if view.mode == "hybrid":  # as BM25 does, hybrid finds nothing for a query of stopwords and punctuation alone
            searchable = [
                i for i, q in enumerate(queries) if bm25_query(view.schema, self._analyzer, q, self.fields) is not None
            ]
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
            return [
                [ScoredPassage(_passage(docs[pid]), score) for pid, score in hits if pid in docs] for hits in nearest
            ]
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
        hint = rebuild_hint(index_dir)
        stamp = _stamp(index_dir)
        manifest = read_manifest(index_dir, hint)
        if manifest.get("engine", {}).get("name") != ENGINE:
            raise IndexUnusableError(f"{index_dir} was not built by the {ENGINE} engine: {hint}")
        mode, vectors, notice = _search_mode(index_dir, manifest, asked)
        # tantivy takes a lock file in the folder it opens, so opening in place needs write access
        # (and a read-only mount fails). Readers open a private folder of symlinks to the files the
        # manifest lists instead: the index folder is never written, and read-only ones open.
        # Builds never write into an existing index (they swap a new folder in), so the lock guards nothing.
        mirror = symlink_mirror(index_dir, manifest["files"])
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
        return (
            "bm25",
            None,
            f"{index_dir} has no passage vectors, so it is searched with BM25 alone; {add}" if old else None,
        )
    table = Table.from_json(manifest.get("vectors"))
    if table is None:
        if asked:
            raise IndexUnusableError(
                f"{index_dir} has no passage vectors for --retrieval {asked}: {add}, or use --retrieval bm25"
            )
        return "bm25", None, f"{index_dir} has no passage vectors, so it is searched with BM25 alone; {add}"
    if table.embedder not in EMBEDDERS or table.identity != identity_of(table.embedder):
        hint = f"`typedrag index SOURCE... --index {index_dir}` embeds them again with this typedrag's model"
        if asked:
            raise IndexUnusableError(f"{index_dir}'s vectors were made by another model ({table.identity}): {hint}")
        return (
            "bm25",
            None,
            f"{index_dir}'s vectors were made by another model, so it is searched with BM25 alone; {hint}",
        )
    try:
        vectors = DenseVectors(index_dir, table, manifest.get("vector_search"))
    except (OSError, ValueError) as error:
        raise IndexUnusableError(
            f"{index_dir}'s vector files are damaged ({_one_line(error)}): {rebuild_hint(index_dir)}"
        ) from None
    return mode, vectors, None


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
