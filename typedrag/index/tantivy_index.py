"""The default index: BM25 over ~100-word passages in an embedded tantivy index (no server).

tantivy scores with BM25 at k1=1.2, b=0.75, the Elasticsearch defaults the Typed-RAG paper used.
"""

from __future__ import annotations

import glob
import hashlib
import os
import secrets
import shutil
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path

import tantivy
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

import typedrag
from typedrag.corpus import chunk_document, iter_documents
from typedrag.index.base import IndexUnusableError
from typedrag.index.manifest import (
    FORMAT_VERSION,
    MANIFEST,
    file_checksums,
    hash_passage,
    read_manifest,
    source_fingerprint,
    write_manifest,
)
from typedrag.records import IndexSummary, Passage, ScoredPassage

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
QUERY_STOPWORDS = """a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me more most my
myself no nor not now of off on once only or other our ours ourselves out over own same she should so some
such than that the their theirs them themselves then there these they this those through to too under until
up very was we were what when where which while who whom why will with would you your yours yourself
yourselves""".split()


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
    """
    sources = list(sources)
    index_dir = Path(index_dir)
    if index_dir.exists() and not (
        index_dir.is_dir() and ((index_dir / MANIFEST).exists() or not any(index_dir.iterdir()))
    ):
        raise FileExistsError(f"{index_dir} exists and is not a typedrag index; refusing to replace it")
    index_dir.parent.mkdir(parents=True, exist_ok=True)
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
            for position, passage in enumerate(chunk_document(doc, passage_words)):
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
        try:
            index = tantivy.Index.open(str(self.index_dir))
            index.config_reader(reload_policy="Manual")  # built once, never written: no file watcher
            self._searcher = index.searcher()
        except BaseException as e:
            if not _is_damage(e):
                raise
            raise IndexUnusableError(f"tantivy cannot open {self.index_dir} ({_one_line(e)}): {hint}") from None
        self._schema = index.schema
        self._analyzer = _query_analyzer()

    def _query(self, query: str) -> tantivy.Query | None:
        """OR of the query's distinct terms; never tantivy's parser, which chokes on `C++ (x)?`."""
        clauses = [
            (tantivy.Occur.Should, tantivy.Query.term_query(self._schema, "text", term, index_option="freq"))
            for term in dict.fromkeys(self._analyzer.analyze(query))
        ]
        return tantivy.Query.boolean_query(clauses) if clauses else None

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


def _is_damage(error: BaseException) -> bool:
    """tantivy reports damaged files as OSError/ValueError, or panics (a BaseException) on bytes it trusted."""
    return isinstance(error, (OSError, ValueError)) or type(error).__name__ == "PanicException"


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:200]


def open_retriever(index_dir: Path | str) -> TantivyRetriever:
    """Open a built index for search; `IndexUnusableError` (naming the fix) if it cannot be used."""
    return TantivyRetriever(index_dir)
