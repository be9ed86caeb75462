"""The data folder of `typedrag serve --data DIR`: any number of collections, each a typedrag index of the
documents uploaded to it, kept beside their originals.

    DIR/collections/<c>/collection.json   its settings (retrieval) and when it was made
    DIR/collections/<c>/documents.json    the documents uploaded: name, size, content hash, when
    DIR/collections/<c>/files/            the originals, by name: the source folder the index is synced from
    DIR/collections/<c>/index/            the tantivy index (swapped in whole by each sync)
    DIR/collections/<c>/incoming/         uploads while they stream in (removed if cut off)
    DIR/collections/<c>/status.json       what the last ingestion did: counts, problems per document

Ingestion is `typedrag index`'s own sync (the same readers, chunker, embedder, journal and problems), run in
the background, one collection at a time: answers keep coming from the index in place until the new version
is swapped in whole, and a server killed part way resumes at its next start (the files are the truth, the
index catches up; an embedding interrupted resumes from its journal). The engine, classifier and reranker
are built once and shared; each collection has its own retriever.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from typedrag.config import LibraryLimits
from typedrag.history import Turn
from typedrag.index.base import EmptyIndexError, IndexUnusableError
from typedrag.index.manifest import MANIFEST
from typedrag.index.progress import BuildCancelled, BuildWatch
from typedrag.corpus.readers import FileFilter
from typedrag.index.tantivy import TantivyRetriever, open_retriever, remove_index, sync_index
from typedrag.library.access import Action, Caller, may
from typedrag.library.uploads import Rejected, Staged, Staging
from typedrag.links import COLLECTIONS, DEFAULT_COLLECTION, FILES, INDEX, viewer_link
from typedrag.pipeline import Pipeline
from typedrag.records import CorpusProblem, Passage
from typedrag.result import AnswerResult, Source

try:
    import fcntl
except ImportError:  # Windows: two servers on one folder are not kept apart there
    fcntl = None

log = logging.getLogger("typedrag.library")

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
PASSAGE_WORDS = 100  # as `typedrag index` cuts them
INCOMING = "incoming"

# Each uploaded file was sent on purpose: all of them are read, "guide.html" and "guide.pdf" alike (the CLI reads one
# rendering of a document a folder holds, `FileFilter.all_formats`).
UPLOADED = FileFilter(all_formats=True)


class CollectionError(Exception):
    """A request about a collection that cannot be done; `status` is the HTTP status it maps to."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _write_json(path: Path, data: Any) -> None:
    """Written whole or not at all: a temporary file, fsynced, renamed over."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Collection:
    """One collection: its documents, its index and the pipeline that answers from it.

    A collection served from `--index DIR` is read-only (its documents come from `typedrag index`): it has no
    folder of its own, and its originals are read where the index was built from, when they are unchanged."""

    def __init__(self, name: str, index_dir: Path, folder: Path | None, limits: LibraryLimits) -> None:
        self.name, self.index_dir, self.folder, self.limits = name, index_dir, folder, limits
        self.read_only = folder is None
        self.files = folder / FILES if folder else None
        self.lock = threading.RLock()
        self.settings: dict[str, Any] = _read_json(folder / "collection.json", {}) if folder else {}
        self.registry: dict[str, dict[str, Any]] = _read_json(folder / "documents.json", {}) if folder else {}
        self.last: dict[str, Any] = _read_json(folder / "status.json", {}) if folder else {}
        self.retriever: Any = None
        self.pipeline: Pipeline | None = None
        self.watch: BuildWatch | None = None
        self.running: dict[str, str] = {}  # the documents (name: hash) the ingestion under way reads
        self.queued = False
        self.problem: str | None = None  # why the index cannot be opened, if it cannot

    @property
    def retrieval(self) -> str | None:
        return self.settings.get("retrieval")

    # --- the index -------------------------------------------------------------------------------

    def corpus(self) -> dict[str, Any]:
        """What the index's manifest says of its corpus ({} with no index, or one that cannot be read)."""
        if self.retriever is None:
            return {}
        try:
            return self.retriever.manifest.get("corpus", {})
        except (IndexUnusableError, AttributeError):
            return {}

    def manifest_files(self) -> dict[str, dict]:
        return self.corpus().get("files", {})

    def counts(self) -> dict[str, int]:
        if self.retriever is None:
            return {"documents": 0, "passages": 0}
        try:
            counts = self.retriever.manifest.get("counts", {})
        except (IndexUnusableError, AttributeError):
            return {"documents": 0, "passages": 0}
        return {"documents": counts.get("documents", 0), "passages": counts.get("passages", 0)}

    # --- what it holds ---------------------------------------------------------------------------

    def state(self) -> str:
        """empty (nothing to answer from), ingesting, queued, ready, or failed (the index cannot be opened)."""
        if self.watch is not None:
            return "ingesting"
        if self.queued:
            return "queued"
        if self.problem:
            return "failed"
        return "ready" if self.retriever is not None else "empty"

    def info(self) -> dict[str, Any]:
        """What the page and the API show of the collection."""
        watch = self.watch
        engine = None
        if self.retriever is not None:
            with contextlib.suppress(IndexUnusableError, AttributeError):
                engine = self.retriever.name
        return {
            "name": self.name,
            "read_only": self.read_only,
            "state": self.state(),
            "files": len(self.registry) if not self.read_only else len(self.manifest_files()),
            **self.counts(),
            "retriever": engine,
            "progress": watch.snapshot() if watch is not None else None,
            "last_ingestion": {k: v for k, v in self.last.items() if k not in ("problems", "synced")} or None,
            "problem": self.problem,
            "created": self.settings.get("created"),
        }

    def documents(self) -> list[dict[str, Any]]:
        """Every document with its status: indexed, failed (with its problems), indexing, queued, or removing
        (deleted, still answered from until the ingestion under way ends)."""
        if self.read_only:  # its files are those `typedrag index` was given: counted in info(), not listed
            return []
        held = self.manifest_files()
        problems = self.last.get("problems", {})
        synced = self.last.get("synced", {})
        listing = []
        with self.lock:
            registry = dict(self.registry)
        for name, record in sorted(registry.items()):
            indexed = held.get(name)
            if indexed is not None and indexed.get("sha256") == record["sha256"]:
                status = "indexed" if indexed.get("documents") else "failed"
            elif self.running.get(name) == record["sha256"]:
                status = "indexing"
            elif synced.get(name) == record["sha256"]:
                status = "failed"
            else:
                status = "queued"
            listing.append(
                {
                    "name": name,
                    "size": record["size"],
                    "uploaded": record.get("uploaded"),
                    "status": status,
                    "passages": indexed.get("passages", 0) if status == "indexed" and indexed else 0,
                    "problems": problems.get(name, []) if status == "failed" else [],
                    "link": f"/view/{_quoted(self.name)}?document={_quoted(name)}",
                }
            )
        for name in sorted(set(held) - set(registry)):
            listing.append(
                {
                    "name": name,
                    "size": held[name].get("size"),
                    "uploaded": None,
                    "status": "removing",
                    "passages": held[name].get("passages", 0),
                    "problems": [],
                    "link": None,
                }
            )
        return listing

    # --- documents in and out --------------------------------------------------------------------

    def staging(self) -> Staging:
        if self.read_only:
            raise CollectionError(
                409,
                f"collection {self.name!r} is the index given with --index: read-only; "
                "`typedrag index` changes its documents",
            )
        return Staging(self.folder / INCOMING, self.limits)

    def add(self, staged: list[Staged]) -> tuple[list[dict[str, Any]], list[Rejected]]:
        """Move files received whole into the collection (replacing any of the same name), within the
        collection's limits; each one refused says why."""
        accepted, rejected = [], []
        with self.lock:
            for file in staged:
                replacing = self.registry.get(file.name)
                files = len(self.registry) + (0 if replacing else 1)
                size = (
                    sum(r["size"] for r in self.registry.values()) - (replacing["size"] if replacing else 0) + file.size
                )
                if files > self.limits.max_collection_files:
                    rejected.append(
                        Rejected(
                            file.name, f"the collection holds its limit of {self.limits.max_collection_files:,} files"
                        )
                    )
                elif size > self.limits.max_collection_bytes:
                    rejected.append(
                        Rejected(
                            file.name,
                            f"the collection would pass its limit of {self.limits.max_collection_bytes >> 20:,} MB",
                        )
                    )
                else:
                    os.replace(file.path, self.files / file.name)
                    self.registry[file.name] = {"size": file.size, "sha256": file.sha256, "uploaded": _now()}
                    accepted.append(
                        {"name": file.name, "size": file.size, "sha256": file.sha256, "replaced": replacing is not None}
                    )
                    continue
                file.path.unlink(missing_ok=True)
            if accepted:
                _fsync_folder(self.files)
                self.save_registry()
        return accepted, rejected

    def remove(self, name: str) -> None:
        if self.read_only:
            raise CollectionError(409, f"collection {self.name!r} is read-only (served with --index)")
        with self.lock:
            if name not in self.registry:
                raise CollectionError(404, f"no document {name!r} in collection {self.name!r}")
            (self.files / name).unlink(missing_ok=True)
            del self.registry[name]
            self.save_registry()

    def save_registry(self) -> None:
        _write_json(self.folder / "documents.json", self.registry)

    def recover(self) -> None:
        """After a start: uploads cut off by a crash removed, and the list of documents made to agree with the
        files kept (a crash between moving a file in and writing the list)."""
        for leftover in (self.folder / INCOMING).glob("upload-*"):
            pid = leftover.name.split("-")[1]
            if not (pid.isdigit() and _running(int(pid))) or int(pid) == os.getpid():
                leftover.unlink(missing_ok=True)
        with self.lock:
            present = {p.name: p for p in self.files.iterdir() if p.is_file() and not p.name.startswith(".")}
            changed = False
            for name in set(self.registry) - set(present):
                del self.registry[name]
                changed = True
            for name in set(present) - set(self.registry):
                path = present[name]
                self.registry[name] = {"size": path.stat().st_size, "sha256": _sha256(path), "uploaded": _now()}
                changed = True
            if changed:
                self.save_registry()

    def behind(self) -> bool:
        """Whether the index does not hold the documents as they are (a change not ingested yet)."""
        if self.read_only:
            return False
        held = self.manifest_files()
        synced = self.last.get("synced", {})
        with self.lock:
            registry = dict(self.registry)
        gone = set(held) - set(registry)
        changed = any(name in held and held[name].get("sha256") != r["sha256"] for name, r in registry.items())
        # new since the last ingestion (one that failed to read it, with this content, is not tried again on its own)
        new = any(name not in held and synced.get(name) != r["sha256"] for name, r in registry.items())
        return bool(gone) or changed or new

    # --- the originals ---------------------------------------------------------------------------

    def passage(self, passage_id: str) -> tuple[Passage, str, dict] | None:
        if self.retriever is None:
            return None
        return self.retriever.passage(passage_id)

    def original(self, key: str, indexed_sha256: str | None) -> tuple[Path | None, str | None]:
        """(the original file of document `key`, None) if it is the one indexed (`indexed_sha256`, None: any),
        else (None, why it cannot be shown)."""
        if not key or (self.files is not None and "/" in key) or ".." in key.split("/") or "\\" in key:
            return None, "the original is not kept"
        if self.files is not None:
            with self.lock:
                record = self.registry.get(key)
            if record is None:
                return None, "the document has been removed from the collection"
            if indexed_sha256 is not None and record["sha256"] != indexed_sha256:
                return None, "the document has been replaced since this passage was indexed"
            return self.files / key, None
        if indexed_sha256 is None:  # only what the index holds is shown of a folder the server does not own
            return None, "not a document of this collection"
        # A link leading out of the folder was read only when the index was built with --follow-links; what is
        # served must still be the file indexed (the hash below).
        followed = self.follows_links()
        for source in self.sources():
            path = source / key if source.is_dir() else (source if source.name == key else None)
            if path is None or not path.is_file():
                continue
            if not followed and not path.resolve().is_relative_to(source.resolve()):
                continue
            if indexed_sha256 is not None and _sha256(path) != indexed_sha256:
                return None, "the original has changed since it was indexed"
            return path, None
        return None, "the original is not where the index was built from"

    def follows_links(self) -> bool:
        """Whether the read-only collection's index was built reading links that lead out of its folders."""
        return FileFilter.from_json(self.corpus().get("filters")).follow_links

    def sources(self) -> list[Path]:
        """Where a read-only collection's index was built from (its manifest's sources)."""
        listed = self.corpus().get("sources", [])
        return [
            Path(s["source"])
            for s in listed
            if isinstance(s, dict) and isinstance(s.get("source"), str) and "files" in s
        ]


def _quoted(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


class Library:
    """The collections of a data folder (and the one `--index` names), their pipelines, and the background
    ingestion. `base` is a pipeline whose engine, classifier and reranker every collection shares (its
    retriever, if any, is the read-only default collection)."""

    def __init__(
        self,
        base: Pipeline,
        data: Path | None = None,
        *,
        default_index: Path | None = None,
        limits: LibraryLimits | None = None,
        retrieval: str | None = None,
        ingest: bool = True,
        read_only: bool = False,
    ) -> None:
        """`read_only`: only read the folder's collections as they are (`typedrag mcp --data DIR`, beside a running
        server): no lock on the folder, nothing recovered, written or ingested."""
        self.base, self.data, self.limits, self.retrieval = base, data, limits or LibraryLimits(), retrieval
        self.read_only = read_only
        self._collections: dict[str, Collection] = {}
        self._lock = threading.RLock()
        self._pending: dict[str, None] = {}  # collections to ingest, in order
        self._running: Collection | None = None
        self._wake = threading.Condition(self._lock)
        self._stopped = False
        self._data_lock = None
        self.passage_words = PASSAGE_WORDS
        if base.retriever is not None:
            default = Collection(DEFAULT_COLLECTION, Path(default_index or ""), None, self.limits)
            default.retriever = base.retriever
            default.pipeline = self._pipeline(base.retriever, DEFAULT_COLLECTION, like=base)
            self._collections[DEFAULT_COLLECTION] = default
        if data is not None:
            self._open(data)
        self._thread: threading.Thread | None = None
        if ingest and data is not None and not read_only:
            self._thread = threading.Thread(target=self._ingest_forever, name="typedrag-ingest", daemon=True)
            self._thread.start()

    # --- opening ---------------------------------------------------------------------------------

    def _open(self, data: Path) -> None:
        if self.read_only:
            self._open_to_read(data)
            return
        (data / COLLECTIONS).mkdir(parents=True, exist_ok=True)
        if fcntl is not None:
            self._data_lock = open(data / ".typedrag-data.lock", "a+b")
            try:
                fcntl.flock(self._data_lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._data_lock.close()
                raise CollectionError(
                    409, f"another typedrag server is serving {data}; one server per data folder"
                ) from None
        shutil.rmtree(data / ".trash", ignore_errors=True)  # collections deleted just before a crash
        for folder in sorted((data / COLLECTIONS).iterdir()):
            if (
                not folder.is_dir()
                or folder.is_symlink()
                or not NAME.fullmatch(folder.name)
                or folder.name in self._collections
            ):
                continue
            collection = Collection(folder.name, folder / INDEX, folder, self.limits)
            (folder / FILES).mkdir(exist_ok=True)
            (folder / INCOMING).mkdir(exist_ok=True)
            collection.recover()
            self._reopen(collection)
            self._collections[folder.name] = collection
            if collection.behind():
                log.info("collection behind its documents: ingesting", extra={"fields": {"collection": folder.name}})
                self._schedule(collection)

    def _open_to_read(self, data: Path) -> None:
        if not (data / COLLECTIONS).is_dir():
            raise CollectionError(404, f"no collections in {data}: give the --data DIR of `typedrag serve`")
        for folder in sorted((data / COLLECTIONS).iterdir()):
            if (
                folder.is_dir()
                and not folder.is_symlink()
                and NAME.fullmatch(folder.name)
                and folder.name not in self._collections
            ):
                collection = Collection(folder.name, folder / INDEX, folder, self.limits)
                self._reopen(collection)
                self._collections[folder.name] = collection

    def close(self) -> None:
        """Stop the ingestion (what it did is kept: the next start resumes it) and release the data folder."""
        with self._lock:
            self._stopped = True
            if self._running is not None and self._running.watch is not None:
                self._running.watch.cancel()
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(60)
        if self._data_lock is not None:
            self._data_lock.close()

    # --- collections -----------------------------------------------------------------------------

    def names(self, caller: Caller = Caller()) -> list[str]:
        with self._lock:
            return [name for name in sorted(self._collections) if may(caller, name, "read")]

    def get(self, name: str | None, caller: Caller = Caller(), action: Action = "read") -> Collection:
        """The collection named (None: the default one), if `caller` may `action` it; else `CollectionError`."""
        with self._lock:
            if name is None:
                name = self.default_name(caller)
            collection = self._collections.get(name)
            if collection is None or not (caller.authenticated or may(caller, name, "read")):
                known = ", ".join(self.names(caller)) or "none yet"
                raise CollectionError(404, f"no collection {name!r}; collections: {known}")
            # A signed-in user without a grant is told so (403: who may read what is an admin's decision, not a
            # secret); someone who said nothing of who they are learns nothing of what exists (404).
            if not may(caller, name, "read"):
                raise CollectionError(403, f"not allowed to read collection {name!r}: ask an admin for a grant")
            if not may(caller, name, action):
                raise CollectionError(403, f"not allowed to {action} collection {name!r}")
            return collection

    def default_name(self, caller: Caller = Caller()) -> str:
        """The collection a question that names none is asked in: the `--index` one, else the only one; of those
        `caller` may read (a user's error names only the collections they may read)."""
        readable = self.names(caller)
        if DEFAULT_COLLECTION in readable:
            return DEFAULT_COLLECTION
        if len(readable) == 1:
            return readable[0]
        known = ", ".join(readable) or "none yet: create one"
        if not readable and self._collections and not may(caller, None, "write"):
            known = "none you may read: ask an admin for a grant"
        raise CollectionError(422, f"name the collection to ask in (`collection`); collections: {known}")

    def create(self, name: str, caller: Caller = Caller(), retrieval: str | None = None) -> Collection:
        if self.data is None:
            raise CollectionError(409, "this server keeps no collections: start it with --data DIR")
        if not may(caller, None, "write"):
            raise CollectionError(
                403, "not allowed to create collections: collections are created and deleted by admins"
            )
        if not NAME.fullmatch(name or ""):
            raise CollectionError(
                422, "a collection name is 1-64 lower-case letters, digits, '-' or '_', starting with a letter or digit"
            )
        if retrieval not in (None, "bm25", "dense", "hybrid"):
            raise CollectionError(422, "retrieval is bm25, dense or hybrid")
        with self._lock:
            if name in self._collections:
                raise CollectionError(409, f"collection {name!r} exists already")
            if len([c for c in self._collections.values() if not c.read_only]) >= self.limits.max_collections:
                raise CollectionError(409, f"the server holds its limit of {self.limits.max_collections} collections")
            folder = self.data / COLLECTIONS / name
            (folder / FILES).mkdir(parents=True)
            (folder / INCOMING).mkdir()
            settings = {"name": name, "created": _now(), "retrieval": retrieval or self.retrieval}
            _write_json(folder / "collection.json", settings)
            collection = Collection(name, folder / INDEX, folder, self.limits)
            self._collections[name] = collection
        log.info("collection created", extra={"fields": {"collection": name}})
        return collection

    def delete(self, name: str, caller: Caller = Caller()) -> None:
        """Delete a collection and everything it holds (an ingestion under way is stopped first)."""
        with self._lock:
            collection = self.get(name, caller, "write")
            if not may(caller, None, "write"):
                raise CollectionError(
                    403, f"not allowed to delete collection {name!r}: collections are created and deleted by admins"
                )
            if collection.read_only:
                raise CollectionError(
                    409, f"collection {name!r} is the index given with --index; it is not deleted from here"
                )
            del self._collections[name]
            self._pending.pop(name, None)
            if collection.watch is not None:
                collection.watch.cancel()
            while self._running is collection:
                self._wake.wait(1)
        trash = self.data / ".trash"
        trash.mkdir(exist_ok=True)
        moved = trash / f"{name}-{secrets.token_hex(4)}"
        collection.folder.rename(moved)
        shutil.rmtree(moved, ignore_errors=True)
        log.info("collection deleted", extra={"fields": {"collection": name}})

    def retrievers(self) -> list[Any]:
        """Every collection's open retriever (the metrics count their reloads)."""
        with self._lock:
            return [c.retriever for c in self._collections.values() if c.retriever is not None]

    def infos(self, caller: Caller = Caller()) -> list[dict[str, Any]]:
        with self._lock:
            chosen = [self._collections[n] for n in self.names(caller)]
        return [c.info() for c in chosen]

    # --- documents -------------------------------------------------------------------------------

    def add(self, collection: Collection, staged: list[Staged]) -> tuple[list[dict[str, Any]], list[Rejected]]:
        accepted, rejected = collection.add(staged)
        if accepted:
            self._schedule(collection)
        return accepted, rejected

    def remove(self, collection: Collection, name: str) -> None:
        collection.remove(name)
        self._schedule(collection)

    # --- asking ----------------------------------------------------------------------------------

    def pipeline(self, name: str | None, caller: Caller = Caller()) -> Pipeline:
        """The pipeline answering in collection `name` (None: the default one)."""
        collection = self.get(name, caller, "read")
        if collection.pipeline is None:
            why = collection.problem or "it has no indexed documents yet" + (
                " (its first ingestion is under way)"
                if collection.state() in ("ingesting", "queued")
                else "; upload some"
            )
            raise CollectionError(409, f"collection {collection.name!r} cannot answer: {why}")
        return collection.pipeline

    def search(self, name: str | None, query: str, k: int = 10, caller: Caller = Caller()) -> list[Source]:
        """The passages collection `name` finds for `query`, best first, numbered, each with its link."""
        pipeline = self.pipeline(name, caller)
        hits = pipeline.retriever.search(query, k)
        collection = pipeline.settings.collection
        return [
            Source.of(i, hit).model_copy(update={"link": viewer_link(collection, hit.passage.passage_id)})
            for i, hit in enumerate(hits, 1)
        ]

    async def answer(
        self,
        name: str | None,
        question: str,
        method: str = "typed",
        forced_type: str | None = None,
        history: list[Turn] | None = None,
        caller: Caller = Caller(),
        on_event: Callable | None = None,
    ) -> AnswerResult:
        """The answer in collection `name`, with its trace (the HTTP routes and an MCP server both use this)."""
        return await self.pipeline(name, caller).answer(
            question, method, forced_type, on_event=on_event, history=history
        )

    # --- ingestion -------------------------------------------------------------------------------

    def _pipeline(self, retriever: Any, name: str, like: Pipeline | None = None) -> Pipeline:
        base = self.base
        if like is not None:  # the pipeline given (a test's, or --index's): kept as it is, its sources linked
            pipeline = copy.copy(like)
            pipeline.settings = dataclasses.replace(like.settings, collection=name)
            return pipeline
        return Pipeline(
            base.engine,
            retriever,
            base.classifier,
            base.reranker,
            dataclasses.replace(base.settings, collection=name),
            routes=base.routes,
            fallback=base.fallback,
        )

    def _reopen(self, collection: Collection) -> None:
        """Open the collection's index if it has one and none is open (an open one reloads by itself); forget it
        if it is gone."""
        if not (collection.index_dir / MANIFEST).is_file():
            collection.retriever = collection.pipeline = None
            collection.problem = None
            return
        if collection.retriever is None:
            try:
                retriever: TantivyRetriever = open_retriever(collection.index_dir)
            except IndexUnusableError as error:
                collection.problem = str(error)
                return
            collection.retriever = retriever
            collection.pipeline = self._pipeline(retriever, collection.name)
        collection.problem = None

    def _schedule(self, collection: Collection) -> None:
        with self._lock:
            collection.queued = True
            self._pending[collection.name] = None
            self._wake.notify_all()

    def _ingest_forever(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                name = next(iter(self._pending))
                del self._pending[name]
                collection = self._collections.get(name)
                if collection is None:
                    continue
                self._running = collection
                collection.queued = False
                collection.watch = BuildWatch()
            try:
                self.ingest(collection)
            except Exception:
                log.exception("ingestion failed", extra={"fields": {"collection": name}})
            finally:
                with self._lock:
                    collection.watch = None
                    collection.running = {}
                    self._running = None
                    self._wake.notify_all()

    def ingest(self, collection: Collection) -> None:
        """Bring the collection's index in line with its documents (run by the ingestion thread)."""
        watch = collection.watch or BuildWatch()
        with self._lock:  # called directly too (tests, tools): what is pending for it is done by this run
            self._pending.pop(collection.name, None)
            collection.queued = False
        with collection.lock:
            snapshot = {name: record["sha256"] for name, record in collection.registry.items()}
        collection.running = snapshot
        started, summary, error = time.monotonic(), None, None
        log.info("ingestion started", extra={"fields": {"collection": collection.name, "documents": len(snapshot)}})
        try:
            if not any(collection.files.iterdir()):
                remove_index(collection.index_dir)
            else:
                summary = sync_index(
                    [collection.files],
                    collection.index_dir,
                    passage_words=self.passage_words,
                    show_progress=False,
                    retrieval=collection.retrieval,
                    watch=watch,
                    filters=UPLOADED,
                )
        except BuildCancelled:
            log.info("ingestion stopped", extra={"fields": {"collection": collection.name}})
            return
        except EmptyIndexError as empty:  # no document of it is readable: none is answered from
            summary = empty.summary
            remove_index(collection.index_dir)
        except Exception as failure:  # the index in place is kept; the next change or start tries again
            error = " ".join(str(failure).split())[:300] or type(failure).__name__
            log.exception("ingestion failed", extra={"fields": {"collection": collection.name}})
        self._reopen(collection)
        last: dict[str, Any] = {"finished": _now(), "seconds": round(time.monotonic() - started, 2), "error": error}
        if summary is not None:
            last.update(
                added=summary.added,
                updated=summary.updated,
                removed=summary.removed,
                documents=summary.documents,
                passages=summary.passages,
                embedded=summary.embedded,
                retrieval=summary.retrieval,
            )
            last["problems"] = self._problems_by_document(collection, summary.problems)
            last["synced"] = snapshot
        elif error is None:
            last.update(documents=0, passages=0, problems={}, synced=snapshot)
        else:
            last.update(problems=collection.last.get("problems", {}), synced=collection.last.get("synced", {}))
        collection.last = last
        _write_json(collection.folder / "status.json", last)
        log.info(
            "ingestion done",
            extra={
                "fields": {
                    "collection": collection.name,
                    **{k: v for k, v in last.items() if k not in ("problems", "synced")},
                }
            },
        )

    @staticmethod
    def _problems_by_document(collection: Collection, problems: list[CorpusProblem]) -> dict[str, list[str]]:
        prefix = str(collection.files) + os.sep
        found: dict[str, list[str]] = {}
        for problem in problems:
            location = problem.location.removeprefix(prefix)
            name, _, line = location.partition(":")
            where = f"line {line}: " if line.isdigit() else ""
            found.setdefault(name, []).append(f"{where}{problem.reason}")
        return found

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no ingestion is pending or running (for tests and benchmarks); False if `timeout` passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._pending or self._running is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._wake.wait(left if left is not None else 1)
        return True
