"""Ingestion on a Ray cluster into Milvus: files read, chunked and embedded by the cluster's workers.

Why: one process reads, chunks and embeds every passage of a `typedrag index` build; the shipped MiniLM
embeds about 15 passages per CPU-second, so a corpus of millions of passages outgrows one machine at
ingestion long before it does at serving. Ray Data spreads the work over a cluster as its users expect:

    files ─ flat_map(read + chunk, tasks) ─ map_batches(embed, actor pool) ─ map_batches(upsert, actor pool) ─ driver

- **Read and chunk** run typedrag's own readers and chunker (`ingest.take_file`, the same code as a build in
  one process) in Ray tasks, one file per call; rows are `milvus_index.passage_row`s. Each file ends with a
  header row: its `FileRecord` (content hash, counts, passages hash), its problems and notes, its document ids.
- **Embed** (when the build keeps vectors: `--retrieval` hybrid or dense, the default for a new collection) in an
  actor pool, one model load per actor, batches of `EMBED_BATCH` passages, with the embedder the build names
  (`--embedder`, or the collection's) through `milvus_index.passage_vectors`: the vectors are the ones a build
  in one process computes (tests/test_ray.py). What a build makes (`milvus_index._wanted`), its manifest and its
  file table are decided and written by `milvus_index`'s own functions.
- **Write** in an actor pool: idempotent upserts keyed by the row id (`passage_id@generation`), so a task Ray
  retries after a worker died writes the same rows again, never twice.
- **The driver** sees each batch's acknowledgements: a file is done when its header and every one of its
  passages are acknowledged. Done files go to a ledger kept beside the data (collection properties
  `milvus_index.RESUME_PREFIX` + `<generation>.<n>`, checkpointed every few seconds), so a rerun after the
  driver or the cluster died resumes: it skips the files already written (same content hash), deletes the
  partial rows of the others, and reads those again (with nothing to resume, every row of the generation goes
  first, whoever left it). Nothing is lost (a file is done only once all of it is written) and
  nothing is duplicated (upserts, and partial rows deleted before a file is written again).

What a build in one process decides in listing order is decided the same way: a document id given by two
files belongs to the first in the listing (or to a file a sync keeps); since workers read files in parallel,
the driver finds such ids afterwards and has the files concerned read again, told which ids are taken (rare:
one-document files have unique ids by construction). Problems are reported per file, in listing order.

A fresh build writes into `<collection>__build_<hex>` marked as a Ray build with its parameters, and a rerun
with the same parameters resumes it; a sync writes the next generation into the live collection, as
`milvus_index` does. The manifest and file table are `milvus_index`'s, written last.

Ray is imported lazily: without the `ray` extra nothing here is loaded.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import logging
import os
import queue
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from typedrag import telemetry
from typedrag.corpus.chunker import CHUNKER_VERSION
from typedrag.corpus.readers import FileFilter, SourceFile
from typedrag.errors import CorpusError
from typedrag.index.base import IndexUnusableError, empty_index_error
from typedrag.index.ingest import FileRecord, ScannedFile, _fingerprint, _read_here, count, filters_for, plan, scan_filtered, take_file
from typedrag.index.milvus_index import (
    BATCH_SIZE,
    BUILD_INFIX,
    CALL_TIMEOUT,
    FORMAT_VERSION,
    LINES,
    RESUME_PREFIX,
    _check_name,
    _Connection,
    _delete,
    _index_analyzer,
    _index_params,
    _live_manifest,
    _publish,
    _reusable_manifest,
    _schema,
    _wanted,
    _write_manifest,
    passage_row,
    passage_vectors,
)
from typedrag.index.vectors import identity_of
from typedrag.records import CappedList, CorpusProblem, IndexSummary

LEDGER_PREFIX = RESUME_PREFIX  # collection properties typedrag.ray.<generation>.<n>: the files done so far
BUILD_MARK = "typedrag.ray.build"  # on a fresh build's collection: its parameters, so a rerun can resume it
EMBED_BATCH = 256  # passages per embedding call: large enough to keep an actor busy, small enough to stream
CHECKPOINT_SECONDS = 5.0  # how often the driver records the files done (and so how much a rerun reads again)
DELETE_CHUNK = 100  # file keys per delete expression
MAX_READ_BLOCKS = 1000  # files are spread over at most this many read tasks' inputs

# The columns of every row of the pipeline: Milvus's row fields, then the pipeline's own.
ROW_FIELDS = ("row_id", "passage_id", "doc_id", "file", "title", "section", "text", "terms", "position", "page",
              "page_end", LINES, "generation")
PASSAGE, HEADER = "passage", "file"


def _ray():
    """Import ray on first use; a one-line error naming the extra if it is missing."""
    from typedrag.extras import require

    require("ray.data", "ray", "typedrag index --ray")
    import ray

    return ray


# ---------------------------------------------------------------------------------------------- driver


@dataclass
class RayRun:
    """What the cluster did, for the summary line and the benchmarks."""

    address: str = ""
    nodes: int = 0
    cpus: int = 0
    files_read: int = 0
    passages: int = 0
    vectors: int = 0
    resumed: int = 0  # files a previous, interrupted run had written already
    reread: int = 0  # files read again because another file gave one of their document ids
    seconds: float = 0.0

    def line(self) -> str:
        rate = self.passages / self.seconds if self.seconds > 0 else 0.0
        text = (f"ray: {self.files_read:,} files read, {self.passages:,} passages, {self.vectors:,} vectors in "
                f"{self.seconds:.1f} s ({rate:,.1f} passages/s) on {self.nodes} nodes, {self.cpus} CPUs")
        if self.resumed:
            text += f"; {self.resumed:,} files already written by an interrupted run, kept"
        if self.reread:
            text += f"; {self.reread:,} files read again for duplicate document ids"
        return text


def sync_milvus_index_on_ray(
    sources: Iterable[Path | str],
    uri: str,
    collection: str = "typedrag",
    *,
    address: str | None = "auto",
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
    embed_actors: int | None = None,
    writers: int = 1,
    report: Callable[[str], None] | None = None,
    run: RayRun | None = None,
    filters: FileFilter | None = None,
) -> IndexSummary:
    """Build or sync the collection `collection` from `sources` on the Ray cluster at `address`, as
    `milvus_index.sync_milvus_index` does in one process: same passages, ids, vectors and manifest.

    `retrieval`, `embedder`, `dense` and `filters` as for `sync_milvus_index` (None: as the collection has them,
    hybrid and no filters for a new one): the same decision, by the same function.

    `address`: what `ray.init` takes ("auto": RAY_ADDRESS or the cluster this machine belongs to;
    "ray://host:10001": Ray Client), or "local" (a Ray started in this process, for one machine). The
    source files must be readable at the same paths by every worker (a shared file system). `embed_actors`
    caps the embedding actor pool (default: the cluster's CPUs); `writers` is the number of upsert actors.
    `report` gets the summary line; `run` (if given) is filled in with what the cluster did.
    """
    sources = list(sources)
    _check_name(collection)
    run = run if run is not None else RayRun()
    started = time.perf_counter()
    with telemetry.step("ingest", backend="milvus", collection=collection) as span:
        ray = _connect(address, run)
        conn = _Connection(uri, token)
        summary = IndexSummary(index_dir=f"milvus {conn.where}/{collection}")
        try:
            job = _Job(ray, conn, uri, token, collection, sources, summary, run, passage_words=passage_words,
                       strict=strict, show_progress=show_progress, batch_size=batch_size,
                       embed_actors=embed_actors, writers=writers)
            job.prepare(rebuild, remove_missing, retrieval or ("hybrid" if dense else None), embedder, filters)
            telemetry.describe(span, retrieval=summary.retrieval, embedder=summary.embedder)
            job.ingest()
            job.finish()
        finally:
            conn.close()
        summary.seconds = run.seconds = time.perf_counter() - started
        telemetry.describe(span, files=run.files_read, passages=run.passages, vectors=run.vectors, resumed=run.resumed)
    if report is not None:
        report(run.line())
    return summary


def _connect(address: str | None, run: RayRun):
    """Join the cluster (or start a local Ray for "local"), quietly: the driver shows its own progress."""
    ray = _ray()
    if not ray.is_initialized():
        env = {name: value for name, value in os.environ.items() if _forwarded(name)}
        try:
            ray.init(
                address=None if address in (None, "local") else address,
                logging_level=logging.WARNING,
                log_to_driver=False,
                runtime_env={"env_vars": env} if env else None,
            )
        except ConnectionError as error:
            raise IndexUnusableError(
                f"no Ray cluster at {address} ({' '.join(str(error).split())[:200]}): start one with `ray start --head`, "
                "set RAY_ADDRESS, or use --ray local"
            ) from None
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the driver's own progress says files, passages and vectors
    context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # its warnings speak of its own progress bars and tuning
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    run.address = address or "local"
    run.nodes = len(nodes)
    run.cpus = int(sum(node.get("Resources", {}).get("CPU", 0) for node in nodes))
    return ray


def _forwarded(name: str) -> bool:
    """Environment variables the workers get from the driver: tracing, and typedrag's settings (never a secret)."""
    if name.startswith("OTEL_"):
        return True
    return name.startswith("TYPEDRAG_") and not any(word in name for word in ("TOKEN", "KEY", "SECRET", "PASSWORD"))


@dataclass
class _FileState:
    """What the driver knows of one file being written: the passages acknowledged, and its header once seen."""

    scanned: ScannedFile
    order: int
    written: set[int] = field(default_factory=set)
    header: dict | None = None

    def complete(self) -> bool:
        return self.header is not None and len(self.written) == self.header["rows"]


class _Job:
    """One `index --ray` run: plan, ingest on the cluster, then finish as `milvus_index` does."""

    def __init__(self, ray, conn: _Connection, uri: str, token: str | None, collection: str, sources: list,
                 summary: IndexSummary, run: RayRun, *, passage_words: int, strict: bool, show_progress: bool,
                 batch_size: int, embed_actors: int | None, writers: int) -> None:
        self.ray, self.conn, self.uri, self.token, self.collection = ray, conn, uri, token, collection
        self.sources, self.summary, self.run = sources, summary, run
        self.passage_words, self.strict, self.show_progress = passage_words, strict, show_progress
        self.batch_size, self.writers = batch_size, writers
        self.embed_actors = embed_actors or max(1, run.cpus)
        self.headers: dict[str, dict] = {}  # file key -> its header (record, problems, notes, doc ids)
        self.resumed_headers: dict[str, dict] = {}  # from the ledger: files an interrupted run wrote

    # -- 1. what to do, and where

    def prepare(self, rebuild: bool, remove_missing: bool, retrieval: str | None, embedder: str | None, filters: FileFilter | None) -> None:
        conn, collection = self.conn, self.collection
        with telemetry.step("ingest.plan"):
            self.live = conn.alias_target(collection)
            self.want = _wanted(conn, self.live, retrieval, embedder, self.summary)
            self.filters = filters_for(filters, _live_manifest(conn, self.live) if self.live is not None else None)
            self.embedder = self.want.embedder  # the key of the vectors' model, None: no vectors
            previous = None if rebuild or self.live is None else _reusable_manifest(conn, self.live, self.passage_words, self.want)
            self.fresh, self.created = previous is None, False
            left_out: list[str] = []
            found = scan_filtered(self.sources, self.summary, self.strict, self.filters, left_out)
            self.order = {scanned.file.key: n for n, scanned in enumerate(found)}
            if self.fresh:
                self.target, self.generation, held = self._fresh_target(), 1, {}
            else:
                self.summary.synced = True
                self.target, self.generation = self.live, previous.get("generation", 1) + 1
                held = {key: FileRecord.from_json(key, data) for key, data in previous["corpus"]["files"].items()}
            self.work = plan(found, held, remove_missing=remove_missing, left_out=left_out)
            self.ledger = _Ledger(conn, self.target, self.generation)
            done = self.ledger.done
            to_read = self.work.to_read
            self.resumed_headers = {s.file.key: done[s.file.key] for s in to_read
                                    if s.file.key in done and done[s.file.key]["record"]["sha256"] == s.sha256}
            self.todo = [s for s in to_read if s.file.key not in self.resumed_headers]
            self.run.resumed = len(self.resumed_headers)
            # Rows of this generation that no file of this run will own: partial writes of the files read again,
            # and whatever an interrupted run wrote of files gone (or changed) since. With nothing to resume, that is
            # every row of the generation, whoever left it (a sync in one process killed part way too).
            stale = {s.file.key for s in self.todo} | (self.ledger.planned - set(self.resumed_headers))
            stale |= set(done) - set(self.resumed_headers)
            if self.created:  # a collection made just now holds no rows
                pass
            elif self.resumed_headers:
                self._delete_rows(sorted(stale), self.generation)
            else:
                with conn.errors("deleting partial rows", "start the server or check --uri, then re-run `typedrag index --ray`"):
                    _delete(conn, self.target, f"generation == {self.generation}")
            self.ledger.plan(s.file.key for s in self.todo)

    def _fresh_target(self) -> str:
        """A new build collection, or the one an interrupted Ray build with the same parameters left."""
        conn, collection = self.conn, self.collection
        mark = json.dumps(self._build_params(), sort_keys=True)
        with conn.errors("checking collections"):
            names = conn.client.list_collections(timeout=CALL_TIMEOUT)
        if self.live is None and collection in names:
            raise FileExistsError(
                f"Milvus collection {collection!r} at {conn.where} exists and is not a typedrag alias; refusing to replace it"
            )
        resumable = None
        with conn.errors("dropping abandoned builds"):
            for name in sorted(n for n in names if n.startswith(collection + BUILD_INFIX) and n != self.live):
                properties = conn.client.describe_collection(name, timeout=CALL_TIMEOUT).get("properties") or {}
                if resumable is None and properties.get(BUILD_MARK) == mark:
                    resumable = name
                else:
                    conn.client.drop_collection(name, timeout=CALL_TIMEOUT)
        if resumable is not None:
            return resumable
        building = f"{collection}{BUILD_INFIX}{secrets.token_hex(4)}"
        self.created = True
        with conn.errors("creating the collection", "start the server or check --uri, then re-run `typedrag index --ray`"):
            conn.client.create_collection(
                building, schema=_schema(conn.pymilvus, self.embedder), index_params=_index_params(conn.client, self.embedder),
                timeout=CALL_TIMEOUT,
            )
            conn.client.alter_collection_properties(building, properties={BUILD_MARK: mark}, timeout=CALL_TIMEOUT)
        return building

    def _build_params(self) -> dict:
        params = {"format_version": FORMAT_VERSION, "passage_words": self.passage_words, "chunker": CHUNKER_VERSION,
                  "embedder": self.embedder}
        if self.embedder is not None:
            params["vector_identity"] = identity_of(self.embedder)
        return params

    def _delete_rows(self, keys: list[str], generation: int, *, other_generations: bool = False) -> None:
        if not keys:
            return
        operator = "!=" if other_generations else "=="
        with self.conn.errors("deleting partial rows", "start the server or check --uri, then re-run `typedrag index --ray`"):
            for start in range(0, len(keys), DELETE_CHUNK):
                listed = json.dumps(keys[start : start + DELETE_CHUNK], ensure_ascii=False)
                _delete(self.conn, self.target, f"file in {listed} and generation {operator} {generation}")

    # -- 2. the cluster's part

    def ingest(self) -> None:
        started = time.perf_counter()
        try:
            self._ingest()
        finally:
            self.pipeline_seconds = time.perf_counter() - started

    def _ingest(self) -> None:
        with telemetry.step("ingest.ray", files=len(self.todo), resumed=len(self.resumed_headers)):
            self.headers = self._run(self.todo, taken={})
        self.run.files_read = len(self.todo)
        winners = self._duplicate_owners()
        if winners:
            again = sorted({key for key in winners.values() if key in self.headers or key in self.resumed_headers}
                           | self._losers(winners), key=self.order.__getitem__)
            with telemetry.step("ingest.reread", files=len(again)):
                self._delete_rows(again, self.generation)
                for key in again:
                    self.resumed_headers.pop(key, None)
                    self.headers.pop(key, None)
                self.headers.update(self._run([self._scanned(key) for key in again], taken=winners))
            self.run.reread = len(again)

    def _scanned(self, key: str) -> ScannedFile:
        return next(s for s in self.work.to_read if s.file.key == key)

    def _run(self, files: list[ScannedFile], taken: dict[str, str]) -> dict[str, dict]:
        """Read, chunk, embed and write `files` on the cluster; their headers once every row is acknowledged."""
        if not files:
            return {}
        ray = self.ray
        states = {self.order[s.file.key]: _FileState(s, self.order[s.file.key]) for s in files}
        carrier = _trace_carrier()
        items = [_item(state.order, state.scanned) for state in states.values()]
        ds = ray.data.from_items(items, override_num_blocks=min(len(items), MAX_READ_BLOCKS))
        ds = ds.flat_map(_read_chunk, fn_kwargs=dict(passage_words=self.passage_words, generation=self.generation,
                                                      taken=taken, carrier=carrier), num_cpus=1)
        if self.embedder is not None:
            embed = _configured(_Embed, embedder=self.embedder, carrier=carrier)
            ds = ds.map_batches(embed, batch_size=EMBED_BATCH, batch_format="numpy",
                                compute=ray.data.ActorPoolStrategy(min_size=1, max_size=self.embed_actors), num_cpus=1)
        writer = _configured(_Write, uri=self.uri, token=self.token, collection=self.target,
                             dense=self.embedder is not None, carrier=carrier)
        ds = ds.map_batches(writer, batch_size=self.batch_size, batch_format="numpy",
                            compute=ray.data.ActorPoolStrategy(size=self.writers), num_cpus=0)
        done: dict[str, dict] = {}
        progress = _Progress(self.show_progress, files, self.embedder is not None)
        try:
            with progress:
                for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
                    for kind, order, seq, header in zip(batch["kind"], batch["order"], batch["seq"], batch["header"]):
                        state = states[int(order)]
                        if kind == HEADER:
                            state.header = json.loads(header)
                            progress.read(state.header)
                        else:
                            state.written.add(int(seq))
                            progress.wrote()
                        if state.complete() and state.scanned.file.key not in done:
                            if self.strict and state.header["problems"]:
                                location, reason = state.header["problems"][0]
                                raise CorpusError(f"{location}: {reason}")
                            done[state.scanned.file.key] = state.header
                            self.ledger.record(state.scanned.file.key, state.header)
                            progress.done()
                    self.ledger.checkpoint()
        except (CorpusError, IndexUnusableError):
            raise
        except Exception as error:  # a worker's error, as Ray reports it after its own retries
            raise IndexUnusableError(
                f"the Ray pipeline failed ({_gist(error)}): fix the cause, then re-run `typedrag index --ray` "
                "(files written so far are kept)"
            ) from None
        finally:
            self.ledger.checkpoint(force=True)
        self.run.passages += progress.passages
        self.run.vectors += progress.vectors
        missing = [state.scanned.file.label for state in states.values() if state.scanned.file.key not in done]
        if missing:  # cannot happen unless Ray lost output without failing; refuse rather than publish a hole
            raise IndexUnusableError(f"the Ray pipeline ended without writing {missing[0]} (and {len(missing) - 1} more): re-run it")
        return done

    def _duplicate_owners(self) -> dict[str, str]:
        """{document id: the file that keeps it} for every id given by more than one file: the first in the
        listing among the files of this build, or a file a sync keeps."""
        headers = {**self.resumed_headers, **self.headers}
        owners: dict[str, str] = {}
        duplicated: set[str] = set()
        for key in sorted(headers, key=self.order.__getitem__):
            for doc_id in headers[key]["doc_ids"]:
                if doc_id in owners:
                    duplicated.add(doc_id)
                else:
                    owners[doc_id] = key
        winners = {doc_id: owners[doc_id] for doc_id in duplicated}
        if self.work.unchanged:  # a sync: ids held by the files it keeps win over any file read
            kept = {record.key for record in self.work.unchanged}
            ids = list(owners)
            with self.conn.errors("checking document ids"):
                for start in range(0, len(ids), DELETE_CHUNK):
                    listed = json.dumps(ids[start : start + DELETE_CHUNK], ensure_ascii=False)
                    rows = self.conn.client.query(self.target, filter=f"doc_id in {listed} and position == 0",
                                                  output_fields=["doc_id", "file"], timeout=CALL_TIMEOUT)
                    for row in rows:
                        if row["file"] in kept:
                            winners[row["doc_id"]] = row["file"]
        return winners

    def _losers(self, winners: dict[str, str]) -> set[str]:
        headers = {**self.resumed_headers, **self.headers}
        return {key for key, header in headers.items() if any(winners.get(d, key) != key for d in header["doc_ids"])}

    # -- 3. finish: counts, old generations, manifest, alias

    def finish(self) -> None:
        summary, work = self.summary, self.work
        headers = {**self.resumed_headers, **self.headers}
        records: dict[str, FileRecord] = {}
        for scanned in sorted(work.to_read, key=lambda s: self.order[s.file.key]):
            header = headers[scanned.file.key]
            summary.problems.extend(_capped([CorpusProblem(*p) for p in header["problems"]], header["problems_dropped"]))
            summary.notes.extend(_capped(header["notes"], header["notes_dropped"]))
            records[scanned.file.key] = FileRecord.from_json(scanned.file.key, header["record"])
        records.update({record.key: record for record in work.unchanged})
        count(summary, work, records)
        if self.embedder is not None:  # the vectors of this run's files (not those a resumed run or the last sync made)
            summary.embedded = sum(header["rows"] for header in self.headers.values())
            summary.embed_seconds = self.pipeline_seconds  # embedding overlaps reading and writing on a cluster
        hint = "start the server or check --uri, then re-run `typedrag index --ray`"
        with telemetry.step("ingest.publish", documents=summary.documents, passages=summary.passages):
            if summary.documents == 0:
                if self.fresh:
                    with self.conn.errors("dropping the empty build", hint):
                        self.conn.client.drop_collection(self.target, timeout=CALL_TIMEOUT)
                else:
                    self._delete_rows([s.file.key for s in work.to_read], self.generation)
                    self.ledger.drop()
                raise empty_index_error(summary, f"the collection {self.collection!r}" if self.live else None)
            with self.conn.errors("finishing the index", hint):
                if not self.fresh:  # new files too: an interrupted single-process sync may have left rows of them
                    replaced = work.to_delete + [scanned.file.key for scanned in work.added]
                    self._delete_rows(replaced, self.generation, other_generations=True)
                self.conn.client.flush(self.target, timeout=CALL_TIMEOUT)
                _write_manifest(self.conn, self.target, self.sources, records, summary, self.passage_words, self.want,
                                self.generation, self.filters)
                self.ledger.drop()
                if self.fresh:
                    self.conn.client.drop_collection_properties(self.target, property_keys=[BUILD_MARK], timeout=CALL_TIMEOUT)
            if self.fresh:
                _publish(self.conn, self.target, self.collection, self.live, hint)


def _configured(cls: type, **settings: Any) -> type:
    """`cls` with its settings as class attributes: Ray ships the class with the actor's definition instead of
    keeping constructor arguments in the object store, which a restarted actor could find gone."""
    return type(cls.__name__, (cls,), {"settings": settings})


def _capped(items: list, dropped: int) -> CappedList:
    capped = CappedList(items)
    capped.dropped += dropped
    return capped


def _gist(error: BaseException) -> str:
    """The last line of a Ray error that says what went wrong (Ray wraps the worker's traceback)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return (lines[-1] if lines else type(error).__name__)[:300]


class _Ledger:
    """The files done so far in one generation of one collection, kept as collection properties beside the
    rows: `typedrag.ray.<generation>.<n>`, each a gzipped JSON delta ({"planned": [keys]} or {"done": {key:
    header}}), written by the driver only. Entries of other generations are stale and dropped."""

    def __init__(self, conn: _Connection, collection: str, generation: int) -> None:
        self.conn, self.collection, self.generation = conn, collection, generation
        self.done: dict[str, dict] = {}
        self.planned: set[str] = set()
        self.pending: dict[str, dict] = {}
        self.last = time.monotonic()
        with conn.errors("reading the resume ledger"):
            properties = conn.client.describe_collection(collection, timeout=CALL_TIMEOUT).get("properties") or {}
        prefix = f"{LEDGER_PREFIX}{generation}."
        stale = [name for name in properties if name.startswith(LEDGER_PREFIX) and name != BUILD_MARK and not name.startswith(prefix)]
        mine = sorted((name for name in properties if name.startswith(prefix)), key=lambda name: int(name.rsplit(".", 1)[1]))
        for name in mine:
            delta = _unpack(properties[name])
            self.planned.update(delta.get("planned", []))
            self.done.update(delta.get("done", {}))
        self.next = int(mine[-1].rsplit(".", 1)[1]) + 1 if mine else 0
        self.names = mine
        if stale:
            with conn.errors("dropping a stale resume ledger"):
                conn.client.drop_collection_properties(collection, property_keys=stale, timeout=CALL_TIMEOUT)

    def plan(self, keys: Iterable[str]) -> None:
        keys = sorted(set(keys) - self.planned)
        if keys:
            self._write({"planned": keys})
            self.planned.update(keys)

    def record(self, key: str, header: dict) -> None:
        self.pending[key] = header

    def checkpoint(self, force: bool = False) -> None:
        if self.pending and (force or time.monotonic() - self.last >= CHECKPOINT_SECONDS):
            self._write({"done": self.pending})
            self.done.update(self.pending)
            self.pending = {}
            self.last = time.monotonic()

    def _write(self, delta: dict) -> None:
        name = f"{LEDGER_PREFIX}{self.generation}.{self.next}"
        with self.conn.errors("recording progress", "start the server, then re-run `typedrag index --ray` to resume"):
            self.conn.client.alter_collection_properties(self.collection, properties={name: _pack(delta)}, timeout=CALL_TIMEOUT)
        self.names.append(name)
        self.next += 1

    def drop(self) -> None:
        if self.names:
            self.conn.client.drop_collection_properties(self.collection, property_keys=self.names, timeout=CALL_TIMEOUT)
            self.names = []


def _pack(value: Any) -> str:
    return base64.b64encode(gzip.compress(json.dumps(value, separators=(",", ":")).encode(), mtime=0)).decode()


def _unpack(packed: str) -> dict:
    try:
        value = json.loads(gzip.decompress(base64.b64decode(packed)))
    except (ValueError, OSError, EOFError):
        return {}
    return value if isinstance(value, dict) else {}


def _item(order: int, scanned: ScannedFile) -> dict:
    """A file to read, as a row of plain values (a worker rebuilds the ScannedFile)."""
    file = scanned.file
    return {"order": order, "path": str(file.path), "key": file.key, "label": file.label,
            "root": str(file.root) if file.root is not None else "", "sha256": scanned.sha256, "size": scanned.size}


def _trace_carrier() -> dict[str, str]:
    """The current span's context for the workers (W3C traceparent), so their spans join the driver's trace."""
    if not telemetry.tracing():
        return {}
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


class _Progress:
    """Files read, passages, vectors, throughput and ETA on the driver's terminal (stderr)."""

    def __init__(self, show: bool, files: list[ScannedFile], dense: bool) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.total_bytes = sum(s.size for s in files) or 1
        self.files_read = self.bytes_read = self.rows_read = self.passages = self.vectors = 0
        self.dense = dense
        self.started = time.perf_counter()
        self.shown = time.monotonic()
        self.bar = Progress(
            TextColumn("ray"), BarColumn(), MofNCompleteColumn(),
            TextColumn("files done · {task.fields[line]}"), TimeElapsedColumn(),
            console=Console(stderr=True), disable=not show,
        )
        self.task = self.bar.add_task("ray", total=len(files), line="")

    def read(self, header: dict) -> None:
        self.files_read += 1
        self.bytes_read += header["record"]["size"]
        self.rows_read += header["rows"]

    def wrote(self) -> None:
        self.passages += 1
        self.vectors += self.dense

    def done(self) -> None:
        self.bar.advance(self.task)
        now = time.monotonic()
        if now - self.shown >= 0.5:
            self.shown = now
            self.bar.update(self.task, line=self.line())

    def line(self) -> str:
        elapsed = max(time.perf_counter() - self.started, 1e-6)
        rate = self.passages / elapsed
        expected = self.rows_read * self.total_bytes / self.bytes_read if self.bytes_read else 0
        eta = (expected - self.passages) / rate if rate > 0 and expected > self.passages else 0.0
        vectors = f", {self.vectors:,} vectors" if self.dense else ""
        return f"{self.files_read:,} read, {self.passages:,} passages{vectors} written, {rate:,.1f}/s, ETA {eta:,.0f} s"

    def __enter__(self) -> "_Progress":
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.update(self.task, line=self.line())
        self.bar.__exit__(*exc)


# ---------------------------------------------------------------------------------------------- workers


class _WorkerSpans:
    """A worker's spans, in the driver's trace when the driver traces (the OTEL_* variables reach the workers
    through the job's runtime environment); sent at the end of each call, since a worker may be killed."""

    def __init__(self, carrier: dict[str, str]) -> None:
        self.context = None
        if carrier:
            telemetry.configure_from_environment()
            if telemetry.tracing():
                from opentelemetry import propagate

                self.context = propagate.extract(carrier)

    @contextmanager
    def span(self, name: str, **attributes: Any) -> Iterator[Any]:
        if self.context is None:
            with telemetry.step(name, **attributes) as span:
                yield span
            return
        from opentelemetry import context as otel_context

        token = otel_context.attach(self.context)
        try:
            with telemetry.step(name, **attributes) as span:
                yield span
        finally:
            otel_context.detach(token)

    def flush(self) -> None:
        if self.context is not None:
            from opentelemetry import trace

            flush = getattr(trace.get_tracer_provider(), "force_flush", None)
            if flush is not None:
                flush()


def _read_chunk(item: dict, *, passage_words: int, generation: int, taken: dict[str, str], carrier: dict[str, str]) -> Iterator[dict]:
    """Ray Data flat_map (a task): one file in, its passage rows out, then its header row."""
    scanned = _rebuild(item)
    spans = _WorkerSpans(carrier)
    with spans.span("ingest.read", file=scanned.file.key) as span:
        count = 0
        header: dict = {}
        for row in _file_rows(scanned, passage_words, generation, taken, _stemmer(), header):
            row.update(kind=PASSAGE, order=item["order"], seq=count, header="")
            count += 1
            yield row
        telemetry.describe(span, passages=count, documents=header["record"]["documents"])
    spans.flush()
    yield _header_row(item["order"], scanned.file.key, header | {"rows": count})


@functools.cache
def _stemmer():
    """tantivy's analyzer, built once per worker process (tasks reuse their process)."""
    return _index_analyzer()


def _rebuild(item: dict) -> ScannedFile:
    """The ScannedFile the driver listed, with this worker's own stamp of the file: device and inode numbers
    differ between the machines of a shared file system, so the driver's stamp cannot be checked here.
    If the content changed since the driver hashed it, what is read is recorded with no hash (`UNREAD`)."""
    file = SourceFile(Path(item["path"]), item["key"], item["label"], Path(item["root"]) if item["root"] else None)
    listed = ScannedFile(file, item["sha256"], item["size"])
    if file.is_demo:
        return listed
    try:
        here = _fingerprint(file)
    except Exception:  # gone or unreadable now: the read reports why
        return listed
    return here if here.sha256 == listed.sha256 else ScannedFile(file, listed.sha256, here.size, None)


def _file_rows(scanned: ScannedFile, passage_words: int, generation: int, taken: dict[str, str], stemmer,
               header: dict) -> Iterator[dict]:
    """The file's rows as `take_file` hands them out, streamed through a bounded queue (a worker never holds a
    big JSONL file's passages at once); `header` is filled in at the end."""
    key = scanned.file.key
    seen: set[str] = set()

    def claim(doc_id: str) -> bool:
        if taken.get(doc_id, key) != key or doc_id in seen:
            return False
        seen.add(doc_id)
        return True

    rows: queue.Queue = queue.Queue(maxsize=1024)
    end = object()
    summary = IndexSummary(index_dir="")

    def produce() -> None:
        try:
            result = _read_here(scanned, passage_words, False)
            record, _ = take_file(result, claim, lambda passage, file_key: rows.put(passage_row(passage, file_key, generation, stemmer)),
                                  summary, False)
            header.update(record=record.to_json() | {"key": record.key}, doc_ids=sorted(seen),
                          problems=[[p.location, p.reason] for p in summary.problems], problems_dropped=summary.problems.dropped,
                          notes=list(summary.notes), notes_dropped=summary.notes.dropped)
            rows.put(end)
        except BaseException as error:  # raised in the consumer, so Ray reports the task's failure
            rows.put(error)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    while (row := rows.get()) is not end:
        if isinstance(row, BaseException):
            raise row
        yield row
    thread.join()


def _header_row(order: int, key: str, header: dict) -> dict:
    row: dict[str, Any] = {name: "" for name in ROW_FIELDS}
    row.update(position=0, page=0, page_end=0, generation=0, file=key)
    row.update(kind=HEADER, order=order, seq=-1, header=json.dumps(header, ensure_ascii=False))
    return row


class _Embed:
    """Ray Data callable (one per actor, one model load each): a `dense` vector for every passage row, by the
    embedder the build names, exactly as a build in one process computes it (`milvus_index.passage_vectors`)."""

    settings: dict[str, Any] = {}

    def __init__(self) -> None:
        from typedrag.embed import embedder_for

        self.embedder = embedder_for(self.settings["embedder"])
        self.spans = _WorkerSpans(self.settings["carrier"])

    def __call__(self, batch: dict) -> dict:
        import numpy as np

        passages = batch["kind"] == PASSAGE
        with self.spans.span("ingest.embed", passages=int(passages.sum())):
            vectors = np.zeros((len(passages), self.embedder.dim), dtype=np.float32)
            if passages.any():
                vectors[passages] = passage_vectors(self.embedder, [str(title) for title in batch["title"][passages]],
                                                    [str(text) for text in batch["text"][passages]])
        self.spans.flush()
        batch["dense"] = vectors
        return batch


class _Write:
    """Ray Data callable (one Milvus connection per actor): upsert the passage rows, acknowledge every row."""

    settings: dict[str, Any] = {}

    def __init__(self) -> None:
        settings = self.settings
        self.conn = _Connection(settings["uri"], settings["token"])
        self.collection, self.dense = settings["collection"], settings["dense"]
        self.spans = _WorkerSpans(settings["carrier"])

    def __call__(self, batch: dict) -> dict:
        passages = batch["kind"] == PASSAGE
        columns = {name: batch[name][passages].tolist() for name in ROW_FIELDS}
        if self.dense:
            columns["dense"] = batch["dense"][passages].tolist()
        rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
        with self.spans.span("ingest.write", rows=len(rows)):
            if rows:
                with self.conn.errors("writing passages", "start the server, then re-run `typedrag index --ray` to resume"):
                    self.conn.client.upsert(self.collection, rows, timeout=CALL_TIMEOUT)
        self.spans.flush()
        return {"kind": batch["kind"], "order": batch["order"], "seq": batch["seq"], "header": batch["header"]}


def index_on_ray(settings, sources: list[str], *, address: str, passage_words: int, strict: bool, dense: bool,
                 rebuild: bool, remove_missing: bool, embedder: str | None = None,
                 report: Callable[[str], None] | None = None, filters: FileFilter | None = None) -> IndexSummary:
    """`typedrag index --ray`: the settings' Milvus collection, built or synced on the Ray cluster at `address`,
    with the retrieval the settings name (`--retrieval`) and `embedder`, as `build_configured_index` would."""
    from typedrag.config import ConfigError
    from typedrag.index.open import _milvus_token, _milvus_uri

    if settings.backend != "milvus":
        raise ConfigError("--ray writes to Milvus: add --backend milvus --uri URI (or set TYPEDRAG_BACKEND=milvus)")
    return sync_milvus_index_on_ray(
        sources, _milvus_uri(settings), settings.milvus_collection, address=address, token=_milvus_token(settings),
        passage_words=passage_words, strict=strict, dense=dense, rebuild=rebuild, remove_missing=remove_missing,
        retrieval=settings.search_mode, embedder=embedder, show_progress=sys.stderr.isatty(), report=report, filters=filters,
    )
