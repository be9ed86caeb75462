"""The dense leg of the embedded index: one vector per passage, kept in the index folder beside tantivy's files.

Files (listed and checksummed in the manifest like tantivy's, so they are swapped in and out with it):
- `vectors.npy`: int8 rows, one per passage, each with its scale in `vector-scales.npy` (float32): a row
  times its scale is the passage's unit vector, to within 1/254 of its largest component;
- `vector-ids.npy` (int64 offsets) and `vector-ids.bin` (UTF-8): the passage id of each row.
The manifest's `vectors` section says which embedder made them and which rows each source file holds, so a
sync copies the rows of unchanged files and embeds only new text.

Embedding is the slow part of a build, so it is journaled: every batch of vectors is appended (and fsynced)
to `.NAME.vectors-journal` beside the index, keyed by a hash of the embedded text; a build or sync killed
part way reads the journal on its next run and embeds only what is missing. The journal is removed once
the index with its vectors is in place.

typedrag ships the vectors of text every user indexes the same way (the demo corpus, `demo:vital-articles`) in
`typedrag/index/shipped/`, in the journal's record format: a build takes a passage's vector from there when its
text and the embedder are the same, so the README's first command does not spend two minutes embedding.

Search (typedrag.index.nearest) scores the int8 rows where they lie with usearch's kernels: exact, or through an
HNSW graph for a large index (docs/lab/2026-12-02-hybrid.md and docs/lab/2026-12-06-sentence-vectors.md).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from typedrag.embed import PASSAGE_INPUT, embedder_for, embedder_identity, passage_input

VECTORS = "vectors.npy"
SCALES = "vector-scales.npy"
ID_OFFSETS = "vector-ids.npy"
ID_TEXT = "vector-ids.bin"
FILES = (VECTORS, SCALES, ID_OFFSETS, ID_TEXT)
EMBED_BATCH = 256  # passages per embedding call and per journal append
DIGEST_BYTES = 16
JOURNAL_MAGIC = b"typedrag vectors journal 1\n"


def identity_of(embedder_key: str) -> str:
    """What makes an index's vectors comparable with a query's: the model (its file's hash) and what of a passage it read."""
    return f"{embedder_identity(embedder_key)} input:{PASSAGE_INPUT}"


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 rows and one scale each: a pure function of each row (no corpus-wide calibration)."""
    scales = np.abs(vectors).max(axis=1) / 127
    scales[scales == 0] = 1.0
    rows = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    return rows, scales.astype(np.float32)


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()[:DIGEST_BYTES]


SHIPPED_DIR = Path(__file__).resolve().parent / "shipped"


def record_dtype(dim: int) -> np.dtype:
    """One journal record: the digest of the embedded text, its int8 row and the row's scale."""
    return np.dtype(
        [("digest", np.uint8, (DIGEST_BYTES,)), ("row", np.int8, (dim,)), ("scale", "<f4")]
    )  # not "S16": it drops trailing zero bytes


def journal_header(identity: str) -> bytes:
    return JOURNAL_MAGIC + identity.encode() + b"\n"


def read_records(body: bytes | memoryview, dim: int) -> dict[bytes, tuple[np.ndarray, np.float32]]:
    """The whole records of a journal's or a shipped file's body (after its header), by digest."""
    records = np.frombuffer(body, dtype=record_dtype(dim), count=len(body) // record_dtype(dim).itemsize)
    return {record["digest"].tobytes(): (record["row"], record["scale"]) for record in records}


def shipped_file(identity: str, digests: list[bytes], rows: np.ndarray, scales: np.ndarray) -> bytes:
    """The bytes of a file of shipped vectors (scripts/demo_vectors.py writes the demo's)."""
    records = np.zeros(len(digests), dtype=record_dtype(rows.shape[1]))
    records["digest"] = np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(-1, DIGEST_BYTES)
    records["row"], records["scale"] = rows, scales
    return journal_header(identity) + records.tobytes()


SHIPPED_DIGESTS = "digests.json"  # {file name: sha256 of its bytes}, beside the shipped files, written with them


class ShippedVectors(dict):
    """Shipped vectors by the digest of their text; `refused` names the files not taken (see `shipped_vectors`)."""

    refused: tuple[str, ...] = ()


@lru_cache(maxsize=4)
def shipped_vectors(identity: str, dim: int, folder: Path = SHIPPED_DIR) -> ShippedVectors:
    """The vectors typedrag ships for this embedder (`identity`), by the digest of their text: the files of `folder`
    whose header names it; another model's files are not read. A file is taken only when its sha256 is the one
    recorded for it in the folder's SHIPPED_DIGESTS: a damaged or tampered file would put its rows under every
    passage of a demo index; refused, its passages are embedded afresh, and `refused` says which it was."""
    header = journal_header(identity)
    known = ShippedVectors()
    refused = []
    try:
        recorded = json.loads((folder / SHIPPED_DIGESTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = {}
    for path in sorted(folder.glob("*.vectors")):
        data = path.read_bytes()
        if not data.startswith(header):
            continue
        if not isinstance(recorded, dict) or recorded.get(path.name) != hashlib.sha256(data).hexdigest():
            refused.append(path.name)
            continue
        known.update(read_records(memoryview(data)[len(header) :], dim))
    known.refused = tuple(refused)
    return known


def record_shipped(folder: Path, name: str, data: bytes) -> None:
    """Write a file of shipped vectors and record its sha256 in the folder's SHIPPED_DIGESTS."""
    path = folder / SHIPPED_DIGESTS
    recorded = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    (folder / name).write_bytes(data)
    recorded[name] = hashlib.sha256(data).hexdigest()
    path.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def journal_path(index_dir: Path) -> Path:
    return index_dir.parent / f".{index_dir.name}.vectors-journal"


class Journal:
    """Vectors embedded so far by a build that has not finished, keyed by the digest of the embedded text.

    Append-only records of (digest, int8 row, scale); a record cut short by a kill is dropped on reading.
    The header names the embedder: a journal written by another model is discarded, never mixed in.
    """

    def __init__(self, path: Path, identity: str, dim: int) -> None:
        self.path, self.dim = path, dim
        self.header = journal_header(identity)
        self.record = record_dtype(dim).itemsize
        self.known: dict[bytes, tuple[np.ndarray, np.float32]] = {}
        self._read()
        self._file = None

    def _read(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        if not data.startswith(self.header):
            self.path.unlink(missing_ok=True)  # another model's, or damaged at its start
            return
        body = memoryview(data)[len(self.header) :]
        whole = len(body) - len(body) % self.record
        self.known.update(read_records(body, self.dim))
        if whole != len(body):  # a torn last record: cut it off so appends line up again
            with open(self.path, "r+b") as f:
                f.truncate(len(self.header) + whole)

    def append(self, digests: list[bytes], rows: np.ndarray, scales: np.ndarray) -> None:
        if self._file is None:
            fresh = not self.path.exists()
            self._file = open(self.path, "ab")
            if fresh:
                self._file.write(self.header)
        self._file.write(b"".join(d + rows[i].tobytes() + scales[i : i + 1].tobytes() for i, d in enumerate(digests)))
        self._file.flush()
        os.fsync(self._file.fileno())
        for i, d in enumerate(digests):
            self.known[d] = (rows[i], scales[i])

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def remove(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


@dataclass
class Table:
    """The manifest's `vectors` section: which embedder, how many rows, and each source file's rows."""

    embedder: str
    identity: str
    dim: int
    rows: int
    files: dict[str, list[int]]  # file key -> [first row, count]
    input: str = PASSAGE_INPUT

    def to_json(self, folder: Path) -> dict:
        return {
            "embedder": self.embedder,
            "identity": self.identity,
            "dim": self.dim,
            "rows": self.rows,
            "input": self.input,
            "bytes": sum((folder / name).stat().st_size for name in FILES),
            "files": self.files,
        }

    @classmethod
    def from_json(cls, data: dict | None) -> "Table | None":
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                data["embedder"],
                data["identity"],
                int(data["dim"]),
                int(data["rows"]),
                dict(data["files"]),
                data.get("input", ""),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass
class PassageText:
    """What of a stored passage its vector is made from, and the id that row is kept under."""

    passage_id: str
    title: str
    text: str


class Writer:
    """Writes the vector files of a new index version, file by file, in the order the caller gives.

    `copy` takes a file's rows from the previous version; `embed` embeds a file's passages (those the
    journal holds, or typedrag ships, are not embedded again). `progress(done)` is called after every model batch
    embedded, and `progress(done, True)` for the passages taken from the journal or the shipped vectors.
    """

    def __init__(
        self, folder: Path, rows: int, embedder_key: str, journal_file: Path, progress: Callable[..., None]
    ) -> None:
        from numpy.lib.format import open_memmap

        self.embedder = embedder_for(embedder_key)
        self.folder = folder
        self.table = Table(embedder_key, identity_of(embedder_key), self.embedder.dim, rows, {}, PASSAGE_INPUT)
        self.journal = Journal(journal_file, self.table.identity, self.embedder.dim)
        self.shipped = shipped_vectors(self.table.identity, self.embedder.dim, SHIPPED_DIR)
        self.progress = progress
        for name in FILES:  # never write through a hard link into a file another version's readers map
            (folder / name).unlink(missing_ok=True)
        self.vectors = open_memmap(folder / VECTORS, mode="w+", dtype=np.int8, shape=(rows, self.embedder.dim))
        self.scales = open_memmap(folder / SCALES, mode="w+", dtype=np.float32, shape=(rows,))
        for name in (VECTORS, SCALES):
            reserve(folder / name)
        self.ids: list[bytes] = []
        self.pending: list[tuple[int, str]] = []  # (row, embedded text) waiting for a full batch
        self.embedded = 0  # passages embedded now (not copied, not from the journal)
        self.seconds = 0.0  # spent embedding

    def copy(self, key: str, previous: "DenseVectors", first: int, count: int) -> None:
        at = len(self.ids)
        self.vectors[at : at + count] = previous.rows[first : first + count]
        self.scales[at : at + count] = previous.scales[first : first + count]
        self.ids.extend(previous.id_bytes(i) for i in range(first, first + count))
        self.table.files[key] = [at, count]

    def embed(self, key: str, passages: Iterator[PassageText]) -> None:
        """Give the file's passages their rows; they are embedded in batches that run across files (a manual's
        pages hold a few passages each, and MiniLM is fastest on full batches)."""
        start = len(self.ids)
        for passage in passages:
            self.pending.append((len(self.ids), passage_input(passage.title, passage.text)))
            self.ids.append(passage.passage_id.encode())
            if len(self.pending) >= EMBED_BATCH:
                self._flush()
        self.table.files[key] = [start, len(self.ids) - start]

    def _flush(self) -> None:
        batch, self.pending = self.pending, []
        digests = [digest(text) for _, text in batch]
        known = self.journal.known
        for d in digests:
            if d not in known and d in self.shipped:
                known[d] = self.shipped[d]
        missing = [i for i, d in enumerate(digests) if d not in known]
        if missing:
            started = time.perf_counter()
            rows, scales = quantize(self.embedder.encode([batch[i][1] for i in missing], on_batch=self.progress))
            self.seconds += time.perf_counter() - started
            self.journal.append([digests[i] for i in missing], rows, scales)
            self.embedded += len(missing)
        for (row, _), d in zip(batch, digests):
            self.vectors[row], self.scales[row] = self.journal.known[d]
        if len(batch) > len(missing):  # those embedded were told batch by batch
            self.progress(len(batch) - len(missing), True)

    def finish(self) -> Table:
        """Embed what is pending and flush the files; the row count must be what the caller announced."""
        if self.pending:
            self._flush()
        if len(self.ids) != self.table.rows:
            raise RuntimeError(f"vector rows written {len(self.ids)} != passages {self.table.rows}")
        self.vectors.flush()
        self.scales.flush()
        del self.vectors, self.scales  # close the maps before the folder is swapped in
        offsets = np.zeros(len(self.ids) + 1, dtype=np.int64)
        np.cumsum([len(i) for i in self.ids], out=offsets[1:])
        np.save(self.folder / ID_OFFSETS, offsets)
        (self.folder / ID_TEXT).write_bytes(b"".join(self.ids))
        for name in FILES:
            with open(self.folder / name, "rb+") as f:
                os.fsync(f.fileno())
        self.journal.close()
        return self.table


def reserve(path: Path) -> None:
    """Give every byte of a memory-mapped file its place on disk now: numpy leaves the file sparse, and a write
    into a page the full disk cannot hold kills the process with SIGBUS; reserved, a full disk is an OSError
    (ENOSPC) here, before anything is written."""
    with open(path, "rb+") as f:
        size = os.fstat(f.fileno()).st_size
        if size:
            try:
                os.posix_fallocate(f.fileno(), 0, size)
            except OSError as error:
                if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise


class DenseVectors:
    """The vectors of one index version, opened read-only (memory-mapped); searched by typedrag.index.nearest
    (usearch's int8 kernels over the rows as they lie on disk, exact unless the index has an HNSW graph)."""

    def __init__(self, folder: Path, table: Table, search: dict | None = None) -> None:
        from typedrag.index.nearest import Nearest

        self.table = table
        self.rows = np.load(folder / VECTORS, mmap_mode="r")
        self.scales = np.load(folder / SCALES, mmap_mode="r")
        self._offsets = np.load(folder / ID_OFFSETS, mmap_mode="r")
        self._ids = np.memmap(folder / ID_TEXT, dtype=np.uint8, mode="r") if (folder / ID_TEXT).stat().st_size else b""
        if (
            self.rows.shape != (table.rows, table.dim)
            or len(self.scales) != table.rows
            or len(self._offsets) != table.rows + 1
        ):
            raise ValueError(f"vector files hold {self.rows.shape}, the manifest says ({table.rows}, {table.dim})")
        self.nearest = Nearest(folder, self.rows, self.scales, search)

    def id_bytes(self, row: int) -> bytes:
        return bytes(self._ids[int(self._offsets[row]) : int(self._offsets[row + 1])])

    def passage_id(self, row: int) -> str:
        return self.id_bytes(row).decode()

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """The `k` rows nearest each query vector (rows of `queries`), as (passage id, cosine), best first."""
        if self.table.rows == 0 or k <= 0:
            return [[] for _ in queries]
        results = []
        for query in np.asarray(queries, dtype=np.float32):
            rows, scores = self.nearest.search(query, k)
            results.append([(self.passage_id(int(row)), float(score)) for row, score in zip(rows, scores)])
        return results


def disk_bytes(folder: Path) -> int:
    return sum((folder / name).stat().st_size for name in FILES if (folder / name).exists())
