"""The MiniLM vectors of every passage's sentences, kept with the index, so no answer embeds them again.

An offline answer reads every sentence of its top passages twice with MiniLM: the abstention check
(`typedrag.abstain.support`) and the reader (`typedrag.reader`); a typed answer's reranker reads each passage's head. Embedding them was 87% of an answer's time
(issue 56); the sentences of a passage are the same at every question, so a build embeds them once
(`passage_texts` says which texts: exactly those the answer path embeds) and the embedder takes them from here
(`typedrag.embed.remember`). The vectors are MiniLM's float32 output as it is, so answers are the same bit for
bit as when they were computed at the question.

Files, in the journal record format of the passage vectors (typedrag.index.vectors: the digest of the text, then
its row), each with a header naming the model:
- `sentence-vectors` in the index folder, written by a build or sync, listed in the manifest (its `sentences`
  section), records sorted by digest so a lookup is a binary search in the mapped file;
- `sentence-vectors.added`, appended by answering processes for a sentence the index does not hold (an index built
  before this file, or a build without vectors): under an exclusive lock, whole records, so several processes
  serving one index may add at once. An index folder that cannot be written still answers, computing them.
  The next build or sync takes them into `sentence-vectors`; the file goes with the folder it was added to.
- `.NAME.sentences-journal` beside the index while a build embeds them: a killed build resumes where it stopped.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from typedrag.abstain import judged_sentences, question_heading
from typedrag.citations import strip_reference_marks
from typedrag.embed import Embedder, embed_batch
from typedrag.index.manifest import ADDED_SENTENCES
from typedrag.index.vectors import DIGEST_BYTES, digest
from typedrag.reader import quoted_pieces
from typedrag.rerank import head_of

try:
    import fcntl
except ImportError:  # Windows: no flock, so answering processes add nothing (they compute what is missing)
    fcntl = None

SENTENCES = "sentence-vectors"
ADDED = ADDED_SENTENCES  # not listed in the manifest: appended to while the index is served
SENTENCES_VERSION = 1  # of the files' format and of `passage_texts`: change either, and bump it (builds embed again)
MAGIC = b"typedrag sentence vectors 1\n"
DIM = 384
# The reader's own bounds on a quotable piece (typedrag.engines.offline.settings.OfflineSettings's defaults):
# pieces outside other bounds are embedded at the question, as before.
MIN_WORDS, MAX_WORDS = 4, 70
APPEND_BATCH = 1024  # sentences embedded per journal append during a build
# Vectors answers added that a process holds in memory at most (1.5 KB each: ~300 MB); past it, nothing more is
# added (what is missing is computed at the question, as before), and a sync takes what was added into the index.
ADDED_MAX = 200_000


def header() -> bytes:
    return MAGIC + f"{Embedder.identity} float32:{DIM}\n".encode()


def record_dtype() -> np.dtype:
    """One record: the text's digest (as passage vectors key theirs) and MiniLM's float32 vector of it."""
    return np.dtype([("digest", np.uint8, (DIGEST_BYTES,)), ("row", "<f4", (DIM,))])


def passage_texts(title: str, section: str, text: str, lines) -> list[str]:
    """What answering embeds of one stored passage, as the answer path sees it (`typedrag.result.Source.of`
    strips citation marks): the sentences the relevance bar judges, its heading if it is a question, the pieces
    the reader reads, the title the reader reads beside them, and the head the reranker reads (of the passage as stored)."""
    head = head_of(title, text)
    title, section, text = (
        strip_reference_marks(title).strip(),
        strip_reference_marks(section).strip(),
        strip_reference_marks(text),
    )
    found = judged_sentences(text)
    heading = question_heading(section)
    if heading:
        found.append(heading)
    found.extend(piece for piece, _ in quoted_pieces(text, lines, MIN_WORDS, MAX_WORDS))
    found.extend((title, head))
    return list(dict.fromkeys(found))


def _records(body: bytes | memoryview | np.ndarray) -> np.ndarray:
    dtype = record_dtype()
    return np.frombuffer(body, dtype=dtype, count=len(body) // dtype.itemsize)


def _keys(records: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each digest as one sortable number."""
    return records["digest"][:, :8].copy().view(">u8").ravel()


def read_file(path: Path) -> np.ndarray:
    """The whole records of a file of sentence vectors (none when it is missing, another model's, or damaged)."""
    try:
        data = path.read_bytes()
    except OSError:
        return _records(b"")
    return _records(memoryview(data)[len(header()) :]) if data.startswith(header()) else _records(b"")


class SentenceStore:
    """The sentence vectors of one index version: the built file (mapped, sorted) and what was added since."""

    def __init__(self, folder: Path, built: bool) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._sorted = _records(b"")
        self._keys = np.zeros(0, dtype=">u8")
        if built:
            self._open_built()
        self._added: dict[bytes, np.ndarray] = {}
        self._added_read = 0  # bytes of the added file read so far
        self._writable = fcntl is not None
        self.hits = self.kept = 0

    def _open_built(self) -> None:
        path = self.folder / SENTENCES
        try:
            mapped = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size > len(header()) else None
        except (OSError, ValueError):
            return
        if mapped is None or bytes(mapped[: len(header())]) != header():
            return
        records = mapped[len(header()) :]
        self._sorted = records[: len(records) - len(records) % record_dtype().itemsize].view(record_dtype())
        self._keys = _keys(self._sorted)

    def __len__(self) -> int:
        return len(self._sorted) + len(self._added)

    @property
    def added(self) -> int:
        """Vectors held in memory: those answers added since the build (the built file is mapped, not held)."""
        return len(self._added)

    def lookup(self, texts: list[str]) -> dict[str, np.ndarray]:
        """The vectors this index keeps of `texts` (those it has)."""
        digests = [digest(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        if len(self._sorted):
            wanted = np.frombuffer(b"".join(d[:8] for d in digests), dtype=">u8")
            at = np.searchsorted(self._keys, wanted)
            for i, (text, d) in enumerate(zip(texts, digests)):
                j = int(at[i])
                while j < len(self._keys) and self._keys[j] == wanted[i]:
                    if self._sorted[j]["digest"].tobytes() == d:
                        found[text] = np.array(self._sorted[j]["row"], dtype=np.float32)
                        break
                    j += 1
        rest = [(t, d) for t, d in zip(texts, digests) if t not in found]
        if rest:
            with self._lock:
                self._read_added()
                for text, d in rest:
                    if d in self._added:
                        found[text] = self._added[d]
        self.hits += len(found)
        return found

    def _read_added(self) -> None:
        """Records other processes added since this one last read (whole records only)."""
        path = self.folder / ADDED
        try:
            size = path.stat().st_size
        except OSError:
            return
        if size <= self._added_read:
            return
        with open(path, "rb") as f:
            if self._added_read == 0:
                if f.read(len(header())) != header():
                    return
                self._added_read = len(header())
            f.seek(self._added_read)
            body = f.read(size - self._added_read)
        whole = len(body) - len(body) % record_dtype().itemsize
        for record in _records(body[:whole]):
            if len(self._added) >= ADDED_MAX:
                break
            self._added[record["digest"].tobytes()] = np.array(record["row"], dtype=np.float32)
        self._added_read += whole

    def keep(self, texts: list[str], vectors: np.ndarray) -> None:
        """Add the vectors of a passage's sentences the model just computed, for every process serving this
        index (nothing is written when the folder cannot be; the vectors are computed again next time)."""
        with self._lock:
            if len(self._added) + len(texts) > ADDED_MAX:
                return
            records = np.zeros(len(texts), dtype=record_dtype())
            records["digest"] = np.frombuffer(b"".join(digest(t) for t in texts), dtype=np.uint8).reshape(
                -1, DIGEST_BYTES
            )
            records["row"] = vectors
            for record in records:
                self._added[record["digest"].tobytes()] = np.array(record["row"])
            if not self._writable:
                return
            try:
                fd = os.open(self.folder / ADDED, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            except OSError:
                self._writable = False  # a read-only index: it answers all the same
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if os.fstat(fd).st_size == 0:
                    os.write(fd, header())
                elif os.fstat(fd).st_size % record_dtype().itemsize != len(header()) % record_dtype().itemsize:
                    return  # a record cut short by a crash or a full disk: add nothing after it, the next build takes it over
                os.write(fd, records.tobytes())
                self.kept += len(texts)
            except OSError:
                self._writable = False  # a full disk: keep answering
            finally:
                os.close(fd)


def write(
    building: Path,
    passages: Iterable[tuple[str, str, str, object]],
    known_from: list[Path],
    journal_file: Path,
    embedder: Embedder,
    progress: Callable[[int], Callable[[int], None]] = lambda total: lambda n: None,
) -> dict:
    """The sentence vectors of every passage (title, section, text, line kinds) into `building/SENTENCES`, sorted
    by digest: those of the files `known_from` (the previous version's, what answering added) and of the journal
    are taken as they are, the rest embedded (and journaled, so a killed build resumes). `progress(total)` gives
    the function told of each batch embedded. Returns the manifest's `sentences` section."""
    texts: dict[bytes, str] = {}
    for title, section, text, lines in passages:
        for piece in passage_texts(title, section, text, lines):
            texts.setdefault(digest(piece), piece)
    known: dict[bytes, np.ndarray] = {}
    for path in [*known_from, journal_file]:
        for record in read_file(path):
            d = record["digest"].tobytes()
            if d in texts:
                known[d] = record["row"]
    missing = [d for d in texts if d not in known]
    advance = progress(len(missing))
    if missing:
        with _journal(journal_file) as journal:
            for start in range(0, len(missing), APPEND_BATCH):
                chunk = missing[start : start + APPEND_BATCH]
                records = np.zeros(len(chunk), dtype=record_dtype())
                records["digest"] = np.frombuffer(b"".join(chunk), dtype=np.uint8).reshape(-1, DIGEST_BYTES)
                records["row"] = embedder.encode([texts[d] for d in chunk], embed_batch(), on_batch=advance)
                journal.write(records.tobytes())
                journal.flush()
                os.fsync(journal.fileno())
                known.update(zip(chunk, records["row"]))
    records = np.zeros(len(texts), dtype=record_dtype())
    if texts:
        records["digest"] = np.frombuffer(b"".join(texts), dtype=np.uint8).reshape(-1, DIGEST_BYTES)
        records["row"] = np.stack([known[d] for d in texts])
    records = records[np.argsort(_keys(records), kind="stable")]
    target = building / SENTENCES
    target.unlink(missing_ok=True)  # never write through a hard link into a file another version's readers map
    with open(target, "wb") as f:
        f.write(header())
        f.write(records.tobytes())
        f.flush()
        os.fsync(f.fileno())
    return {"version": SENTENCES_VERSION, "identity": Embedder.identity, "rows": len(texts), "embedded": len(missing)}


def _journal(path: Path):
    """The journal opened for appending: its whole records kept (a torn last one cut off), a journal of another
    model or format started again."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    if data.startswith(header()):
        whole = len(header()) + (len(data) - len(header())) // record_dtype().itemsize * record_dtype().itemsize
        if whole != len(data):
            with open(path, "r+b") as f:
                f.truncate(whole)
        return open(path, "ab")
    journal = open(path, "wb")
    journal.write(header())
    return journal


def journal_path(index_dir: Path) -> Path:
    return index_dir.parent / f".{index_dir.name}.sentences-journal"


def section_of(manifest: dict) -> dict | None:
    """The manifest's `sentences` section when its file is this typedrag's (same format, same model), else None."""
    section = manifest.get("sentences")
    if (
        isinstance(section, dict)
        and section.get("version") == SENTENCES_VERSION
        and section.get("identity") == Embedder.identity
    ):
        return section
    return None
