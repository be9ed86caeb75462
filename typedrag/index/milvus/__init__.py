"""The Milvus backend: the same passages as the embedded index, in a Milvus collection reached over the network.

Why: one index shared by N stateless `typedrag serve` replicas, and corpora that outgrow one
machine. `pymilvus` speaks one API to Milvus Lite (`milvus-lite server`, or a local `.db` file), a
standalone server, a cluster and Zilliz Cloud, so between them only the URI and the token change.

Dense vectors (`retrieval` "dense" or "hybrid" at build time) are the embedded index's: the same embedder
and passage input (`typedrag.embed.passage_input`), quantized the same way, so a passage has the same vector
in both backends. "hybrid" searches each leg and fuses them with `typedrag.index.fusion.hybrid`, the tantivy
index's reciprocal-rank fusion over each leg's top 100, rather than Milvus's RRF ranker over 2k per leg
(which kept about half of the fusion's gain: docs/lab/2026-12-02-hybrid.md).

- `schema`: the collection's fields, a passage as a row, BM25's terms, the connection;
- `build`: build or sync a collection in this process;
- `retriever`: search it (`MilvusRetriever`);
- `ray` (with `ray_job`, `ray_ledger`, `ray_workers`): build or sync it on a Ray cluster.

pymilvus (and ray) are imported lazily so the rest of typedrag works without the `milvus` (`ray`) extra.
"""

from __future__ import annotations

from typedrag.index.milvus.build import build_milvus_index, sync_milvus_index
from typedrag.index.milvus.retriever import MilvusRetriever, open_milvus_retriever
from typedrag.index.milvus.schema import ENGINE

__all__ = ["ENGINE", "MilvusRetriever", "build_milvus_index", "open_milvus_retriever", "sync_milvus_index"]
