"""The work Ray's workers do for `typedrag index --ray` (`typedrag.index.milvus.ray`): read and chunk a file
(a task), embed passages (an actor), upsert rows (an actor), each in the driver's trace."""

from __future__ import annotations

import functools
import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from typedrag import telemetry
from typedrag.corpus.readers import SourceFile
from typedrag.index.ingest import ScannedFile, fingerprint, read_here, take_file
from typedrag.index.milvus.schema import CALL_TIMEOUT, LINES, Connection, index_analyzer, passage_row, passage_vectors
from typedrag.records import IndexSummary


EMBED_BATCH = 256  # passages per embedding call: large enough to keep an actor busy, small enough to stream

# The columns of every row of the pipeline: Milvus's row fields, then the pipeline's own.
ROW_FIELDS = (
    "row_id",
    "passage_id",
    "doc_id",
    "file",
    "title",
    "section",
    "text",
    "terms",
    "position",
    "page",
    "page_end",
    LINES,
    "generation",
)

PASSAGE, HEADER = "passage", "file"


class WorkerSpans:
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


def read_chunk(
    item: dict, *, passage_words: int, generation: int, taken: dict[str, str], carrier: dict[str, str]
) -> Iterator[dict]:
    """Ray Data flat_map (a task): one file in, its passage rows out, then its header row."""
    scanned = rebuild_scanned(item)
    spans = WorkerSpans(carrier)
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
    return index_analyzer()


def rebuild_scanned(item: dict) -> ScannedFile:
    """The ScannedFile the driver listed, with this worker's own stamp of the file: device and inode numbers
    differ between the machines of a shared file system, so the driver's stamp cannot be checked here.
    If the content changed since the driver hashed it, what is read is recorded with no hash (`UNREAD`)."""
    file = SourceFile(Path(item["path"]), item["key"], item["label"], Path(item["root"]) if item["root"] else None)
    listed = ScannedFile(file, item["sha256"], item["size"])
    if file.is_demo:
        return listed
    try:
        here = fingerprint(file)
    except Exception:  # gone or unreadable now: the read reports why
        return listed
    return here if here.sha256 == listed.sha256 else ScannedFile(file, listed.sha256, here.size, None)


def _file_rows(
    scanned: ScannedFile, passage_words: int, generation: int, taken: dict[str, str], stemmer, header: dict
) -> Iterator[dict]:
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
            result = read_here(scanned, passage_words, False)
            record, _ = take_file(
                result,
                claim,
                lambda passage, file_key: rows.put(passage_row(passage, file_key, generation, stemmer)),
                summary,
                False,
            )
            header.update(
                record=record.to_json() | {"key": record.key},
                doc_ids=sorted(seen),
                problems=[[p.location, p.reason] for p in summary.problems],
                problems_dropped=summary.problems.dropped,
                notes=list(summary.notes),
                notes_dropped=summary.notes.dropped,
            )
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


class Embed:
    """Ray Data callable (one per actor, one model load each): a `dense` vector for every passage row, by the
    embedder the build names, exactly as a build in one process computes it (`schema.passage_vectors`)."""

    settings: dict[str, Any] = {}

    def __init__(self) -> None:
        from typedrag.embed import embedder_for

        self.embedder = embedder_for(self.settings["embedder"])
        self.spans = WorkerSpans(self.settings["carrier"])

    def __call__(self, batch: dict) -> dict:
        import numpy as np

        passages = batch["kind"] == PASSAGE
        with self.spans.span("ingest.embed", passages=int(passages.sum())):
            vectors = np.zeros((len(passages), self.embedder.dim), dtype=np.float32)
            if passages.any():
                vectors[passages] = passage_vectors(
                    self.embedder,
                    [str(title) for title in batch["title"][passages]],
                    [str(text) for text in batch["text"][passages]],
                )
        self.spans.flush()
        batch["dense"] = vectors
        return batch


class Write:
    """Ray Data callable (one Milvus connection per actor): upsert the passage rows, acknowledge every row."""

    settings: dict[str, Any] = {}

    def __init__(self) -> None:
        settings = self.settings
        self.conn = Connection(settings["uri"], settings["token"])
        self.collection, self.dense = settings["collection"], settings["dense"]
        self.spans = WorkerSpans(settings["carrier"])

    def __call__(self, batch: dict) -> dict:
        passages = batch["kind"] == PASSAGE
        columns = {name: batch[name][passages].tolist() for name in ROW_FIELDS}
        if self.dense:
            columns["dense"] = batch["dense"][passages].tolist()
        rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
        with self.spans.span("ingest.write", rows=len(rows)):
            if rows:
                with self.conn.errors(
                    "writing passages", "start the server, then re-run `typedrag index --ray` to resume"
                ):
                    self.conn.client.upsert(self.collection, rows, timeout=CALL_TIMEOUT)
        self.spans.flush()
        return {"kind": batch["kind"], "order": batch["order"], "seq": batch["seq"], "header": batch["header"]}


def configured(cls: type, **settings: Any) -> type:
    """`cls` with its settings as class attributes: Ray ships the class with the actor's definition instead of
    keeping constructor arguments in the object store, which a restarted actor could find gone."""
    return type(cls.__name__, (cls,), {"settings": settings})
