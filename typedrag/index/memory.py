"""Retrievers over your own texts in memory: a list (BM25 in a RAM tantivy index) or a function."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from typedrag.index.base import Retriever
from typedrag.records import Passage, ScoredPassage

Found = str | Passage | ScoredPassage


def _as_passage(item: str | Passage, position: int) -> Passage:
    if isinstance(item, Passage):
        return item
    return Passage(passage_id=f"text-{position}#0", doc_id=f"text-{position}", title="", text=str(item))


def _scored(item: Found, position: int) -> ScoredPassage:
    if isinstance(item, ScoredPassage):
        return item
    return ScoredPassage(_as_passage(item, position), score=1.0 / (position + 1))


class ListRetriever(Retriever):
    """BM25 over a list of texts or Passages, scored exactly like the on-disk index (same analyzer, k1, b).

    >>> ListRetriever(["Cats purr.", "Dogs bark loudly."]).search("why do dogs bark", 1)[0].passage.text
    'Dogs bark loudly.'
    """

    name = "list-bm25"

    def __init__(self, texts: Sequence[str | Passage]) -> None:
        import tantivy

        from typedrag.index.tantivy.schema import bm25_query, query_analyzer, schema

        self.passages = [_as_passage(t, i) for i, t in enumerate(texts)]
        index = tantivy.Index(schema())  # in memory
        writer = index.writer(15_000_000, 1)
        for position, passage in enumerate(self.passages):
            document = tantivy.Document(
                text=passage.text, title=passage.title, section=passage.section, passage_id=str(position)
            )
            document.add_unsigned("position", position)
            writer.add_document(document)
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self._searcher, analyzer, schema = index.searcher(), query_analyzer(), index.schema
        self._query = lambda text: bm25_query(schema, analyzer, text)

    def mentions(self, word: str) -> bool:
        """Whether any of the texts holds `word` (typedrag.abstain asks it of the names a question uses)."""
        from typedrag.index.tantivy.schema import mentioned

        return mentioned(self._searcher, self._query, word)

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        q = self._query(query)
        if q is None or k <= 0:
            return []
        hits = self._searcher.search(q, limit=k, count=False).hits
        return [
            ScoredPassage(self.passages[int(self._searcher.doc(address).get_first("passage_id"))], score)
            for score, address in hits
        ]

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        return [self.search(q, k) for q in queries]


class FunctionRetriever(Retriever):
    """Any search function as a retriever: `fn(query, k)` returns texts, Passages or ScoredPassages, best first.

    >>> FunctionRetriever(lambda q, k: ["Paris is the capital of France."][:k]).search("capital", 1)[0].passage.text
    'Paris is the capital of France.'
    """

    def __init__(self, fn: Callable[[str, int], Sequence[Found]], name: str = "function") -> None:
        self.fn, self.name = fn, name

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        return [_scored(item, i) for i, item in enumerate(list(self.fn(query, k))[:k])]

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        with ThreadPoolExecutor(max_workers=4) as pool:
            return list(pool.map(lambda q: self.search(q, k), queries))
