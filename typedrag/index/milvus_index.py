"""The Milvus backend: the same passages as the tantivy index, in a Milvus collection reached over the network.

Why: one index shared by N stateless `typedrag serve` replicas, and corpora that outgrow one
machine. `pymilvus` speaks one API to Milvus Lite (`milvus-lite server`, or a local `.db` file), a
standalone server, a cluster and Zilliz Cloud, so between them only the URI and the token change.

Scoring: Milvus's BM25 function at k1=1.2, b=0.75, as tantivy, over the same terms as tantivy: each
passage also stores `terms`, its text run through tantivy's `en_stem` chain (simple tokenizer, lowercase,
English Snowball stemmer), and queries go through tantivy's query chain (the same plus stopwords
dropped). Milvus's own `standard` analyzer then only splits those terms on spaces. Why not Milvus's
English analyzer: Milvus Lite implements only the tokenizer and stop-word filters and silently ignores
a stemmer, so the same collection would be indexed differently on Lite than on a cluster, and without
stemming "crocodile" does not find "Crocodiles" (top-10 overlap with tantivy in tests/test_milvus.py:
0.54 without, 0.96 with). Milvus Lite scores BM25 with per-segment statistics, so its ranking is close
to, not equal to, tantivy's.

Dense vectors (`retrieval` "dense" or "hybrid" at build time) are the embedded index's: the same embedder
and passage input (`typedrag.embed.passage_input`), quantized the same way, so a passage has the same vector
in both backends. "hybrid" searches each leg and fuses them with `typedrag.index.fusion.hybrid`, the tantivy
index's reciprocal-rank fusion over each leg's top 100, rather than Milvus's RRF ranker over 2k per leg
(which kept about half of the fusion's gain: docs/lab/2026-12-02-hybrid.md).

pymilvus is imported lazily so the rest of typedrag works without the `milvus` extra.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import logging
import re
import secrets
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import numpy as np

import typedrag
from typedrag.corpus.chunker import CHUNKER_VERSION
from typedrag.embed import embedder_for, passage_input
from typedrag.index import dense, fusion
from typedrag.index.base import IndexUnusableError, empty_index_error
from typedrag.corpus.readers import FileFilter
from typedrag.index.ingest import FileRecord, corpus_sha256, count, filters_for, ingest, plan, scan_filtered
from typedrag.index.manifest import source_fingerprint
from typedrag.index.tantivy_index import _query_analyzer
from typedrag.index.vectors import identity_of, quantize
from typedrag.records import IndexSummary, Passage, ScoredPassage, encode_lines, lines_of

Mode = Literal["bm25", "dense", "hybrid"]
MODES: tuple[str, ...] = ("bm25", "dense", "hybrid")
ENGINE = "milvus"
FORMAT_VERSION = 2  # of the collection's schema and manifest; bump when either changes
MANIFEST_PROPERTY = "typedrag.manifest"  # collection property holding the manifest JSON, written last
FILES_PROPERTY = "typedrag.files"  # the file table a sync compares against (gzipped JSON, base64)
RESUME_PREFIX = "typedrag.ray."  # collection properties of a build or sync on a Ray cluster (index.distributed)
K1, B = 1.2, 0.75
ANALYZER: dict[str, Any] = {"tokenizer": "standard", "filter": ["lowercase"]}  # splits the pre-analyzed terms
TERMS = "tantivy en_stem"  # how `terms` is made from `text` (queries: the same plus Snowball stopwords dropped)
BUILD_INFIX = "__build_"  # <collection>__build_<hex>: the real collection behind the alias <collection>
BATCH_SIZE = 1000  # passages per insert: ~1 MB gRPC messages, far below Milvus's 64 MB limit
QUERY_BATCH = 8  # queries per search request: fewer round trips, yet Milvus Lite (~0.3-1 s a query at 100k) stays in SEARCH_TIMEOUT
CALL_TIMEOUT = 15.0  # seconds per call: pymilvus retries a brief failover until then, then we report
# pymilvus pings an idle channel every 10 s; a gRPC server left at its defaults (milvus-lite's) answers the third
# such ping with GOAWAY "too_many_pings" and the next call fails to connect. Calls carry their own timeout, so
# the channel pings only while a call runs, and no more often than servers allow by default (5 minutes). Our own
# channel (`dedicated`): pymilvus otherwise hands back a channel another client opened with other options.
CHANNEL_OPTIONS = {"grpc.keepalive_permit_without_calls": False, "grpc.keepalive_time_ms": 300_000}
# Searches get longer: Milvus Lite builds each segment's BM25 index on the first search after a start,
# which took over 15 s at 100k passages on a loaded 2-core machine.
SEARCH_TIMEOUT = 60.0
MAX_VARCHAR = 65535  # Milvus's VARCHAR limit, in UTF-8 bytes
FIELDS = ["passage_id", "doc_id", "title", "section", "text", "page", "page_end"]
LINES = "lines"  # the kind of each line of `text` (records.encode_lines); absent from collections built before it
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")


def _pymilvus():
    """Import pymilvus on first use; a one-line error naming the extra if it is missing."""
    try:
        import pymilvus
    except ImportError:
        raise IndexUnusableError("the Milvus backend needs pymilvus: pip install 'typedrag[milvus]'") from None
    # pymilvus logs every failed call with a traceback at ERROR; we report each failure as one line.
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    return pymilvus


def server_label(uri: str) -> str:
    """host:port of a server URI (no scheme, user or password), or the file of a Milvus Lite `.db` URI."""
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https", "tcp", "grpc", "unix") and parts.hostname:
        return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname
    return Path(uri).name or uri


def safe_uri(uri: str) -> str:
    """`uri` without any user:password part, for messages."""
    parts = urlsplit(uri)
    if parts.scheme and "@" in parts.netloc:
        return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()
    return uri


def _check_name(collection: str) -> None:
    if not _NAME.fullmatch(collection):
        raise ValueError(
            f"invalid Milvus collection name {collection!r}: use letters, digits and underscores, "
            "not starting with a digit, at most 200 characters"
        )


def _rebuild_hint(uri: str, collection: str, flags: str = "") -> str:
    return f"run `typedrag index SOURCE --backend milvus --uri {safe_uri(uri)} --collection {collection}{flags}` to build it"


class _Connection:
    """A MilvusClient plus what its errors need: where it points (never the token) and what to redact."""

    def __init__(self, uri: str, token: str | None):
        self.pymilvus = _pymilvus()
        self.uri = uri
        self.where = server_label(uri)
        self._secrets = [s for s in (token, urlsplit(uri).password) if s]
        with self.errors("connecting"):
            self.client = self.pymilvus.MilvusClient(
                uri=uri, token=token or "", timeout=CALL_TIMEOUT, grpc_options=CHANNEL_OPTIONS, dedicated=True
            )

    def one_line(self, error: BaseException) -> str:
        text = " ".join(str(error).split())
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text[:300]

    @contextmanager
    def errors(self, doing: str, hint: str = "start the server or check --uri and --token") -> Iterator[None]:
        """Turn any pymilvus/gRPC failure into one `IndexUnusableError` line naming the fix."""
        import grpc

        try:
            yield
        except (self.pymilvus.MilvusException, grpc.RpcError) as error:
            raise IndexUnusableError(
                f"Milvus at {self.where} failed while {doing} ({self.one_line(error)}): {hint}"
            ) from None

    def alias_target(self, alias: str) -> str | None:
        """The collection `alias` points to, or None if no such alias."""
        with self.errors("listing aliases"):
            for name in self.client.list_collections(timeout=CALL_TIMEOUT):
                if alias in self.client.list_aliases(name, timeout=CALL_TIMEOUT).get("aliases", []):
                    return name
        return None

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # closing a channel to a dead server must not hide the error being reported
            pass


def _schema(pymilvus, embedder: str | None):
    """Rows keyed by passage id and generation: Milvus deletes by primary key, so a sync can insert a changed
    file's new passages (same ids, new generation) before it deletes the old ones."""
    DataType, Function, FunctionType = pymilvus.DataType, pymilvus.Function, pymilvus.FunctionType
    schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False, description="typedrag passages")
    schema.add_field("row_id", DataType.VARCHAR, is_primary=True, max_length=MAX_VARCHAR)
    schema.add_field("passage_id", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("doc_id", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("file", DataType.VARCHAR, max_length=MAX_VARCHAR)  # the source file's key: a sync deletes by it
    schema.add_field("title", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("section", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("terms", DataType.VARCHAR, max_length=MAX_VARCHAR, enable_analyzer=True, analyzer_params=ANALYZER)
    schema.add_field("position", DataType.INT64)
    schema.add_field("page", DataType.INT64)  # 0: not from a paged document
    schema.add_field("page_end", DataType.INT64)
    schema.add_field(LINES, DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("generation", DataType.INT64)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["terms"], output_field_names=["sparse"])
    )
    if embedder is not None:
        from typedrag.embed import embedder_for

        schema.add_field("dense", DataType.FLOAT_VECTOR, dim=embedder_for(embedder).dim)
    return schema


def _index_params(client, embedder: str | None):
    params = client.prepare_index_params()
    params.add_index(
        field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params={"bm25_k1": K1, "bm25_b": B}
    )
    if embedder is not None:
        params.add_index(field_name="dense", index_type="AUTOINDEX", metric_type="COSINE")
    return params


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
        sources, uri, collection, token=token, passage_words=passage_words, strict=strict,
        show_progress=show_progress, batch_size=batch_size, dense=dense, rebuild=True, retrieval=retrieval, embedder=embedder,
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
    _check_name(collection)
    started = time.perf_counter()
    conn = _Connection(uri, token)
    summary = IndexSummary(index_dir=f"milvus {conn.where}/{collection}")
    try:
        live = conn.alias_target(collection)
        want = _wanted(conn, live, retrieval or ("hybrid" if dense else None), embedder, summary)
        filters = filters_for(filters, _live_manifest(conn, live) if live is not None else None)
        previous = None if rebuild or live is None else _reusable_manifest(conn, live, passage_words, want)
        if previous is None:
            _build_fresh(conn, sources, collection, live, summary, passage_words, strict, show_progress, batch_size, want, filters)
        else:
            summary.synced = True
            _sync_in_place(
                conn, live, previous, sources, summary, passage_words, strict, show_progress, batch_size, want, remove_missing, filters
            )
        summary.seconds = time.perf_counter() - started
    finally:
        conn.close()
    return summary


def _wanted(conn: _Connection, live: str | None, retrieval: str | None, embedder: str | None, summary: IndexSummary) -> "dense.Wanted":
    """What a build or sync of the collection whose live target is `live` makes (`dense.wanted`), noted in `summary`:
    the one decision for a build in this process and one on a cluster (index.distributed)."""
    current = _live_manifest(conn, live) if live is not None else None
    want = dense.wanted(current, retrieval, embedder)
    summary.retrieval, summary.embedder = want.retrieval, want.embedder
    return want


def _live_manifest(conn: _Connection, live: str) -> dict | None:
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
        manifest.setdefault("vectors", {"embedder": engine.get("embedder_key", "minilm"), "identity": "", "dim": 0, "rows": 0, "files": {}})
    return manifest


def _reusable_manifest(conn: _Connection, live: str, passage_words: int, want: "dense.Wanted") -> dict | None:
    """The live collection's manifest if a sync can build on it: same format and build parameters."""
    with conn.errors("reading the manifest"):
        properties = conn.client.describe_collection(live, timeout=CALL_TIMEOUT).get("properties") or {}
    try:
        manifest = json.loads(properties.get(MANIFEST_PROPERTY, ""))
        files = _unpack_files(properties.get(FILES_PROPERTY, ""))
    except (ValueError, TypeError):
        return None
    engine = manifest.get("engine", {}) if isinstance(manifest, dict) else {}
    same = {"name": ENGINE, "analyzer": ANALYZER, "terms": TERMS, "k1": K1, "b": B, "passage_words": passage_words,
            "dense": want.embedder is not None, "chunker": CHUNKER_VERSION}
    if want.embedder is not None:
        same["vector_identity"] = identity_of(want.embedder)
    if manifest.get("format_version") != FORMAT_VERSION or any(engine.get(k) != v for k, v in same.items()):
        return None
    if files is None or manifest.get("files_sha256") != hashlib.sha256(properties[FILES_PROPERTY].encode()).hexdigest():
        return None
    manifest["corpus"]["files"] = files
    return manifest


def _build_fresh(
    conn: _Connection, sources, collection: str, live: str | None, summary: IndexSummary,
    passage_words: int, strict: bool, show_progress: bool, batch_size: int, want: "dense.Wanted", filters: FileFilter,
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
            building, schema=_schema(conn.pymilvus, want.embedder), index_params=_index_params(conn.client, want.embedder),
            timeout=CALL_TIMEOUT,
        )
    try:
        with conn.errors("indexing", hint):
            with _Inserter(conn, building, batch_size, want.embedder, generation=1) as inserter:
                records = ingest(work.to_read, passage_words, strict, inserter.add, summary, show_progress=show_progress)
            summary.embedded, summary.embed_seconds = inserter.embedded, inserter.embed_seconds
            count(summary, work, records)
            if summary.documents == 0:
                raise empty_index_error(summary, f"the collection {collection!r}" if live else None)
            conn.client.flush(building, timeout=CALL_TIMEOUT)
            _write_manifest(conn, building, sources, records, summary, passage_words, want, filters=filters)
    except IndexUnusableError:
        raise  # Milvus is unreachable, so it cannot drop the partial build either: the next build does
    except BaseException:  # a corpus error, an oversized passage, no document, Ctrl-C: Milvus is fine, tidy up now
        try:
            conn.client.drop_collection(building, timeout=2)
        except Exception:
            pass
        raise
    _publish(conn, building, collection, live, hint)


def _publish(conn: _Connection, building: str, collection: str, live: str | None, hint: str) -> None:
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
    conn: _Connection, live: str, previous: dict, sources, summary: IndexSummary,
    passage_words: int, strict: bool, show_progress: bool, batch_size: int, want: "dense.Wanted", remove_missing: bool,
    filters: FileFilter,
) -> None:
    held = {key: FileRecord.from_json(key, data) for key, data in previous["corpus"]["files"].items()}
    left_out: list[str] = []
    work = plan(scan_filtered(sources, summary, strict, filters, left_out), held, remove_missing=remove_missing, left_out=left_out)
    generation = previous.get("generation", 1) + 1
    # New files too: a sync killed after inserting them left passages the manifest does not list.
    replaced = work.to_delete + [scanned.file.key for scanned in work.added]
    hint = "start the server or check --uri, then re-run `typedrag index` to complete the sync"
    with conn.errors("syncing", hint):
        clear_generation(conn, live, generation)
        kept = _kept_document_check(conn, live, set(replaced)) if work.unchanged else (lambda doc_id: False)
        with _Inserter(conn, live, batch_size, want.embedder, generation) as inserter:
            records = ingest(work.to_read, passage_words, strict, inserter.add, summary, known_document=kept, show_progress=show_progress)
        summary.embedded, summary.embed_seconds = inserter.embedded, inserter.embed_seconds
        records.update({record.key: record for record in work.unchanged})
        count(summary, work, records)
        if summary.documents == 0:
            _delete(conn, live, f"generation == {generation}")
            raise empty_index_error(summary, f"the collection {live!r}")
        for start in range(0, len(replaced), 100):
            keys = json.dumps(replaced[start : start + 100], ensure_ascii=False)
            _delete(conn, live, f"file in {keys} and generation != {generation}")
        conn.client.flush(live, timeout=CALL_TIMEOUT)
        _write_manifest(conn, live, sources, records, summary, passage_words, want, generation, filters)


def clear_generation(conn: _Connection, collection: str, generation: int) -> None:
    """Drop what a sync killed part way left in `generation` (the one the manifest does not list yet): its rows, which
    the rerun writes again under the same row ids, and any resume records of a sync on a cluster (`RESUME_PREFIX`),
    which would otherwise vouch for rows deleted here. Without it a rerun holds those passages twice, and the rows
    of a file edited again since then too."""
    _delete(conn, collection, f"generation == {generation}")
    properties = conn.client.describe_collection(collection, timeout=CALL_TIMEOUT).get("properties") or {}
    stale = [name for name in properties if name.startswith(RESUME_PREFIX)]
    if stale:
        conn.client.drop_collection_properties(collection, property_keys=stale, timeout=CALL_TIMEOUT)


def _delete(conn: _Connection, collection: str, expression: str) -> None:
    conn.client.delete(collection, filter=expression, timeout=CALL_TIMEOUT)


def _kept_document_check(conn: _Connection, collection: str, leaving: set[str]):
    """Whether a document id is already held by a file the sync keeps (a duplicate across files)."""

    def kept(doc_id: str) -> bool:
        rows = conn.client.query(collection, filter=f"doc_id == {json.dumps(doc_id)}", output_fields=["file"], limit=4, timeout=CALL_TIMEOUT)
        return any(row["file"] not in leaving for row in rows)

    return kept


def _write_manifest(
    conn: _Connection, collection: str, sources, records: dict[str, FileRecord], summary: IndexSummary,
    passage_words: int, want: "dense.Wanted", generation: int = 1, filters: FileFilter = FileFilter(),
) -> None:
    """The file table and the manifest, written last: their presence means the build or sync finished."""
    files = _pack_files(records)
    manifest: dict = {
        "format_version": FORMAT_VERSION,
        "typedrag_version": typedrag.__version__,
        "engine": _engine_params(conn.pymilvus, passage_words, want.embedder),
        "retrieval": want.retrieval,
        "corpus": {"sources": [source_fingerprint(s) for s in sources], "passages_sha256": corpus_sha256(records.values())},
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

    def __init__(self, conn: _Connection, collection: str, batch_size: int, embedder: str | None, generation: int) -> None:
        self.conn, self.collection, self.batch_size, self.generation = conn, collection, batch_size, generation
        self.embedder = None
        if embedder is not None:
            from typedrag.embed import embedder_for

            self.embedder = embedder_for(embedder)
        self.stemmer = _index_analyzer()
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


def passage_vectors(embedder, titles: list[str], texts: list[str]) -> np.ndarray:
    """The `dense` field of passages (their titles and texts): the embedded index's vector of each, exactly (the
    embedder's vector of `passage_input`, quantized to int8 and back as `typedrag.index.vectors` keeps it). The one
    home of a row's vector, for a build in this process and for one on a cluster (index.distributed)."""
    rows, scales = quantize(embedder.encode([passage_input(title, text) for title, text in zip(titles, texts)]))
    return rows.astype(np.float32) * scales[:, None]


def passage_row(passage: Passage, file_key: str, generation: int, stemmer) -> dict:
    """A passage as a row of the collection (without its vector); `stemmer` is `_index_analyzer()`. The one
    home of the row's shape, for a build in this process and for one on a cluster (index.distributed)."""
    _check_sizes(passage)
    return {
        "row_id": f"{passage.passage_id}@{generation}",
        "passage_id": passage.passage_id,
        "doc_id": passage.doc_id,
        "file": file_key,
        "title": passage.title,
        "section": passage.section,
        "text": passage.text,
        "terms": " ".join(stemmer.analyze(passage.text)),
        "position": int(passage.passage_id.rsplit("#", 1)[1]),
        "page": passage.page or 0,
        "page_end": passage.page_end or 0,
        LINES: encode_lines(passage.lines),
        "generation": generation,
    }


def _engine_params(pymilvus, passage_words: int, embedder: str | None) -> dict:
    """What the collection was built with; `MilvusRetriever` refuses a collection whose values differ."""
    params = {
        "name": ENGINE,
        "pymilvus": pymilvus.__version__,
        "analyzer": ANALYZER,
        "terms": TERMS,
        "k1": K1,
        "b": B,
        "passage_words": passage_words,
        "dense": embedder is not None,
        "chunker": CHUNKER_VERSION,
    }
    if embedder is not None:
        params["embedder"] = embedder_for(embedder).name
        params["embedder_key"] = embedder
        params["vector_identity"] = identity_of(embedder)
    return params


def _check_sizes(passage: Passage) -> None:
    for field in ("passage_id", "doc_id", "title", "text"):
        size = len(getattr(passage, field).encode())
        if size > MAX_VARCHAR:
            raise ValueError(
                f"passage {passage.passage_id[:80]!r}: its {field} is {size:,} bytes, Milvus holds {MAX_VARCHAR:,}; "
                "shorten it or use fewer --passage-words"
            )


def _index_analyzer():
    """tantivy's `en_stem` chain, as the tantivy index analyzes passages."""
    import tantivy

    F = tantivy.Filter
    builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(F.remove_long(40)).filter(F.lowercase())
    return builder.filter(F.stemmer("english")).build()


_QUERY_ANALYZER = _query_analyzer()


def query_text(query: str) -> str:
    """The query's distinct stemmed terms without stopwords, exactly as tantivy's retriever queries."""
    return " ".join(dict.fromkeys(_QUERY_ANALYZER.analyze(query)))


class MilvusRetriever:
    """Search a collection built by `build_milvus_index`. Thread-safe (one gRPC channel shared by all calls)."""

    def __init__(self, uri: str, collection: str = "typedrag", *, token: str | None = None, mode: Mode | None = None):
        """`mode` None searches as the collection was built (hybrid when it has vectors)."""
        if mode is not None and mode not in MODES:
            raise ValueError(f"unknown Milvus search mode {mode!r}; choose bm25, dense or hybrid")
        _check_name(collection)
        self.asked = mode
        self.collection = collection
        self._conn = _Connection(uri, token)
        try:
            self.manifest = self._check(uri)
        except BaseException:
            self._conn.close()
            raise
        self.name = f"milvus-{self.mode}@{self._conn.where}/{collection}"
        self.notice = None
        self._embedder = None
        if self.mode != "bm25":
            self._embedder = embedder_for(self.manifest["engine"].get("embedder_key", "minilm"))

    @property
    def retrieval(self) -> str:
        return self.mode

    def _check(self, uri: str) -> dict:
        """The collection's manifest, checked against this code; `IndexUnusableError` naming the fix otherwise."""
        conn, collection = self._conn, self.collection
        hint = _rebuild_hint(uri, collection)
        with conn.errors("opening the collection"):
            if not conn.client.has_collection(collection, timeout=CALL_TIMEOUT):
                raise IndexUnusableError(f"no Milvus collection {collection!r} at {conn.where}: {hint}")
            described = conn.client.describe_collection(collection, timeout=CALL_TIMEOUT)
        raw = (described.get("properties") or {}).get(MANIFEST_PROPERTY)
        if raw is None:
            raise IndexUnusableError(f"Milvus collection {collection!r} has no typedrag manifest (unfinished or foreign): {hint}")
        try:
            manifest = json.loads(raw)
            engine = manifest["engine"]
            version = manifest["format_version"]
        except (ValueError, KeyError, TypeError):
            raise IndexUnusableError(f"Milvus collection {collection!r} has a corrupt typedrag manifest: {hint}") from None
        if version != FORMAT_VERSION:
            raise IndexUnusableError(
                f"Milvus collection {collection!r} has format {version}, this typedrag reads format {FORMAT_VERSION}: {hint}"
            )
        expected = {"name": ENGINE, "analyzer": ANALYZER, "terms": TERMS, "k1": K1, "b": B}
        wrong = [key for key, value in expected.items() if engine.get(key) != value]
        if wrong:
            raise IndexUnusableError(
                f"Milvus collection {collection!r} was built with other {', '.join(wrong)} than this typedrag uses: {hint}"
            )
        self.mode = self.asked or manifest.get("retrieval") or ("hybrid" if engine.get("dense") else "bm25")
        if self.mode != "bm25" and not engine.get("dense"):
            raise IndexUnusableError(
                f"Milvus collection {collection!r} has no dense vectors for --retrieval {self.mode}: "
                f"{_rebuild_hint(uri, collection, ' --retrieval hybrid')}, or use --retrieval bm25"
            )
        with conn.errors("opening the collection"):
            conn.client.load_collection(collection, timeout=CALL_TIMEOUT)  # a no-op when loaded; needed after a release
        names = {field.get("name") for field in described.get("fields", [])}
        self._fields = FIELDS + [LINES] if LINES in names else FIELDS  # a collection built before kinds were kept has none
        return manifest

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        """Up to QUERY_BATCH queries per request: one round trip instead of one per query."""
        results: list[list[ScoredPassage]] = [[] for _ in queries]
        if k <= 0:
            return results
        terms = [query_text(q) for q in queries]
        # BM25 and hybrid need a term left after stopwords (tantivy returns nothing then too); dense needs any text.
        todo = [i for i, q in enumerate(queries) if (q.strip() if self.mode == "dense" else terms[i])]
        for start in range(0, len(todo), QUERY_BATCH):
            chunk = todo[start : start + QUERY_BATCH]
            with self._conn.errors("searching"):
                hits = self._search([queries[i] for i in chunk], [terms[i] or queries[i] for i in chunk], k)
            for i, row in zip(chunk, hits):
                results[i] = [self._scored(hit) for hit in row]
        return results

    def _search(self, raw: list[str], terms: list[str], k: int) -> list[list[dict]]:
        client = self._conn.client
        bm25 = {"metric_type": "BM25"}
        cosine = {"metric_type": "COSINE"}
        if self.mode == "bm25":
            return client.search(
                self.collection, data=terms, anns_field="sparse", limit=k, output_fields=self._fields,
                search_params=bm25, timeout=SEARCH_TIMEOUT,
            )
        vectors = [v.tolist() for v in self._embedder.embed(raw)]
        if self.mode == "dense":
            return client.search(
                self.collection, data=vectors, anns_field="dense", limit=k, output_fields=self._fields,
                search_params=cosine, timeout=SEARCH_TIMEOUT,
            )
        # Each leg's top HYBRID_DEPTH, fused here exactly as the embedded index fuses them.
        depth = max(k, fusion.HYBRID_DEPTH)
        lexical = client.search(
            self.collection, data=terms, anns_field="sparse", limit=depth, output_fields=self._fields,
            search_params=bm25, timeout=SEARCH_TIMEOUT,
        )
        nearest = client.search(
            self.collection, data=vectors, anns_field="dense", limit=depth, output_fields=self._fields,
            search_params=cosine, timeout=SEARCH_TIMEOUT,
        )
        results = []
        for query, bm25_hits, dense_hits in zip(raw, lexical, nearest):
            by_id = {hit["entity"]["passage_id"]: hit for hit in [*dense_hits, *bm25_hits]}
            fused = fusion.hybrid(
                set(_QUERY_ANALYZER.analyze(query)),
                [(h["entity"]["passage_id"], h["entity"]["title"]) for h in bm25_hits],
                [(h["entity"]["passage_id"], h["entity"]["title"]) for h in dense_hits],
                k,
                lambda title: set(_QUERY_ANALYZER.analyze(title)),
            )
            results.append([{**by_id[pid], "distance": score} for pid, score in fused])
        return results

    def _scored(self, hit: dict) -> ScoredPassage:
        entity = hit["entity"]
        passage = Passage(
            entity["passage_id"], entity["doc_id"], entity["title"], entity["text"], section=entity.get("section") or "",
            page=entity.get("page") or None, page_end=entity.get("page_end") or None,
            lines=lines_of(entity["text"], entity.get(LINES)),
        )
        # Milvus Lite reports BM25 scores negated (as distances); a server reports them as they are.
        score = abs(hit["distance"]) if self.mode == "bm25" else hit["distance"]
        return ScoredPassage(passage, float(score))

    def close(self) -> None:
        self._conn.close()


def open_milvus_retriever(uri: str, collection: str = "typedrag", *, token: str | None = None, mode: Mode | None = None) -> MilvusRetriever:
    """Open a built collection for search; `IndexUnusableError` (naming the fix) if it cannot be used."""
    return MilvusRetriever(uri, collection, token=token, mode=mode)
