"""One build or sync on a Ray cluster, as the driver runs it (`typedrag.index.milvus.ray`): what to read, the
pipeline of Ray Data stages, the acknowledgements, the resume ledger, the progress shown, and the manifest written last."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field

from typedrag import telemetry
from typedrag.corpus.chunker import CHUNKER_VERSION
from typedrag.corpus.readers import FileFilter
from typedrag.errors import CorpusError
from typedrag.index.base import IndexUnusableError, empty_index_error
from typedrag.index.ingest import FileRecord, ScannedFile, count, filters_for, plan, scan_filtered
from typedrag.index.milvus.build import delete, live_manifest, publish, reusable_manifest, wanted, write_manifest
from typedrag.index.milvus.schema import (
    BUILD_INFIX,
    CALL_TIMEOUT,
    FORMAT_VERSION,
    Connection,
    index_params,
    schema,
)
from typedrag.index.milvus.ray_ledger import BUILD_MARK, Ledger, RayRun, RunProgress
from typedrag.index.milvus.ray_workers import EMBED_BATCH, HEADER, Embed, Write, configured, read_chunk
from typedrag.index.vectors import identity_of
from typedrag.records import CappedList, CorpusProblem, IndexSummary


DELETE_CHUNK = 100  # file keys per delete expression

MAX_READ_BLOCKS = 1000  # files are spread over at most this many read tasks' inputs


@dataclass
class FileState:
    """What the driver knows of one file being written: the passages acknowledged, and its header once seen."""

    scanned: ScannedFile
    order: int
    written: set[int] = field(default_factory=set)
    header: dict | None = None

    def complete(self) -> bool:
        return self.header is not None and len(self.written) == self.header["rows"]


class Job:
    """One `index --ray` run: plan, ingest on the cluster, then finish as `milvus.build` does."""

    def __init__(
        self,
        ray,
        conn: Connection,
        uri: str,
        token: str | None,
        collection: str,
        sources: list,
        summary: IndexSummary,
        run: RayRun,
        *,
        passage_words: int,
        strict: bool,
        show_progress: bool,
        batch_size: int,
        embed_actors: int | None,
        writers: int,
    ) -> None:
        self.ray, self.conn, self.uri, self.token, self.collection = ray, conn, uri, token, collection
        self.sources, self.summary, self.run = sources, summary, run
        self.passage_words, self.strict, self.show_progress = passage_words, strict, show_progress
        self.batch_size, self.writers = batch_size, writers
        self.embed_actors = embed_actors or max(1, run.cpus)
        self.headers: dict[str, dict] = {}  # file key -> its header (record, problems, notes, doc ids)
        self.resumed_headers: dict[str, dict] = {}  # from the ledger: files an interrupted run wrote

    # -- 1. what to do, and where

    def prepare(
        self,
        rebuild: bool,
        remove_missing: bool,
        retrieval: str | None,
        embedder: str | None,
        filters: FileFilter | None,
    ) -> None:
        conn, collection = self.conn, self.collection
        with telemetry.step("ingest.plan"):
            self.live = conn.alias_target(collection)
            self.want = wanted(conn, self.live, retrieval, embedder, self.summary)
            self.filters = filters_for(filters, live_manifest(conn, self.live) if self.live is not None else None)
            self.embedder = self.want.embedder  # the key of the vectors' model, None: no vectors
            previous = (
                None
                if rebuild or self.live is None
                else reusable_manifest(conn, self.live, self.passage_words, self.want)
            )
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
            self.ledger = Ledger(conn, self.target, self.generation)
            done = self.ledger.done
            to_read = self.work.to_read
            self.resumed_headers = {
                s.file.key: done[s.file.key]
                for s in to_read
                if s.file.key in done and done[s.file.key]["record"]["sha256"] == s.sha256
            }
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
                with conn.errors(
                    "deleting partial rows", "start the server or check --uri, then re-run `typedrag index --ray`"
                ):
                    delete(conn, self.target, f"generation == {self.generation}")
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
        with conn.errors(
            "creating the collection", "start the server or check --uri, then re-run `typedrag index --ray`"
        ):
            conn.client.create_collection(
                building,
                schema=schema(conn.pymilvus, self.embedder),
                index_params=index_params(conn.client, self.embedder),
                timeout=CALL_TIMEOUT,
            )
            conn.client.alter_collection_properties(building, properties={BUILD_MARK: mark}, timeout=CALL_TIMEOUT)
        return building

    def _build_params(self) -> dict:
        params = {
            "format_version": FORMAT_VERSION,
            "passage_words": self.passage_words,
            "chunker": CHUNKER_VERSION,
            "embedder": self.embedder,
        }
        if self.embedder is not None:
            params["vector_identity"] = identity_of(self.embedder)
        return params

    def _delete_rows(self, keys: list[str], generation: int, *, other_generations: bool = False) -> None:
        if not keys:
            return
        operator = "!=" if other_generations else "=="
        with self.conn.errors(
            "deleting partial rows", "start the server or check --uri, then re-run `typedrag index --ray`"
        ):
            for start in range(0, len(keys), DELETE_CHUNK):
                listed = json.dumps(keys[start : start + DELETE_CHUNK], ensure_ascii=False)
                delete(self.conn, self.target, f"file in {listed} and generation {operator} {generation}")

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
            again = sorted(
                {key for key in winners.values() if key in self.headers or key in self.resumed_headers}
                | self._losers(winners),
                key=self.order.__getitem__,
            )
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
        states = {self.order[s.file.key]: FileState(s, self.order[s.file.key]) for s in files}
        carrier = trace_carrier()
        items = [item_of(state.order, state.scanned) for state in states.values()]
        ds = ray.data.from_items(items, override_num_blocks=min(len(items), MAX_READ_BLOCKS))
        ds = ds.flat_map(
            read_chunk,
            fn_kwargs=dict(passage_words=self.passage_words, generation=self.generation, taken=taken, carrier=carrier),
            num_cpus=1,
        )
        if self.embedder is not None:
            embed = configured(Embed, embedder=self.embedder, carrier=carrier)
            ds = ds.map_batches(
                embed,
                batch_size=EMBED_BATCH,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(min_size=1, max_size=self.embed_actors),
                num_cpus=1,
            )
        writer = configured(
            Write,
            uri=self.uri,
            token=self.token,
            collection=self.target,
            dense=self.embedder is not None,
            carrier=carrier,
        )
        ds = ds.map_batches(
            writer,
            batch_size=self.batch_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=self.writers),
            num_cpus=0,
        )
        done: dict[str, dict] = {}
        progress = RunProgress(self.show_progress, files, self.embedder is not None)
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
                f"the Ray pipeline failed ({gist(error)}): fix the cause, then re-run `typedrag index --ray` "
                "(files written so far are kept)"
            ) from None
        finally:
            self.ledger.checkpoint(force=True)
        self.run.passages += progress.passages
        self.run.vectors += progress.vectors
        missing = [state.scanned.file.label for state in states.values() if state.scanned.file.key not in done]
        if missing:  # cannot happen unless Ray lost output without failing; refuse rather than publish a hole
            raise IndexUnusableError(
                f"the Ray pipeline ended without writing {missing[0]} (and {len(missing) - 1} more): re-run it"
            )
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
                    rows = self.conn.client.query(
                        self.target,
                        filter=f"doc_id in {listed} and position == 0",
                        output_fields=["doc_id", "file"],
                        timeout=CALL_TIMEOUT,
                    )
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
            summary.problems.extend(capped([CorpusProblem(*p) for p in header["problems"]], header["problems_dropped"]))
            summary.notes.extend(capped(header["notes"], header["notes_dropped"]))
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
                write_manifest(
                    self.conn,
                    self.target,
                    self.sources,
                    records,
                    summary,
                    self.passage_words,
                    self.want,
                    self.generation,
                    self.filters,
                )
                self.ledger.drop()
                if self.fresh:
                    self.conn.client.drop_collection_properties(
                        self.target, property_keys=[BUILD_MARK], timeout=CALL_TIMEOUT
                    )
            if self.fresh:
                publish(self.conn, self.target, self.collection, self.live, hint)


def capped(items: list, dropped: int) -> CappedList:
    capped = CappedList(items)
    capped.dropped += dropped
    return capped


def gist(error: BaseException) -> str:
    """The last line of a Ray error that says what went wrong (Ray wraps the worker's traceback)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return (lines[-1] if lines else type(error).__name__)[:300]


def item_of(order: int, scanned: ScannedFile) -> dict:
    """A file to read, as a row of plain values (a worker rebuilds the ScannedFile)."""
    file = scanned.file
    return {
        "order": order,
        "path": str(file.path),
        "key": file.key,
        "label": file.label,
        "root": str(file.root) if file.root is not None else "",
        "sha256": scanned.sha256,
        "size": scanned.size,
    }


def trace_carrier() -> dict[str, str]:
    """The current span's context for the workers (W3C traceparent), so their spans join the driver's trace."""
    if not telemetry.tracing():
        return {}
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier
