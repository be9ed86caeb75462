"""Framework documents as typedrag passages, and typedrag sources as framework metadata: ids, titles,
sections and pages from the keys the frameworks use, and a framework's long documents cut into passages of
typedrag's size."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from typedrag.index.memory import ListRetriever
from typedrag.records import SECTION_SEPARATOR, Passage, ScoredPassage
from typedrag.result import Source

_DOC_ID_KEYS = ("doc_id", "document_id", "ref_doc_id", "source", "file_path", "file_name", "url")
_TITLE_KEYS = ("title", "file_name", "source", "file_path", "url")


def passage_of(
    text: str, metadata: Mapping[str, Any], *, node_id: str | None = None, page: int | None = None
) -> Passage:
    """A framework document as a typedrag passage. Ids, titles and sections come from the metadata typedrag
    itself writes (`passage_id`, `doc_id`, `title`, `section`), else from the framework's usual keys
    (`source`, `file_name`, ...; markdown splitters' `Header 1`, `Header 2`, ...), else from the document id
    (or, with none, a hash of the text: the same text always gets the same id)."""
    passage_id = _text(metadata.get("passage_id")) or node_id or "doc-" + hashlib.sha1(text.encode()).hexdigest()[:12]
    doc_id = next((_text(metadata.get(key)) for key in _DOC_ID_KEYS if _text(metadata.get(key))), "")
    title = next((_text(metadata.get(key)) for key in _TITLE_KEYS if _text(metadata.get(key))), "")
    if title and title in (_text(metadata.get("source")), _text(metadata.get("file_path"))):
        title = os.path.basename(title.rstrip("/")) or title  # a path or URL: its last part names it
    page_end = metadata.get("page_end")
    return Passage(
        passage_id=passage_id,
        doc_id=doc_id or passage_id.rpartition("#")[0] or passage_id,
        title=title,
        text=text,
        section=_text(metadata.get("section")) or _headers(metadata),
        page=page,
        page_end=page_end if isinstance(page_end, int) and page is not None and page_end > page else None,
    )


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _headers(metadata: Mapping[str, Any]) -> str:
    """ "Header 1 › Header 2", as LangChain's MarkdownHeaderTextSplitter names the heading path."""
    keys = sorted(
        (key for key in metadata if isinstance(key, str) and key.startswith("Header ")), key=lambda k: k[7:].zfill(3)
    )
    return SECTION_SEPARATOR.join(_text(metadata[key]) for key in keys if _text(metadata[key]))


def page_number(value: Any, *, zero_based: bool = False) -> int | None:
    """A 1-based page number from a framework's page field (an int, or a label like "12"), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and value >= 0:
        return value + 1 if zero_based else value or None
    return None


def scored(passages: Sequence[tuple[Passage, float | None]]) -> list[ScoredPassage]:
    """Passages best first with their scores; a passage the framework gave no score ranks by position."""
    return [
        ScoredPassage(p, float(s) if isinstance(s, (int, float)) else 1.0 / (rank + 1))
        for rank, (p, s) in enumerate(passages)
    ]


# ---------------------------------------------------------------- a framework's long documents as typedrag passages

WINDOW_WORDS = 100  # typedrag's own passage size (`typedrag index --passage-words`), which its steps are built for


def windows_of(passage: Passage) -> tuple[Passage, ...]:
    """A framework document longer than one of typedrag's passages, cut as typedrag's index cuts a document
    (`typedrag.corpus.chunker`): ~100-word windows ending at sentence ends, ids `<id>#<n>`, each with the
    document's title, section and page. A document that fits one passage is itself."""
    if len(passage.text.split()) <= WINDOW_WORDS * 3 // 2:  # the chunker's longest passage
        return (passage,)
    return _window_index(passage)[0]


@lru_cache(maxsize=32)
def _window_index(passage: Passage) -> tuple[tuple[Passage, ...], ListRetriever]:
    """The document's windows and a BM25 index over them, kept for the next search (a typed plan searches
    several times, and a framework returns the same document to each search)."""
    from typedrag.corpus.chunker import iter_passages
    from typedrag.records import Document

    cut = iter_passages(Document(doc_id=passage.passage_id, title=passage.title, text=passage.text), WINDOW_WORDS)
    windows = tuple(
        replace(w, doc_id=passage.doc_id, section=passage.section, page=passage.page, page_end=passage.page_end)
        for w in cut
    )
    return windows, ListRetriever(windows)


def best_windows(query: str, found: Sequence[tuple[Passage, float | None]], k: int) -> list[ScoredPassage]:
    """The framework's documents for `query` (best first, with their scores) as at most `k` passages: a long
    document gives its windows that BM25 ranks best for the query (its share of `k`, in the document's place),
    so an answer reads passages of typedrag's size, never a whole long document (valgrind's 212 KB NEWS made
    the offline engine embed 4,568 sentences for one answer)."""
    found = list(found)
    if all(len(windows_of(p)) == 1 for p, _ in found):
        return scored(found[:k])
    share = -(-k // max(1, len(found)))  # ceil: a single long document gives all k
    picked: list[tuple[Passage, float | None]] = []
    for passage, score in found:
        windows = windows_of(passage)
        if len(windows) > 1:
            best = [hit.passage for hit in _window_index(passage)[1].search(query, share)] or list(windows[:1])
            picked += [(window, None if score is None else score) for window in best]
        else:
            picked.append((passage, score))
    return scored(picked[:k])


def source_metadata(source: Source) -> dict[str, Any]:
    """What a typedrag source carries into a framework document's metadata (the frameworks add their page key)."""
    metadata: dict[str, Any] = {"passage_id": source.passage_id, "title": source.title, "section": source.section}
    doc_id = source.passage_id.rpartition("#")[0]  # typedrag's own ids are "<doc_id>#<position>"
    if doc_id:
        metadata["doc_id"] = doc_id
    metadata["source_number"] = source.number  # the [n] the answer cites it by
    return metadata
