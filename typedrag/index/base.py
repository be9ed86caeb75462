"""The one retrieval interface every strategy uses.

Strategies only see `Retriever`; an embedded engine (tantivy, the default) or a
server-backed one (Qdrant, OpenSearch, ...) can sit behind it without touching them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from typedrag.errors import IndexUnusableError, UserError
from typedrag.records import IndexSummary, Passage, ScoredPassage

if TYPE_CHECKING:
    from typedrag.config import Settings
    from typedrag.corpus.readers import FileFilter

__all__ = [
    "Adapted",
    "Backend",
    "Description",
    "EmptyIndexError",
    "IndexBuildError",
    "IndexUnusableError",
    "Retriever",
    "SyncOptions",
    "adapt",
    "distinct",
]

# A passage holding little but what a passage ranked above it holds (one page built both as HTML and as
# Markdown, the same page again in an "all on one page" file, a section repeated in release notes) adds
# nothing to an answer and takes the place of one that would: when this share of its word 4-grams is in one
# passage ranked higher, it is set aside (docs/lab/2026-12-03-near-duplicates.md). One that holds more keeps its place.
DUPLICATE_SHARE = 0.8
DUPLICATE_ROOM = 10  # passages a step searches beyond its k for a model to read, so that k distinct ones remain
_SHINGLE_WORDS = 4
_WORD = re.compile(r"\w+")


class IndexBuildError(UserError, FileExistsError):
    """An index cannot be built where asked: the folder is not a typedrag index, is the current folder
    or a parent of it, is a mount point, or another build holds its lock."""


class EmptyIndexError(IndexBuildError):
    """The sources gave no readable document: no index is written, and an existing one is left as it was.
    `summary` holds what was skipped and why."""

    def __init__(self, message: str, summary: IndexSummary) -> None:
        super().__init__(message)
        self.summary = summary


def empty_index_error(summary: IndexSummary, kept: str | None) -> EmptyIndexError:
    """The error for sources with nothing readable: the reasons summed up, and what typedrag reads."""
    from typedrag.corpus.readers import SUPPORTED

    reasons = Counter(_gist(problem.reason) for problem in summary.problems).most_common(3)
    why = "; ".join(f"{count:,} × {reason}" for reason, count in reasons) or "no files found"
    if dropped := getattr(summary.problems, "dropped", 0):
        why += f"; and {dropped:,} more problems"
    left = f"; {kept} is left as it was" if kept else ""
    return EmptyIndexError(
        f"no readable document in the sources ({why}){left}; typedrag reads {', '.join(SUPPORTED)}", summary
    )


def _shingles(text: str) -> set[tuple[str, ...]]:
    """The text's runs of _SHINGLE_WORDS words, markup and case aside (a shorter text: its words as one run)."""
    words = _WORD.findall(text.casefold())
    return {tuple(words[i : i + _SHINGLE_WORDS]) for i in range(max(1, len(words) - _SHINGLE_WORDS + 1))}


def distinct(hits: Sequence[ScoredPassage], k: int | None = None) -> list[ScoredPassage]:
    """`hits` (best first) without each passage that one ranked above it holds almost whole (DUPLICATE_SHARE
    of its word runs), the first `k` of them (None: all)."""
    kept: list[ScoredPassage] = []
    seen: list[set[tuple[str, ...]]] = []
    for hit in hits:
        if k is not None and len(kept) >= k:
            break
        runs = _shingles(hit.passage.text)
        if any(len(runs & other) >= DUPLICATE_SHARE * len(runs) for other in seen):
            continue
        kept.append(hit)
        seen.append(runs)
    return kept


def _gist(reason: str) -> str:
    """A reason without its particulars, for counting alike ones ("unsupported file type (expected ...), skipped")."""
    return re.sub(r"\s*\([^()]*\)", "", reason).removesuffix(", skipped").strip()


@dataclass(frozen=True)
class Description:
    """What a retriever tells of the index behind it, for run records, metrics and notes: every member but
    the name is optional (None: it has no such thing)."""

    name: str  # the engine as traces show it
    index_dir: Path | None = None  # the folder of an index on disk
    manifest: dict | None = None  # the index's manifest (tantivy and Milvus keep one: counts, checksums, engine)
    notice: str | None = None  # what a user should know of how it is searched (an index without vectors)
    reloads: int | None = None  # times it reopened a version a sync swapped in (an index that does)


@runtime_checkable
class Retriever(Protocol):
    """Finds passages for a query. Synchronous and thread-safe: strategies call it from worker threads.

    Implement `name`, `search` and `search_many` to put any index behind typedrag (see ListRetriever).
    `describe`, `mentions` and `passage` are optional: subclass `Retriever` to inherit their defaults (or
    implement them); the pipeline gives a retriever that does neither the defaults of those it lacks (`adapt`).
    """

    name: str  # engine name shown in traces, e.g. "tantivy-bm25"

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        """Ranked passages for one query, best first."""
        ...

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        """Ranked passages for several queries (may run in parallel)."""
        ...

    def describe(self) -> Description:
        """What it tells of the index behind it (by default: its name alone)."""
        return Description(self.name)

    def mentions(self, word: str) -> bool | None:
        """Whether any passage holds `word`: offline, a question about a name no passage mentions is then
        abstained on at once (typedrag.abstain). None (the default): it cannot say, and nothing is abstained on."""
        return None

    def passage(self, passage_id: str) -> tuple[Passage, str, dict] | None:
        """One passage by its id, with the key of its source file and that file's manifest record (the library
        shows originals with it). None (the default): it has no such passage, or cannot look one up."""
        return None


class Adapted(Retriever):
    """A user's retriever that is not a whole `Retriever` (it implements `name`, `search`, `search_many` and maybe
    some of the optional members), with the defaults of the members it lacks: what `adapt` gives the pipeline.
    The one place a retriever is asked what it has, where it comes in, so that nothing downstream asks."""

    def __init__(self, inner) -> None:
        self.inner = inner
        for member in ("describe", "mentions", "passage"):  # its own, where it has them (a user's `mentions`)
            if callable(own := getattr(inner, member, None)):
                setattr(self, member, own)

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        return self.inner.search(query, k)

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        return self.inner.search_many(queries, k)


def adapt(retriever):
    """`retriever` as a whole `Retriever`: itself when it is one (typedrag's own, a subclass of `Retriever`, or a
    class implementing every member), else `Adapted` (None stays None)."""
    if retriever is None or isinstance(retriever, Retriever):
        return retriever
    return Adapted(retriever)


class Backend(Protocol):
    """An index engine typedrag builds and searches, one per value of the `backend` setting
    (`typedrag.index.open.BACKENDS`; docs/architecture.md, "Where a new backend goes")."""

    name: str  # the `backend` setting's value

    def open(self, settings: Settings) -> Retriever:
        """The retriever of the index the settings name; `IndexUnusableError` (naming the fix) if it cannot be used."""
        ...

    def sync(self, settings: Settings, sources: list[str], options: SyncOptions) -> IndexSummary:
        """Build, or bring in line with `sources`, the index the settings name."""
        ...


@dataclass(frozen=True)
class SyncOptions:
    """How a build or sync reads its sources, whichever the backend (`typedrag.index.open.build_configured_index`)."""

    passage_words: int
    strict: bool
    retrieval: str | None = None  # bm25, dense, hybrid; None: as the index has it (hybrid for a new one)
    embedder: str | None = None
    rebuild: bool = False
    remove_missing: bool = True
    show_progress: bool = True
    filters: FileFilter | None = None
