"""Reciprocal-rank fusion (Cormack et al. 2009), the one home of both of typedrag's fusions and their constants.

- `hybrid` (over `fuse`) ranks one query from an index's BM25 and dense legs, plus a title leg: the same pure
  function for the tantivy index and Milvus, so both rank alike;
- `fuse_searches` merges the rankings of several searches made for one question (a follow-up searched as asked
  and with its subject, a question beside the queries a model wrote for it).

Each keeps its own constant, named by its use, and its own tie-break: changing either changes answers.
"""

from __future__ import annotations

from collections.abc import Sequence

from typedrag.records import ScoredPassage

__all__ = ["HYBRID_DEPTH", "HYBRID_K", "HYBRID_WEIGHTS", "SEARCHES_K", "TITLE_LEG", "fuse", "fuse_searches", "hybrid"]

# The hybrid legs' constant. The usual 60 lets a passage ranked fair-to-middling by both legs outrank the first of
# either; 15 lets a leg's first passages through (chosen on the Debian handbook, where 10 and 15 tie; held on the
# other corpora's key terms, conversations and FAQs: docs/lab/2026-12-03-rrf-15.md).
HYBRID_K = 15
HYBRID_DEPTH = 100  # passages of each leg that the fusion reads (docs/lab/2026-12-02-hybrid.md)
# BM25's, dense's and the title leg's weights in the fused score. Dense at 1.5 found key terms for two more
# questions a corpus, but let the dense leg's nearest passage outrank the one passage holding a rare exact term
# (an identifier, an error code) that only BM25 found; with equal weights they tie and BM25's wins the tie
# (docs/lab/2026-12-02-hybrid.md).
HYBRID_WEIGHTS = (1.0, 1.0, 1.0)
# A third leg: among both legs' passages, those of a document whose title is the query (a comparison's item
# "comet" is the article "Comet", not "Halley's Comet"). Titles merely inside the query lost follow-ups on the demo
# set (docs/lab/2026-12-02-hybrid.md); the exact title is neutral on every question set and fixed 4 of 27 item queries.
TITLE_LEG = True
# The constant for one question's several searches: the usual one (Cormack et al. 2009).
SEARCHES_K = 60


def fuse(
    rankings: Sequence[Sequence[str]], k: int, depth: int | None = None, weights: Sequence[float] | None = None
) -> list[tuple[str, float]]:
    """The `k` ids ranked best over `rankings` (each best first, read to `depth`) by reciprocal-rank fusion,
    each leg's terms times its weight (`HYBRID_WEIGHTS`: BM25's, then dense's): (id, score), ties broken by the
    best single rank, then by the order of the rankings."""
    depth = HYBRID_DEPTH if depth is None else depth
    weights = HYBRID_WEIGHTS if weights is None else weights
    scores: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}
    for leg, ranking in enumerate(rankings):
        weight = weights[leg] if leg < len(weights) else 1.0
        for rank, passage_id in enumerate(ranking[:depth]):
            scores[passage_id] = scores.get(passage_id, 0.0) + weight / (HYBRID_K + rank + 1)
            best[passage_id] = min(best.get(passage_id, (rank, leg)), (rank, leg))
    order = sorted(scores, key=lambda pid: (-scores[pid], best[pid]))[:k]
    return [(pid, round(scores[pid], 6)) for pid in order]


def hybrid(
    query_terms: set[str], bm25: Sequence[tuple[str, str]], near: Sequence[tuple[str, str]], k: int, title_terms
) -> list[tuple[str, float]]:
    """The hybrid ranking of one query from its BM25 and dense rankings ((passage id, title), best first): their
    fusion, with the passages titled as the query is asked as a third leg when `TITLE_LEG` (`title_terms(title)`
    analyses a title as the query was). A pure function of the two rankings, so tantivy and Milvus rank alike."""
    legs = [[pid for pid, _ in bm25[:HYBRID_DEPTH]], [pid for pid, _ in near[:HYBRID_DEPTH]]]
    if TITLE_LEG and query_terms:
        best: dict[str, int] = {}
        for leg in (bm25[:HYBRID_DEPTH], near[:HYBRID_DEPTH]):
            for rank, (pid, title) in enumerate(leg):
                if title and title_terms(title) == query_terms:
                    best[pid] = min(best.get(pid, rank), rank)
        legs.append(sorted(best, key=best.__getitem__))
    return fuse(legs, k)


def fuse_searches(rankings: Sequence[Sequence[ScoredPassage]], k: int) -> list[ScoredPassage]:
    """The `k` passages ranked best over the rankings of one question's searches by reciprocal-rank fusion
    (`SEARCHES_K`), each with its fused score; ties keep the order passages were first found in."""
    scores: dict[str, float] = {}
    first: dict[str, ScoredPassage] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking):
            scores[hit.passage_id] = scores.get(hit.passage_id, 0.0) + 1.0 / (SEARCHES_K + rank + 1)
            first.setdefault(hit.passage_id, hit)
    best = sorted(scores, key=lambda pid: -scores[pid])[:k]
    return [ScoredPassage(first[pid].passage, round(scores[pid], 6)) for pid in best]
