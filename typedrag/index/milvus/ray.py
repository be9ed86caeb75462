"""Ingestion on a Ray cluster into Milvus: files read, chunked and embedded by the cluster's workers.

Why: one process reads, chunks and embeds every passage of a `typedrag index` build; the shipped MiniLM
embeds about 15 passages per CPU-second, so a corpus of millions of passages outgrows one machine at
ingestion long before it does at serving. Ray Data spreads the work over a cluster as its users expect:

    files ─ flat_map(read + chunk, tasks) ─ map_batches(embed, actor pool) ─ map_batches(upsert, actor pool) ─ driver

- **Read and chunk** run typedrag's own readers and chunker (`ingest.take_file`, the same code as a build in
  one process) in Ray tasks, one file per call; rows are `schema.passage_row`s. Each file ends with a
  header row: its `FileRecord` (content hash, counts, passages hash), its problems and notes, its document ids.
- **Embed** (when the build keeps vectors: `--retrieval` hybrid or dense, the default for a new collection) in an
  actor pool, one model load per actor, batches of `EMBED_BATCH` passages, with the embedder the build names
  (`--embedder`, or the collection's) through `schema.passage_vectors`: the vectors are the ones a build
  in one process computes (tests/test_ray.py). What a build makes (`build.wanted`), its manifest and its
  file table are decided and written by `milvus.build`'s own functions.
- **Write** in an actor pool: idempotent upserts keyed by the row id (`passage_id@generation`), so a task Ray
  retries after a worker died writes the same rows again, never twice.
- **The driver** sees each batch's acknowledgements: a file is done when its header and every one of its
  passages are acknowledged. Done files go to a ledger kept beside the data (collection properties
  `schema.RESUME_PREFIX` + `<generation>.<n>`, checkpointed every few seconds), so a rerun after the
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
`milvus.build` does. The manifest and file table are `milvus.build`'s, written last.

Ray is imported lazily: without the `ray` extra nothing here is loaded.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from typedrag import telemetry
from typedrag.corpus.readers import FileFilter
from typedrag.index.base import IndexUnusableError
from typedrag.index.milvus.ray_job import Job
from typedrag.index.milvus.ray_ledger import RayRun
from typedrag.index.milvus.schema import BATCH_SIZE, Connection, check_name
from typedrag.records import IndexSummary


def ray_module():
    """Import ray on first use; a one-line error naming the extra if it is missing."""
    from typedrag.extras import require

    require("ray.data", "ray", "typedrag index --ray")
    import ray

    return ray


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
    `typedrag.index.milvus.build.sync_milvus_index` does in one process: same passages, ids, vectors and manifest.

    `retrieval`, `embedder`, `dense` and `filters` as for `sync_milvus_index` (None: as the collection has them,
    hybrid and no filters for a new one): the same decision, by the same function.

    `address`: what `ray.init` takes ("auto": RAY_ADDRESS or the cluster this machine belongs to;
    "ray://host:10001": Ray Client), or "local" (a Ray started in this process, for one machine). The
    source files must be readable at the same paths by every worker (a shared file system). `embed_actors`
    caps the embedding actor pool (default: the cluster's CPUs); `writers` is the number of upsert actors.
    `report` gets the summary line; `run` (if given) is filled in with what the cluster did.
    """
    sources = list(sources)
    check_name(collection)
    run = run if run is not None else RayRun()
    started = time.perf_counter()
    with telemetry.step("ingest", backend="milvus", collection=collection) as span:
        ray = connect(address, run)
        conn = Connection(uri, token)
        summary = IndexSummary(index_dir=f"milvus {conn.where}/{collection}")
        try:
            job = Job(
                ray,
                conn,
                uri,
                token,
                collection,
                sources,
                summary,
                run,
                passage_words=passage_words,
                strict=strict,
                show_progress=show_progress,
                batch_size=batch_size,
                embed_actors=embed_actors,
                writers=writers,
            )
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


def connect(address: str | None, run: RayRun):
    """Join the cluster (or start a local Ray for "local"), quietly: the driver shows its own progress."""
    ray = ray_module()
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


def index_on_ray(
    settings,
    sources: list[str],
    *,
    address: str,
    passage_words: int,
    strict: bool,
    dense: bool,
    rebuild: bool,
    remove_missing: bool,
    embedder: str | None = None,
    report: Callable[[str], None] | None = None,
    filters: FileFilter | None = None,
) -> IndexSummary:
    """`typedrag index --ray`: the settings' Milvus collection, built or synced on the Ray cluster at `address`,
    with the retrieval the settings name (`--retrieval`) and `embedder`, as `build_configured_index` would."""
    from typedrag.config import ConfigError
    from typedrag.index.milvus.backend import milvus_token, milvus_uri

    if settings.backend != "milvus":
        raise ConfigError("--ray writes to Milvus: add --backend milvus --uri URI (or set TYPEDRAG_BACKEND=milvus)")
    return sync_milvus_index_on_ray(
        sources,
        milvus_uri(settings),
        settings.milvus_collection,
        address=address,
        token=milvus_token(settings),
        passage_words=passage_words,
        strict=strict,
        dense=dense,
        rebuild=rebuild,
        remove_missing=remove_missing,
        retrieval=settings.search_mode,
        embedder=embedder,
        show_progress=sys.stderr.isatty(),
        report=report,
        filters=filters,
    )
