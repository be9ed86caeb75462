"""A Milvus collection of typedrag passages: its fields and indexes, a passage as a row, the terms BM25 reads, and
the connection every call goes through (one line naming the fix for any failure).

Scoring: Milvus's BM25 function at k1=1.2, b=0.75, as tantivy, over the same terms as tantivy: each
passage also stores `terms`, its text run through tantivy's `en_stem` chain (simple tokenizer, lowercase,
English Snowball stemmer), and queries go through tantivy's query chain (the same plus stopwords
dropped). Milvus's own `standard` analyzer then only splits those terms on spaces. Why not Milvus's
English analyzer: Milvus Lite implements only the tokenizer and stop-word filters and silently ignores
a stemmer, so the same collection would be indexed differently on Lite than on a cluster, and without
stemming "crocodile" does not find "Crocodiles" (top-10 overlap with tantivy in tests/test_milvus.py:
0.54 without, 0.96 with). Milvus Lite scores BM25 with per-segment statistics, so its ranking is close
to, not equal to, tantivy's.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import numpy as np

from typedrag.corpus.chunker import CHUNKER_VERSION
from typedrag.embed import embedder_for, passage_input
from typedrag.index.base import IndexUnusableError
from typedrag.index.tantivy.schema import query_analyzer
from typedrag.index.vectors import identity_of, quantize
from typedrag.records import Passage, encode_lines


Mode = Literal["bm25", "dense", "hybrid"]

MODES: tuple[str, ...] = ("bm25", "dense", "hybrid")

ENGINE = "milvus"

FORMAT_VERSION = 2  # of the collection's schema and manifest; bump when either changes

MANIFEST_PROPERTY = "typedrag.manifest"  # collection property holding the manifest JSON, written last

FILES_PROPERTY = "typedrag.files"  # the file table a sync compares against (gzipped JSON, base64)

RESUME_PREFIX = "typedrag.ray."  # collection properties of a build or sync on a Ray cluster (index.milvus.ray)

K1, B = 1.2, 0.75

ANALYZER: dict[str, Any] = {"tokenizer": "standard", "filter": ["lowercase"]}  # splits the pre-analyzed terms

TERMS = "tantivy en_stem"  # how `terms` is made from `text` (queries: the same plus Snowball stopwords dropped)

BUILD_INFIX = "__build_"  # <collection>__build_<hex>: the real collection behind the alias <collection>

BATCH_SIZE = 1000  # passages per insert: ~1 MB gRPC messages, far below Milvus's 64 MB limit

QUERY_BATCH = 8  # queries per search request: fewer round trips, yet Milvus Lite (~0.3-1 s a query at 100k) stays in SEARCH_TIMEOUT

CALL_TIMEOUT = 15.0  # seconds per call: pymilvus retries a brief failover until then, then we report

# pymilvus pings an idle channel every 10 s; a gRPC server left at its defaults (milvus-lite's) answers the third
# such ping with GOAWAY "too_many_pings" and the next call fails to connect. Calls carry their own timeout, so
# the channel pings only while a call runs, and no more often than servers allow by default (5 minutes). Our own
# channel (`dedicated`): pymilvus otherwise hands back a channel another client opened with other options.
CHANNEL_OPTIONS = {"grpc.keepalive_permit_without_calls": False, "grpc.keepalive_time_ms": 300_000}

# Searches get longer: Milvus Lite builds each segment's BM25 index on the first search after a start,
# which took over 15 s at 100k passages on a loaded 2-core machine.
SEARCH_TIMEOUT = 60.0
# Each vector field's metric: its index is built with it and every search of it names it.
METRICS = {"sparse": "BM25", "dense": "COSINE"}

MAX_VARCHAR = 65535  # Milvus's VARCHAR limit, in UTF-8 bytes

FIELDS = ["passage_id", "doc_id", "title", "section", "text", "page", "page_end"]

LINES = "lines"  # the kind of each line of `text` (records.encode_lines); absent from collections built before it

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")


def pymilvus_module():
    """Import pymilvus on first use; a one-line error naming the extra if it is missing."""
    try:
        import pymilvus
    except ImportError:
        raise IndexUnusableError("the Milvus backend needs pymilvus: pip install 'typedrag[milvus]'") from None
    # pymilvus logs every failed call with a traceback at ERROR; we report each failure as one line.
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    return pymilvus


def server_label(uri: str) -> str:
    """host:port of a server URI (no scheme, user or password), or the file of a Milvus Lite `.db` URI."""
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https", "tcp", "grpc", "unix") and parts.hostname:
        return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname
    return Path(uri).name or uri


def safe_uri(uri: str) -> str:
    """`uri` without any user:password part, for messages."""
    parts = urlsplit(uri)
    if parts.scheme and "@" in parts.netloc:
        return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()
    return uri


def check_name(collection: str) -> None:
    if not _NAME.fullmatch(collection):
        raise ValueError(
            f"invalid Milvus collection name {collection!r}: use letters, digits and underscores, "
            "not starting with a digit, at most 200 characters"
        )


def rebuild_hint(uri: str, collection: str, flags: str = "") -> str:
    return f"run `typedrag index SOURCE --backend milvus --uri {safe_uri(uri)} --collection {collection}{flags}` to build it"


class Connection:
    """A MilvusClient plus what its errors need: where it points (never the token) and what to redact."""

    def __init__(self, uri: str, token: str | None):
        self.pymilvus = pymilvus_module()
        self.uri = uri
        self.where = server_label(uri)
        self._secrets = [s for s in (token, urlsplit(uri).password) if s]
        with self.errors("connecting"):
            self.client = self.pymilvus.MilvusClient(
                uri=uri, token=token or "", timeout=CALL_TIMEOUT, grpc_options=CHANNEL_OPTIONS, dedicated=True
            )

    def one_line(self, error: BaseException) -> str:
        text = " ".join(str(error).split())
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text[:300]

    @contextmanager
    def errors(self, doing: str, hint: str = "start the server or check --uri and --token") -> Iterator[None]:
        """Turn any pymilvus/gRPC failure into one `IndexUnusableError` line naming the fix."""
        import grpc

        try:
            yield
        except (self.pymilvus.MilvusException, grpc.RpcError) as error:
            raise IndexUnusableError(
                f"Milvus at {self.where} failed while {doing} ({self.one_line(error)}): {hint}"
            ) from None

    def alias_target(self, alias: str) -> str | None:
        """The collection `alias` points to, or None if no such alias."""
        with self.errors("listing aliases"):
            for name in self.client.list_collections(timeout=CALL_TIMEOUT):
                if alias in self.client.list_aliases(name, timeout=CALL_TIMEOUT).get("aliases", []):
                    return name
        return None

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # closing a channel to a dead server must not hide the error being reported
            pass


def schema(pymilvus, embedder: str | None):
    """Rows keyed by passage id and generation: Milvus deletes by primary key, so a sync can insert a changed
    file's new passages (same ids, new generation) before it deletes the old ones."""
    DataType, Function, FunctionType = pymilvus.DataType, pymilvus.Function, pymilvus.FunctionType
    schema = pymilvus.MilvusClient.create_schema(
        auto_id=False, enable_dynamic_field=False, description="typedrag passages"
    )
    schema.add_field("row_id", DataType.VARCHAR, is_primary=True, max_length=MAX_VARCHAR)
    schema.add_field("passage_id", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("doc_id", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("file", DataType.VARCHAR, max_length=MAX_VARCHAR)  # the source file's key: a sync deletes by it
    schema.add_field("title", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("section", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("terms", DataType.VARCHAR, max_length=MAX_VARCHAR, enable_analyzer=True, analyzer_params=ANALYZER)
    schema.add_field("position", DataType.INT64)
    schema.add_field("page", DataType.INT64)  # 0: not from a paged document
    schema.add_field("page_end", DataType.INT64)
    schema.add_field(LINES, DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("generation", DataType.INT64)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(
            name="bm25", function_type=FunctionType.BM25, input_field_names=["terms"], output_field_names=["sparse"]
        )
    )
    if embedder is not None:
        from typedrag.embed import embedder_for

        schema.add_field("dense", DataType.FLOAT_VECTOR, dim=embedder_for(embedder).dim)
    return schema


def index_params(client, embedder: str | None):
    params = client.prepare_index_params()
    params.add_index(
        field_name="sparse",
        index_type="SPARSE_INVERTED_INDEX",
        metric_type=METRICS["sparse"],
        params={"bm25_k1": K1, "bm25_b": B},
    )
    if embedder is not None:
        params.add_index(field_name="dense", index_type="AUTOINDEX", metric_type=METRICS["dense"])
    return params


def passage_vectors(embedder, titles: list[str], texts: list[str]) -> np.ndarray:
    """The `dense` field of passages (their titles and texts): the embedded index's vector of each, exactly (the
    embedder's vector of `passage_input`, quantized to int8 and back as `typedrag.index.vectors` keeps it). The one
    home of a row's vector, for a build in this process and for one on a cluster (index.milvus.ray)."""
    rows, scales = quantize(embedder.encode([passage_input(title, text) for title, text in zip(titles, texts)]))
    return rows.astype(np.float32) * scales[:, None]


def passage_row(passage: Passage, file_key: str, generation: int, stemmer) -> dict:
    """A passage as a row of the collection (without its vector); `stemmer` is `index_analyzer()`. The one
    home of the row's shape, for a build in this process and for one on a cluster (index.milvus.ray)."""
    _check_sizes(passage)
    return {
        "row_id": f"{passage.passage_id}@{generation}",
        "passage_id": passage.passage_id,
        "doc_id": passage.doc_id,
        "file": file_key,
        "title": passage.title,
        "section": passage.section,
        "text": passage.text,
        "terms": " ".join(stemmer.analyze(passage.text)),
        "position": int(passage.passage_id.rsplit("#", 1)[1]),
        "page": passage.page or 0,
        "page_end": passage.page_end or 0,
        LINES: encode_lines(passage.lines),
        "generation": generation,
    }


def engine_params(pymilvus, passage_words: int, embedder: str | None) -> dict:
    """What the collection was built with; `MilvusRetriever` refuses a collection whose values differ."""
    params = {
        "name": ENGINE,
        "pymilvus": pymilvus.__version__,
        "analyzer": ANALYZER,
        "terms": TERMS,
        "k1": K1,
        "b": B,
        "passage_words": passage_words,
        "dense": embedder is not None,
        "chunker": CHUNKER_VERSION,
    }
    if embedder is not None:
        params["embedder"] = embedder_for(embedder).name
        params["embedder_key"] = embedder
        params["vector_identity"] = identity_of(embedder)
    return params


def _check_sizes(passage: Passage) -> None:
    for field in ("passage_id", "doc_id", "title", "text"):
        size = len(getattr(passage, field).encode())
        if size > MAX_VARCHAR:
            raise ValueError(
                f"passage {passage.passage_id[:80]!r}: its {field} is {size:,} bytes, Milvus holds {MAX_VARCHAR:,}; "
                "shorten it or use fewer --passage-words"
            )


def index_analyzer():
    """tantivy's `en_stem` chain, as the tantivy index analyzes passages."""
    import tantivy

    F = tantivy.Filter
    builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(F.remove_long(40)).filter(F.lowercase())
    return builder.filter(F.stemmer("english")).build()


QUERY_ANALYZER = query_analyzer()


def query_text(query: str) -> str:
    """The query's distinct stemmed terms without stopwords, exactly as tantivy's retriever queries."""
    return " ".join(dict.fromkeys(QUERY_ANALYZER.analyze(query)))
