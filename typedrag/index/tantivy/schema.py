"""The embedded index's schema and its queries: what a passage is stored as, and how a query is analysed.

tantivy scores with BM25 at k1=1.2, b=0.75, the Elasticsearch defaults the Typed-RAG paper used.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import tantivy

from typedrag.text import SNOWBALL_STOPWORDS


ENGINE = "tantivy-bm25"

# tantivy built-in: split on non-alphanumerics, drop tokens > 40 chars, lowercase, English Snowball stemmer.
# On the shared Wikipedia corpus it put the Wiki-NFQA short answer in the top 20 for 38.7% of questions,
# against 37.4% for "default" (no stemming), at the same speed and index size.
TOKENIZER = "en_stem"

# Dropped from queries only (the index keeps every word): they match most passages, so scoring them
# costs most of the query time while adding almost nothing to BM25 (tiny IDF). English Snowball list;
# measured on Wiki-NFQA questions: p50 8.3 ms with no stopwords, 1.5 ms with tantivy's short Lucene
# list, 1.0 ms with this one, and answer coverage 37.6% / 38.0% / 38.7%.
QUERY_STOPWORDS = sorted(SNOWBALL_STOPWORDS)

# The fields a query searches, with their weights (docs/lab/2026-12-01-title-search.md).
SEARCH_FIELDS = {"text": 1.0, "section": 0.5}


def schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("passage_id", stored=True, tokenizer_name="raw")
    builder.add_text_field("doc_id", stored=True, tokenizer_name="raw")
    builder.add_text_field("file", stored=True, tokenizer_name="raw")  # the source file's key: a sync deletes by it
    # "freq" (no positions): BM25 needs term frequencies only; positions made the index 17% bigger
    # (the searchable part 60%) and the build 20% slower. Title and section are indexed, and searched
    # only as SEARCH_FIELDS says (docs/lab/2026-12-01-title-search.md has the measurements).
    builder.add_text_field("title", stored=True, tokenizer_name=TOKENIZER, index_option="freq")
    builder.add_text_field("section", stored=True, tokenizer_name=TOKENIZER, index_option="freq")
    builder.add_text_field("text", stored=True, tokenizer_name=TOKENIZER, index_option="freq")
    builder.add_unsigned_field("position", stored=True, indexed=True)
    builder.add_unsigned_field("page", stored=True)
    builder.add_unsigned_field("page_end", stored=True)
    # The kind of each line of the text ("p,i1,i2,c": records.encode_lines), stored for reading back, never searched.
    builder.add_bytes_field("lines", stored=True, indexed=False)
    return builder.build()


def query_analyzer() -> tantivy.TextAnalyzer:
    """The index's `en_stem` chain with the stopword filter inserted before stemming."""
    F = tantivy.Filter
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(F.remove_long(40))
        .filter(F.lowercase())
        .filter(F.custom_stopword(QUERY_STOPWORDS))
        .filter(F.stemmer("english"))
        .build()
    )


def bm25_query(
    schema: tantivy.Schema, analyzer: tantivy.TextAnalyzer, query: str, fields: dict[str, float] | None = None
) -> tantivy.Query | None:
    """OR of the query's terms over the searched fields (field -> weight), never tantivy's parser (which
    chokes on `C++ (x)?`).

    A term written twice weighs twice (Okapi BM25's query-term frequency): strategies repeat a
    question's subject in its sub-queries so that it outweighs cue words like "causes".
    """
    clauses = []
    for term, frequency in Counter(analyzer.analyze(query)).items():
        for field, weight in (fields or SEARCH_FIELDS).items():
            clause = tantivy.Query.term_query(schema, field, term, index_option="freq")
            boost = frequency * weight
            clauses.append(
                (tantivy.Occur.Should, clause if boost == 1 else tantivy.Query.boost_query(clause, float(boost)))
            )
    return tantivy.Query.boolean_query(clauses) if clauses else None


def mentioned(searcher: tantivy.Searcher, query_for: Callable[[str], "tantivy.Query | None"], word: str) -> bool:
    """Whether any passage holds `word` (as the index's analyzer reads it), or the word without a plural or
    possessive ending the stemmer leaves on a name ("RPMs", "Debian's"). A word the analyzer drops (a stopword)
    is mentioned."""
    for form in dict.fromkeys([word, re.sub(r"(?:'s|s)$", "", word)]):
        query = query_for(form)
        if query is None or searcher.search(query, limit=1, count=False).hits:
            return True
    return False


def rebuild_hint(index_dir: Path) -> str:
    return f"re-run `typedrag index SOURCE... --index {index_dir}` to rebuild it"
