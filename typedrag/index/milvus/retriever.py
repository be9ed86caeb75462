"""Search a Milvus collection: BM25, dense, or both fused exactly as the embedded index fuses them."""

from __future__ import annotations

import json

from typedrag.embed import embedder_for
from typedrag.index import fusion
from typedrag.index.base import Description, IndexUnusableError, Retriever
from typedrag.index.milvus.schema import (
    ANALYZER,
    CALL_TIMEOUT,
    ENGINE,
    FIELDS,
    FORMAT_VERSION,
    LINES,
    MANIFEST_PROPERTY,
    METRICS,
    MODES,
    QUERY_ANALYZER,
    QUERY_BATCH,
    SEARCH_TIMEOUT,
    TERMS,
    B,
    Connection,
    K1,
    Mode,
    check_name,
    query_text,
    rebuild_hint,
)
from typedrag.records import Passage, ScoredPassage, lines_of


class MilvusRetriever(Retriever):
    """Search a collection built by `build_milvus_index`. Thread-safe (one gRPC channel shared by all calls)."""

    def __init__(self, uri: str, collection: str = "typedrag", *, token: str | None = None, mode: Mode | None = None):
        """`mode` None searches as the collection was built (hybrid when it has vectors)."""
        if mode is not None and mode not in MODES:
            raise ValueError(f"unknown Milvus search mode {mode!r}; choose bm25, dense or hybrid")
        check_name(collection)
        self.asked = mode
        self.collection = collection
        self._conn = Connection(uri, token)
        try:
            self.manifest = self._check(uri)
        except BaseException:
            self._conn.close()
            raise
        self.name = f"milvus-{self.mode}@{self._conn.where}/{collection}"
        self.notice = None
        self._embedder = None
        if self.mode != "bm25":
            self._embedder = embedder_for(self.manifest["engine"].get("embedder_key", "minilm"))

    @property
    def retrieval(self) -> str:
        return self.mode

    def describe(self) -> Description:
        return Description(self.name, manifest=self.manifest)

    def _check(self, uri: str) -> dict:
        """The collection's manifest, checked against this code; `IndexUnusableError` naming the fix otherwise."""
        conn, collection = self._conn, self.collection
        hint = rebuild_hint(uri, collection)
        with conn.errors("opening the collection"):
            if not conn.client.has_collection(collection, timeout=CALL_TIMEOUT):
                raise IndexUnusableError(f"no Milvus collection {collection!r} at {conn.where}: {hint}")
            described = conn.client.describe_collection(collection, timeout=CALL_TIMEOUT)
        raw = (described.get("properties") or {}).get(MANIFEST_PROPERTY)
        if raw is None:
            raise IndexUnusableError(
                f"Milvus collection {collection!r} has no typedrag manifest (unfinished or foreign): {hint}"
            )
        try:
            manifest = json.loads(raw)
            engine = manifest["engine"]
            version = manifest["format_version"]
        except (ValueError, KeyError, TypeError):
            raise IndexUnusableError(
                f"Milvus collection {collection!r} has a corrupt typedrag manifest: {hint}"
            ) from None
        if version != FORMAT_VERSION:
            raise IndexUnusableError(
                f"Milvus collection {collection!r} has format {version}, this typedrag reads format {FORMAT_VERSION}: {hint}"
            )
        expected = {"name": ENGINE, "analyzer": ANALYZER, "terms": TERMS, "k1": K1, "b": B}
        wrong = [key for key, value in expected.items() if engine.get(key) != value]
        if wrong:
            raise IndexUnusableError(
                f"Milvus collection {collection!r} was built with other {', '.join(wrong)} than this typedrag uses: {hint}"
            )
        self.mode = self.asked or manifest.get("retrieval") or ("hybrid" if engine.get("dense") else "bm25")
        if self.mode != "bm25" and not engine.get("dense"):
            raise IndexUnusableError(
                f"Milvus collection {collection!r} has no dense vectors for --retrieval {self.mode}: "
                f"{rebuild_hint(uri, collection, ' --retrieval hybrid')}, or use --retrieval bm25"
            )
        with conn.errors("opening the collection"):
            conn.client.load_collection(collection, timeout=CALL_TIMEOUT)  # a no-op when loaded; needed after a release
        names = {field.get("name") for field in described.get("fields", [])}
        self._fields = (
            FIELDS + [LINES] if LINES in names else FIELDS
        )  # a collection built before kinds were kept has none
        return manifest

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        """Up to QUERY_BATCH queries per request: one round trip instead of one per query."""
        results: list[list[ScoredPassage]] = [[] for _ in queries]
        if k <= 0:
            return results
        terms = [query_text(q) for q in queries]
        # BM25 and hybrid need a term left after stopwords (tantivy returns nothing then too); dense needs any text.
        todo = [i for i, q in enumerate(queries) if (q.strip() if self.mode == "dense" else terms[i])]
        for start in range(0, len(todo), QUERY_BATCH):
            chunk = todo[start : start + QUERY_BATCH]
            with self._conn.errors("searching"):
                hits = self._search([queries[i] for i in chunk], [terms[i] or queries[i] for i in chunk], k)
            for i, row in zip(chunk, hits):
                results[i] = [self._scored(hit) for hit in row]
        return results

    def _search(self, raw: list[str], terms: list[str], k: int) -> list[list[dict]]:
        client = self._conn.client

        def leg(data: list, field: str, limit: int) -> list[list[dict]]:
            """One search of the `sparse` (BM25 over the analysed terms) or `dense` (cosine) field."""
            return client.search(
                self.collection,
                data=data,
                anns_field=field,
                limit=limit,
                output_fields=self._fields,
                search_params={"metric_type": METRICS[field]},
                timeout=SEARCH_TIMEOUT,
            )

        if self.mode == "bm25":
            return leg(terms, "sparse", k)
        vectors = [v.tolist() for v in self._embedder.embed(raw)]
        if self.mode == "dense":
            return leg(vectors, "dense", k)
        # Each leg's top HYBRID_DEPTH, fused here exactly as the embedded index fuses them.
        depth = max(k, fusion.HYBRID_DEPTH)
        lexical, nearest = leg(terms, "sparse", depth), leg(vectors, "dense", depth)
        results = []
        for query, bm25_hits, dense_hits in zip(raw, lexical, nearest):
            by_id = {hit["entity"]["passage_id"]: hit for hit in [*dense_hits, *bm25_hits]}
            fused = fusion.hybrid(
                set(QUERY_ANALYZER.analyze(query)),
                [(h["entity"]["passage_id"], h["entity"]["title"]) for h in bm25_hits],
                [(h["entity"]["passage_id"], h["entity"]["title"]) for h in dense_hits],
                k,
                lambda title: set(QUERY_ANALYZER.analyze(title)),
            )
            results.append([{**by_id[pid], "distance": score} for pid, score in fused])
        return results

    def _scored(self, hit: dict) -> ScoredPassage:
        entity = hit["entity"]
        passage = Passage(
            entity["passage_id"],
            entity["doc_id"],
            entity["title"],
            entity["text"],
            section=entity.get("section") or "",
            page=entity.get("page") or None,
            page_end=entity.get("page_end") or None,
            lines=lines_of(entity["text"], entity.get(LINES)),
        )
        # Milvus Lite reports BM25 scores negated (as distances); a server reports them as they are.
        score = abs(hit["distance"]) if self.mode == "bm25" else hit["distance"]
        return ScoredPassage(passage, float(score))

    def close(self) -> None:
        self._conn.close()


def open_milvus_retriever(
    uri: str, collection: str = "typedrag", *, token: str | None = None, mode: Mode | None = None
) -> MilvusRetriever:
    """Open a built collection for search; `IndexUnusableError` (naming the fix) if it cannot be used."""
    return MilvusRetriever(uri, collection, token=token, mode=mode)
