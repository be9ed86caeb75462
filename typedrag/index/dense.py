"""One retrieval configuration for every backend: BM25, dense, or both fused (hybrid, the default).

- `Wanted` is what a build writes: the retrieval mode it records, and the embedder of its vectors.
- `write` makes the embedded index's vector files while a tantivy build or sync writes its new version
  (`typedrag.index.vectors` has the files and the journal that makes an interrupted embedding resume).
(The fusion of a BM25 and a dense ranking is `typedrag.index.fusion.hybrid`.)
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from typedrag.config import RETRIEVAL_MODES, ConfigError
from typedrag.embed import DEFAULT_EMBEDDER, EMBEDDERS
from typedrag.index.vectors import DenseVectors, PassageText, Table, Writer, disk_bytes, journal_path

if TYPE_CHECKING:
    import tantivy

    from typedrag.index.ingest import FileRecord, Plan
    from typedrag.index.progress import BuildWatch
    from typedrag.records import IndexSummary

DEFAULT_RETRIEVAL = "hybrid"
# A new index gets vectors by default up to this many passages: MiniLM embeds ~40 passages a second on two
# idle cores (docs/lab/2026-12-02-hybrid.md), so 50,000 take about 20 minutes; a bigger corpus is indexed for BM25 and told how
# to add them (`--retrieval hybrid`, or `--embedder static` in seconds), never made to wait hours unasked.
AUTO_VECTORS_MAX_PASSAGES = 50_000
FETCH_BATCH = 512


@dataclass(frozen=True)
class Wanted:
    """What a build makes: `retrieval` recorded as the index's default search, vectors by `embedder` (None: no vectors).
    `chosen`: the user or the index asked for it (else it is the default for a new index, bounded by size)."""

    retrieval: str
    embedder: str | None
    chosen: bool = True


def recorded_retrieval(manifest: dict | None) -> str | None:
    """The retrieval an index was built for: its manifest's, "bm25" for an index from before vectors, None for no index."""
    if manifest is None:
        return None
    return manifest.get("retrieval") or "bm25"


def wanted(current: dict | None, retrieval: str | None, embedder: str | None) -> Wanted:
    """What a build of an index whose manifest is `current` (None: no index yet) makes, given the options."""
    if retrieval is not None and retrieval not in RETRIEVAL_MODES:
        raise ConfigError(f"unknown retrieval {retrieval!r}; choose {', '.join(RETRIEVAL_MODES)}")
    if embedder is not None and embedder not in EMBEDDERS:
        raise ConfigError(f"unknown embedder {embedder!r}; choose {' or '.join(EMBEDDERS)}")
    mode = retrieval or recorded_retrieval(current)
    chosen = mode is not None or embedder is not None
    mode = mode or DEFAULT_RETRIEVAL
    if mode == "bm25":
        return Wanted("bm25", None)
    table = Table.from_json((current or {}).get("vectors"))
    return Wanted(mode, embedder or (table.embedder if table else None) or DEFAULT_EMBEDDER, chosen)


def manifest_entries(want: Wanted, table: Table | None, folder: Path) -> dict:
    if want.embedder is not None and table is None:  # too big to embed unasked
        return {"retrieval": "bm25", "vectors_skipped": True}
    entries: dict = {"retrieval": want.retrieval}
    if table is not None:
        entries["vectors"] = table.to_json(folder)
    return entries


def write(
    building: Path,
    index: "tantivy.Index",
    records: dict[str, "FileRecord"],
    work: "Plan",
    previous: dict | None,
    index_dir: Path,
    want: Wanted,
    summary: "IndexSummary",
    show_progress: bool,
    watch: "BuildWatch | None" = None,
) -> Table | None:
    """The vector files of the index being built in `building`, one row per passage, file by file.

    A file the sync keeps unchanged takes its rows from the previous version when that was made by the same
    embedder; every other file's passages are read back from the new tantivy index and embedded (the journal
    holds what an interrupted run already did).
    """
    summary.retrieval = want.retrieval
    if want.embedder is None:
        return None
    rows = sum(record.passages for record in records.values())
    if not want.chosen and rows > AUTO_VECTORS_MAX_PASSAGES:
        summary.retrieval = "bm25"
        summary.notes.append(
            f"{rows:,} passages: more than {AUTO_VECTORS_MAX_PASSAGES:,}, so no passage vectors were made by default and the "
            f"index is searched with BM25 ({want.embedder} would take about {rows / 40 / 3600:.1f} h on two cores); "
            "add them with --retrieval hybrid (resumable), or --retrieval hybrid --embedder static (minutes, less exact)"
        )
        return None
    index.reload()
    searcher = index.searcher()
    old = _previous_vectors(previous, index_dir)
    identity_matches = old is not None
    unchanged = {record.key for record in work.unchanged}
    keys = sorted(records)
    copied = {key for key in keys if identity_matches and key in unchanged and key in old.table.files}
    to_embed = sum(records[key].passages for key in keys if key not in copied)
    progress, task = _progress(show_progress, to_embed, f"embedding ({want.embedder})", "passages")
    embedded, taken = [0], [0]

    def advanced(n: int, without_work: bool = False) -> None:
        """`n` more passages have vectors; `without_work`: taken from the journal or the shipped vectors, so they
        move the bar but not the rate."""
        if without_work:
            taken[0] += n
        progress.update(task, advance=n, taken=taken[0])
        if watch is not None:
            embedded[0] += n
            watch.embedding(embedded[0], to_embed, taken[0])

    if watch is not None:
        watch.embedding(0, to_embed)
    writer = Writer(building, rows, want.embedder, journal_path(index_dir), advanced)
    summary.notes += [
        f"the shipped vectors {name} do not match the sha256 typedrag recorded for them: not used, their "
        "passages are embedded afresh (reinstall typedrag)"
        for name in writer.shipped.refused
    ]
    if old is not None and old.table.identity != writer.table.identity:
        copied, old = set(), None  # the embedder's model changed: embed everything again
    started = time.perf_counter()
    with progress:
        for key in keys:
            if key in copied:
                first, count = old.table.files[key]
                writer.copy(key, old, first, count)
            elif records[key].passages:
                writer.embed(key, _passages_of(searcher, index.schema, key, records[key].passages))
        table = writer.finish()  # inside: its last batch is shown on the bar (issue 57 P11)
    summary.embedder = want.embedder
    summary.embedded = writer.embedded
    summary.embed_seconds = time.perf_counter() - started
    summary.vector_bytes = disk_bytes(building)
    return table


def search_entries(building: Path, table: Table | None, summary: "IndexSummary") -> dict:
    """The manifest's `vector_search` section (typedrag.index.nearest): the longest stored row, and an HNSW graph
    over the rows when there are ANN_MIN_ROWS or more (built again by every build or sync that writes vectors)."""
    import numpy as np

    from typedrag.index import nearest

    if table is None:
        return {}
    rows = np.load(building / "vectors.npy", mmap_mode="r")
    scales = np.load(building / "vector-scales.npy", mmap_mode="r")
    section: dict = {"norm_max": nearest.norm_max(rows, scales), "graph": False}
    if table.rows >= nearest.ANN_MIN_ROWS:
        seconds = nearest.build_graph(building, rows)
        section.update(
            graph=True, graph_seconds=round(seconds, 1), graph_bytes=(building / nearest.GRAPH).stat().st_size
        )
        summary.graph_seconds = seconds
    return {"vector_search": section}


def finished(index_dir: Path) -> None:
    """The index with its vectors is in place: the journals of its embedding are not needed any more."""
    from typedrag.index.sentences import journal_path as sentences_journal

    journal_path(index_dir).unlink(missing_ok=True)
    sentences_journal(index_dir).unlink(missing_ok=True)


def _previous_vectors(previous: dict | None, index_dir: Path) -> DenseVectors | None:
    table = Table.from_json((previous or {}).get("vectors"))
    if table is None:
        return None
    try:
        return DenseVectors(index_dir, table, previous.get("vector_search"))
    except (OSError, ValueError):
        return None  # damaged: embedded again


def _passages_of(searcher, schema, key: str, count: int) -> Iterator[PassageText]:
    """The passages of one source file in the new index, in the order tantivy stores them."""
    import tantivy

    hits = searcher.search(tantivy.Query.term_query(schema, "file", key), limit=max(count, 1), count=False).hits
    addresses = sorted((address for _, address in hits), key=lambda a: (a.segment_ord, a.doc))
    for start in range(0, len(addresses), FETCH_BATCH):
        for address in addresses[start : start + FETCH_BATCH]:
            doc = searcher.doc(address)
            yield PassageText(doc.get_first("passage_id"), doc.get_first("title") or "", doc.get_first("text") or "")


def _progress(show: bool, total: int, label: str, unit: str, **options):
    """A bar with the `unit`s embedded, their rate and the time left (`typedrag.index.progress`); `options` go to
    rich's `Progress` (a console, a clock)."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from typedrag.index.progress import LoggedProgress, Rate, TimeLeft, left, rate

    def line(task) -> str:
        return f"{label}: {task.completed:,.0f} of {task.total:,.0f} {unit}{rate(task, unit)}{left(task)}"

    progress = LoggedProgress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(unit),
        TimeElapsedColumn(),
        TimeLeft(),
        disable=not show or total == 0,
        line=line,
        **options,
    )
    return progress, progress.add_task("embedding", total=total)


SENTENCES_ENV = "TYPEDRAG_SENTENCE_VECTORS"
_YES, _NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class SentenceChoice:
    """Whether a build embeds its passages' sentences for answers, and why (`IndexSummary.sentence_choice`):
    "asked" (--sentence-vectors or --no-sentence-vectors, the `sentence_vectors` setting, TYPEDRAG_SENTENCE_VECTORS),
    "recorded" (the index was first built as asked), "kept" (the index has them), "demo" (the demo corpus: not by
    default), "default" (MiniLM passage vectors: yes), "no-minilm" (BM25 or static passage vectors: not by default)."""

    build: bool
    why: str

    @property
    def asked(self) -> bool:
        return self.why in ("asked", "recorded")


def asked_sentences(asked: bool | None) -> bool | None:
    """The choice given, else TYPEDRAG_SENTENCE_VECTORS's (for callers without settings: `serve --data`, the API)."""
    if asked is not None:
        return asked
    value = os.environ.get(SENTENCES_ENV, "").strip().lower()
    if not value:
        return None
    if value not in _YES + _NO:
        raise ConfigError(f"{SENTENCES_ENV}={value!r}: give 1 (build them) or 0 (leave them to answers)")
    return value in _YES


def sentence_choice(
    asked: bool | None, current: dict | None, sources: Sequence, want: Wanted, table: Table | None
) -> SentenceChoice:
    """Whether this build embeds every passage's sentences (typedrag.index.sentences). Asked, or as the index was first
    asked (recorded in its manifest), or kept when the index has them; else yes for MiniLM passage vectors but for the
    demo corpus: its passage vectors ship with typedrag, so its first build takes seconds, and its 56,681 sentences
    would take minutes of CPU (docs/lab/2026-12-06-sentence-vectors.md, 37b); its answers add each sentence as they first need it."""
    from typedrag.corpus import DEMO_SOURCE
    from typedrag.index import sentences

    asked = asked_sentences(asked)
    if asked is not None:
        return SentenceChoice(asked, "asked")
    recorded = (current or {}).get("sentence_vectors")
    if isinstance(recorded, bool):
        return SentenceChoice(recorded, "recorded")
    if current is not None and sentences.section_of(current) is not None:
        return SentenceChoice(True, "kept")
    if table is None or want.embedder != "minilm":
        return SentenceChoice(False, "no-minilm")
    if any(str(source) == DEMO_SOURCE for source in sources):
        return SentenceChoice(False, "demo")
    return SentenceChoice(True, "default")


def write_sentences(
    building: Path,
    index: "tantivy.Index",
    previous: dict | None,
    index_dir: Path,
    choice: SentenceChoice,
    summary: "IndexSummary",
    show_progress: bool,
) -> dict | None:
    """The vectors of every passage's sentences (typedrag.index.sentences) when `choice` says so (None otherwise: the
    index's answers embed and keep them as they first need them). Sentences the previous version kept, or that
    answering added to it, are taken over, not embedded again."""
    from typedrag.embed import embedder_for
    from typedrag.index import sentences
    from typedrag.records import lines_of

    summary.sentence_choice, summary.sentence_vectors = choice.why, choice.build
    if not choice.build:
        return None
    index.reload()
    searcher = index.searcher()

    def passages():
        import tantivy

        hits = searcher.search(tantivy.Query.all_query(), limit=max(searcher.num_docs, 1), count=False).hits
        for _, address in sorted(hits, key=lambda hit: (hit[1].segment_ord, hit[1].doc)):
            doc = searcher.doc(address)
            text, lines = doc.get_first("text") or "", doc.get_first("lines")
            kinds = lines_of(text, bytes(lines).decode("ascii", "replace")) if lines else ()
            yield doc.get_first("title") or "", doc.get_first("section") or "", text, kinds

    known = [index_dir / sentences.ADDED]
    if previous is not None and sentences.section_of(previous) is not None:
        known.insert(0, index_dir / sentences.SENTENCES)
    holder: dict = {}

    def progress(total: int):
        holder["bar"], task = _progress(show_progress, total, "embedding sentences (minilm)", "sentences")
        holder["bar"].start()
        return lambda n: holder["bar"].update(task, advance=n)

    started = time.perf_counter()
    try:
        section = sentences.write(
            building, passages(), known, sentences.journal_path(index_dir), embedder_for("minilm"), progress
        )
    finally:
        if "bar" in holder:
            holder["bar"].stop()
    summary.sentence_seconds = time.perf_counter() - started
    summary.sentences, summary.sentences_embedded = section["rows"], section["embedded"]
    summary.sentence_bytes = (building / sentences.SENTENCES).stat().st_size
    return section
