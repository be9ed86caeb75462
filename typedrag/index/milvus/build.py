"""Build or sync a Milvus collection in this process: a fresh build into a new collection behind an alias, a sync
in place under a new generation."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import secrets
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import typedrag
from typedrag.corpus.chunker import CHUNKER_VERSION
from typedrag.corpus.readers import FileFilter
from typedrag.index import dense
from typedrag.index.base import IndexUnusableError, empty_index_error
from typedrag.index.ingest import FileRecord, corpus_sha256, count, filters_for, ingest, plan, scan_filtered
from typedrag.index.manifest import source_fingerprint
from typedrag.index.milvus.schema import (
    ANALYZER,
    BATCH_SIZE,
    BUILD_INFIX,
    CALL_TIMEOUT,
    ENGINE,
    FILES_PROPERTY,
    FORMAT_VERSION,
    MANIFEST_PROPERTY,
    RESUME_PREFIX,
    TERMS,
    B,
    Connection,
    K1,
    check_name,
    engine_params,
    index_analyzer,
    index_params,
    passage_row,
    passage_vectors,
    schema,
)
from typedrag.index.vectors import identity_of
from typedrag.records import IndexSummary, Passage


def build_milvus_index(
    sources: Iterable[Path | str],
    uri: str,
    collection: str = "typedrag",
    *,
    token: str | None = None,
    passage_words: int = 100,
    strict: bool = False,
    show_progress: bool = True,
    batch_size: int = BATCH_SIZE,
    dense: bool = False,
    retrieval: str | None = None,
    embedder: str | None = None,
    filters: FileFilter | None = None,
) -> IndexSummary:
    """A fresh Milvus collection of `sources`, every file read (see `sync_milvus_index`)."""
    return sync_milvus_index(
        sources,
        uri,
        collection,
        token=token,
        passage_words=passage_words,
        strict=strict,
        show_progress=show_progress,
        batch_size=batch_size,
        dense=dense,
        rebuild=True,
        retrieval=retrieval,
        embedder=embedder,
        filters=filters,
    )


def sync_milvus_index(
    sources: Iterable[Path | str],
    uri: str,
    collection: str = "typedrag",
    *,
    token: str | None = None,
    passage_words: int = 100,
    strict: bool = False,
    show_progress: bool = True,
    batch_size: int = BATCH_SIZE,
    dense: bool = False,
    rebuild: bool = False,
    remove_missing: bool = True,
    retrieval: str | None = None,
    embedder: str | None = None,
    filters: FileFilter | None = None,
) -> IndexSummary:
    """Bring the collection `collection` in line with `sources`, as `sync_index` does for tantivy.

    `retrieval`, `embedder` and `filters` as for `sync_index` (None: as the collection has them, hybrid and no
    filters for a new one); `dense=True` is the older way to ask for vectors.

    A fresh build (no collection yet, `rebuild`, or other build parameters) is atomic: the passages go
    into a new collection `<collection>__build_<hex>` and the manifest is written last; only then is the
    alias `<collection>` pointed at it and the previous collection dropped. Replicas never see a
    half-built index, and a rerun after a failure starts clean. The next build drops abandoned
    `__build_` collections (two builds of one collection at once are not supported).

    A sync works in place, so replicas see the new documents as soon as it ends: the passages of new and
    changed files are inserted under a new generation, then the older generations of changed and removed
    files are deleted, then the manifest (with its file table) is updated. A sync killed part way leaves
    the collection searchable, at worst with a changed file's old and new passages both present, and the
    old manifest, so a rerun deletes what it had inserted (`clear_generation`), re-reads those files and
    completes it. Sources that give no readable
    document raise `EmptyIndexError` before anything is deleted.
    """
    sources = list(sources)
    check_name(collection)
    started = time.perf_counter()
    conn = Connection(uri, token)
    summary = IndexSummary(index_dir=f"milvus {conn.where}/{collection}")
    try:
        live = conn.alias_target(collection)
        want = wanted(conn, live, retrieval or ("hybrid" if dense else None), embedder, summary)
        filters = filters_for(filters, live_manifest(conn, live) if live is not None else None)
        previous = None if rebuild or live is None else reusable_manifest(conn, live, passage_words, want)
        if previous is None:
            _build_fresh(
                conn,
                sources,
                collection,
                live,
                summary,
                passage_words,
                strict,
                show_progress,
                batch_size,
                want,
                filters,
            )
        else:
            summary.synced = True
            _sync_in_place(
                conn,
                live,
                previous,
                sources,
                summary,
                passage_words,
                strict,
                show_progress,
                batch_size,
                want,
                remove_missing,
                filters,
            )
        summary.seconds = time.perf_counter() - started
    finally:
        conn.close()
    return summary


def wanted(
    conn: Connection, live: str | None, retrieval: str | None, embedder: str | None, summary: IndexSummary
) -> "dense.Wanted":
    """What a build or sync of the collection whose live target is `live` makes (`dense.wanted`), noted in `summary`:
    the one decision for a build in this process and one on a cluster (index.milvus.ray)."""
    current = live_manifest(conn, live) if live is not None else None
    want = dense.wanted(current, retrieval, embedder)
    summary.retrieval, summary.embedder = want.retrieval, want.embedder
    return want


def live_manifest(conn: Connection, live: str) -> dict | None:
    """The live collection's manifest, as `dense.wanted` reads it (retrieval, vectors' embedder), or None."""
    with conn.errors("reading the manifest"):
        properties = conn.client.describe_collection(live, timeout=CALL_TIMEOUT).get("properties") or {}
    try:
        manifest = json.loads(properties.get(MANIFEST_PROPERTY, ""))
    except (ValueError, TypeError):
        return None
    if not isinstance(manifest, dict):
        return None
    engine = manifest.get("engine", {})
    manifest.setdefault("retrieval", "hybrid" if engine.get("dense") else "bm25")
    if engine.get("dense"):
        manifest.setdefault(
            "vectors",
            {"embedder": engine.get("embedder_key", "minilm"), "identity": "", "dim": 0, "rows": 0, "files": {}},
        )
    return manifest


def reusable_manifest(conn: Connection, live: str, passage_words: int, want: "dense.Wanted") -> dict | None:
    """The live collection's manifest if a sync can build on it: same format and build parameters."""
    with conn.errors("reading the manifest"):
        properties = conn.client.describe_collection(live, timeout=CALL_TIMEOUT).get("properties") or {}
    try:
        manifest = json.loads(properties.get(MANIFEST_PROPERTY, ""))
        files = _unpack_files(properties.get(FILES_PROPERTY, ""))
    except (ValueError, TypeError):
        return None
    engine = manifest.get("engine", {}) if isinstance(manifest, dict) else {}
    same = {
        "name": ENGINE,
        "analyzer": ANALYZER,
        "terms": TERMS,
        "k1": K1,
        "b": B,
        "passage_words": passage_words,
        "dense": want.embedder is not None,
        "chunker": CHUNKER_VERSION,
    }
    if want.embedder is not None:
        same["vector_identity"] = identity_of(want.embedder)
    if manifest.get("format_version") != FORMAT_VERSION or any(engine.get(k) != v for k, v in same.items()):
        return None
    if files is None or manifest.get("files_sha256") != hashlib.sha256(properties[FILES_PROPERTY].encode()).hexdigest():
        return None
    manifest["corpus"]["files"] = files
    return manifest


def _build_fresh(
    conn: Connection,
    sources,
    collection: str,
    live: str | None,
    summary: IndexSummary,
    passage_words: int,
    strict: bool,
    show_progress: bool,
    batch_size: int,
    want: "dense.Wanted",
    filters: FileFilter,
) -> None:
    with conn.errors("checking collections"):
        names = conn.client.list_collections(timeout=CALL_TIMEOUT)
    if live is None and collection in names:
        raise FileExistsError(
            f"Milvus collection {collection!r} at {conn.where} exists and is not a typedrag alias; refusing to replace it"
        )
    with conn.errors("dropping abandoned builds"):
        for name in names:
            if name.startswith(collection + BUILD_INFIX) and name != live:
                conn.client.drop_collection(name, timeout=CALL_TIMEOUT)
    work = plan(scan_filtered(sources, summary, strict, filters), {})
    building = f"{collection}{BUILD_INFIX}{secrets.token_hex(4)}"
    hint = "start the server or check --uri, then re-run `typedrag index` (the partial build is dropped then)"
    with conn.errors("creating the collection", hint):
        conn.client.create_collection(
            building,
            schema=schema(conn.pymilvus, want.embedder),
            index_params=index_params(conn.client, want.embedder),
            timeout=CALL_TIMEOUT,
        )
    try:
        with conn.errors("indexing", hint):
            with _Inserter(conn, building, batch_size, want.embedder, generation=1) as inserter:
                records = ingest(
                    work.to_read, passage_words, strict, inserter.add, summary, show_progress=show_progress
                )
            summary.embedded, summary.embed_seconds = inserter.embedded, inserter.embed_seconds
            count(summary, work, records)
            if summary.documents == 0:
                raise empty_index_error(summary, f"the collection {collection!r}" if live else None)
            conn.client.flush(building, timeout=CALL_TIMEOUT)
            write_manifest(conn, building, sources, records, summary, passage_words, want, filters=filters)
    except IndexUnusableError:
        raise  # Milvus is unreachable, so it cannot drop the partial build either: the next build does
    except BaseException:  # a corpus error, an oversized passage, no document, Ctrl-C: Milvus is fine, tidy up now
        try:
            conn.client.drop_collection(building, timeout=2)
        except Exception:
            pass
        raise
    publish(conn, building, collection, live, hint)


def publish(conn: Connection, building: str, collection: str, live: str | None, hint: str) -> None:
    """Point the alias `collection` at the finished build, then drop the collection it pointed at before."""
    with conn.errors("switching the alias", hint):
        if live is None:
            conn.client.create_alias(building, collection, timeout=CALL_TIMEOUT)
        else:
            conn.client.alter_alias(building, collection, timeout=CALL_TIMEOUT)
    if live is not None:
        with conn.errors("dropping the previous collection", f"drop {live} by hand; {collection} is already rebuilt"):
            conn.client.drop_collection(live, timeout=CALL_TIMEOUT)


def _sync_in_place(
    conn: Connection,
    live: str,
    previous: dict,
    sources,
    summary: IndexSummary,
    passage_words: int,
    strict: bool,
    show_progress: bool,
    batch_size: int,
    want: "dense.Wanted",
    remove_missing: bool,
    filters: FileFilter,
) -> None:
    held = {key: FileRecord.from_json(key, data) for key, data in previous["corpus"]["files"].items()}
    left_out: list[str] = []
    work = plan(
        scan_filtered(sources, summary, strict, filters, left_out),
        held,
        remove_missing=remove_missing,
        left_out=left_out,
    )
    generation = previous.get("generation", 1) + 1
    # New files too: a sync killed after inserting them left passages the manifest does not list.
    replaced = work.to_delete + [scanned.file.key for scanned in work.added]
    hint = "start the server or check --uri, then re-run `typedrag index` to complete the sync"
    with conn.errors("syncing", hint):
        clear_generation(conn, live, generation)
        kept = _kept_document_check(conn, live, set(replaced)) if work.unchanged else (lambda doc_id: False)
        with _Inserter(conn, live, batch_size, want.embedder, generation) as inserter:
            records = ingest(
                work.to_read,
                passage_words,
                strict,
                inserter.add,
                summary,
                known_document=kept,
                show_progress=show_progress,
            )
        summary.embedded, summary.embed_seconds = inserter.embedded, inserter.embed_seconds
        records.update({record.key: record for record in work.unchanged})
        count(summary, work, records)
        if summary.documents == 0:
            delete(conn, live, f"generation == {generation}")
            raise empty_index_error(summary, f"the collection {live!r}")
        for start in range(0, len(replaced), 100):
            keys = json.dumps(replaced[start : start + 100], ensure_ascii=False)
            delete(conn, live, f"file in {keys} and generation != {generation}")
        conn.client.flush(live, timeout=CALL_TIMEOUT)
        write_manifest(conn, live, sources, records, summary, passage_words, want, generation, filters)


def clear_generation(conn: Connection, collection: str, generation: int) -> None:
    """Drop what a sync killed part way left in `generation` (the one the manifest does not list yet): its rows, which
    the rerun writes again under the same row ids, and any resume records of a sync on a cluster (`RESUME_PREFIX`),
    which would otherwise vouch for rows deleted here. Without it a rerun holds those passages twice, and the rows
    of a file edited again since then too."""
    delete(conn, collection, f"generation == {generation}")
    properties = conn.client.describe_collection(collection, timeout=CALL_TIMEOUT).get("properties") or {}
    stale = [name for name in properties if name.startswith(RESUME_PREFIX)]
    if stale:
        conn.client.drop_collection_properties(collection, property_keys=stale, timeout=CALL_TIMEOUT)


def delete(conn: Connection, collection: str, expression: str) -> None:
    conn.client.delete(collection, filter=expression, timeout=CALL_TIMEOUT)


def _kept_document_check(conn: Connection, collection: str, leaving: set[str]):
    """Whether a document id is already held by a file the sync keeps (a duplicate across files)."""

    def kept(doc_id: str) -> bool:
        rows = conn.client.query(
            collection, filter=f"doc_id == {json.dumps(doc_id)}", output_fields=["file"], limit=4, timeout=CALL_TIMEOUT
        )
        return any(row["file"] not in leaving for row in rows)

    return kept


def write_manifest(
    conn: Connection,
    collection: str,
    sources,
    records: dict[str, FileRecord],
    summary: IndexSummary,
    passage_words: int,
    want: "dense.Wanted",
    generation: int = 1,
    filters: FileFilter = FileFilter(),
) -> None:
    """The file table and the manifest, written last: their presence means the build or sync finished."""
    files = _pack_files(records)
    manifest: dict = {
        "format_version": FORMAT_VERSION,
        "typedrag_version": typedrag.__version__,
        "engine": engine_params(conn.pymilvus, passage_words, want.embedder),
        "retrieval": want.retrieval,
        "corpus": {
            "sources": [source_fingerprint(s) for s in sources],
            "passages_sha256": corpus_sha256(records.values()),
        },
        "counts": {"documents": summary.documents, "passages": summary.passages, "skipped": summary.skipped},
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "generation": generation,
        "files_sha256": hashlib.sha256(files.encode()).hexdigest(),
    }
    if filters:
        manifest["corpus"]["filters"] = filters.to_json()
    properties = {FILES_PROPERTY: files, MANIFEST_PROPERTY: json.dumps(manifest, sort_keys=True)}
    conn.client.alter_collection_properties(collection, properties=properties, timeout=CALL_TIMEOUT)


def _pack_files(records: dict[str, FileRecord]) -> str:
    """The file table as a collection property: JSON, gzipped and base64'd (a server caps a property's size)."""
    table = json.dumps({key: records[key].to_json() for key in sorted(records)}, separators=(",", ":"))
    return base64.b64encode(gzip.compress(table.encode(), mtime=0)).decode()


def _unpack_files(packed: str) -> dict | None:
    try:
        table = json.loads(gzip.decompress(base64.b64decode(packed)))
    except (ValueError, OSError, EOFError):
        return None
    return table if isinstance(table, dict) else None


class _Inserter:
    """Passages to rows, sent in batches (with MiniLM vectors when the collection is dense)."""

    def __init__(
        self, conn: Connection, collection: str, batch_size: int, embedder: str | None, generation: int
    ) -> None:
        self.conn, self.collection, self.batch_size, self.generation = conn, collection, batch_size, generation
        self.embedder = None
        if embedder is not None:
            from typedrag.embed import embedder_for

            self.embedder = embedder_for(embedder)
        self.stemmer = index_analyzer()
        self.rows: list[dict] = []
        self.embedded, self.embed_seconds = 0, 0.0

    def add(self, passage: Passage, file_key: str) -> None:
        self.rows.append(passage_row(passage, file_key, self.generation, self.stemmer))
        if len(self.rows) >= self.batch_size:
            self.send()

    def send(self) -> None:
        if not self.rows:
            return
        if self.embedder is not None:
            started = time.perf_counter()
            vectors = passage_vectors(self.embedder, [r["title"] for r in self.rows], [r["text"] for r in self.rows])
            for row, vector in zip(self.rows, vectors):
                row["dense"] = vector.tolist()
            self.embedded += len(self.rows)
            self.embed_seconds += time.perf_counter() - started
        self.conn.client.insert(self.collection, self.rows, timeout=CALL_TIMEOUT)
        self.rows = []

    def __enter__(self) -> "_Inserter":
        return self

    def __exit__(self, kind, *rest) -> None:
        if kind is None:
            self.send()
