"""What the driver of `typedrag index --ray` keeps of a run: the resume ledger beside the data, the progress it shows,
and the summary of what the cluster did."""

from __future__ import annotations

import base64
import gzip
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from typedrag.index.ingest import ScannedFile
from typedrag.index.milvus.schema import CALL_TIMEOUT, RESUME_PREFIX, Connection


LEDGER_PREFIX = RESUME_PREFIX  # collection properties typedrag.ray.<generation>.<n>: the files done so far

BUILD_MARK = "typedrag.ray.build"  # on a fresh build's collection: its parameters, so a rerun can resume it

CHECKPOINT_SECONDS = 5.0  # how often the driver records the files done (and so how much a rerun reads again)


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
        text = (
            f"ray: {self.files_read:,} files read, {self.passages:,} passages, {self.vectors:,} vectors in "
            f"{self.seconds:.1f} s ({rate:,.1f} passages/s) on {self.nodes} nodes, {self.cpus} CPUs"
        )
        if self.resumed:
            text += f"; {self.resumed:,} files already written by an interrupted run, kept"
        if self.reread:
            text += f"; {self.reread:,} files read again for duplicate document ids"
        return text


class Ledger:
    """The files done so far in one generation of one collection, kept as collection properties beside the
    rows: `typedrag.ray.<generation>.<n>`, each a gzipped JSON delta ({"planned": [keys]} or {"done": {key:
    header}}), written by the driver only. Entries of other generations are stale and dropped."""

    def __init__(self, conn: Connection, collection: str, generation: int) -> None:
        self.conn, self.collection, self.generation = conn, collection, generation
        self.done: dict[str, dict] = {}
        self.planned: set[str] = set()
        self.pending: dict[str, dict] = {}
        self.last = time.monotonic()
        with conn.errors("reading the resume ledger"):
            properties = conn.client.describe_collection(collection, timeout=CALL_TIMEOUT).get("properties") or {}
        prefix = f"{LEDGER_PREFIX}{generation}."
        stale = [
            name
            for name in properties
            if name.startswith(LEDGER_PREFIX) and name != BUILD_MARK and not name.startswith(prefix)
        ]
        mine = sorted(
            (name for name in properties if name.startswith(prefix)), key=lambda name: int(name.rsplit(".", 1)[1])
        )
        for name in mine:
            delta = unpack(properties[name])
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
            self.conn.client.alter_collection_properties(
                self.collection, properties={name: pack(delta)}, timeout=CALL_TIMEOUT
            )
        self.names.append(name)
        self.next += 1

    def drop(self) -> None:
        if self.names:
            self.conn.client.drop_collection_properties(self.collection, property_keys=self.names, timeout=CALL_TIMEOUT)
            self.names = []


def pack(value: Any) -> str:
    return base64.b64encode(gzip.compress(json.dumps(value, separators=(",", ":")).encode(), mtime=0)).decode()


def unpack(packed: str) -> dict:
    try:
        value = json.loads(gzip.decompress(base64.b64decode(packed)))
    except (ValueError, OSError, EOFError):
        return {}
    return value if isinstance(value, dict) else {}


class RunProgress:
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
            TextColumn("ray"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("files done · {task.fields[line]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=not show,
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

    def __enter__(self) -> "RunProgress":
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.update(self.task, line=self.line())
        self.bar.__exit__(*exc)
