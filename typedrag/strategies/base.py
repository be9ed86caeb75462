"""The interface every question-type strategy implements, and the steps its flows share.

A strategy is the paper's method for one type as a flow of typed steps (typedrag.steps): it names what to
search, rank, number and write, and typedrag.driver performs it. The helpers here are flows too, used with
`yield from`.
"""

from __future__ import annotations

from collections.abc import Iterable

from typedrag.index.base import distinct
from typedrag.records import ScoredPassage
from typedrag.steps import Depths, Flow, Rank, Strategy, StrategyOutput

__all__ = ["ON_TOPIC", "OFF_TOPIC_MARGIN", "Depths", "Strategy", "StrategyOutput", "assign", "on_topic", "union"]

# A pooled passage counts as on topic when the reranker scores it against the question at least this
# high, or within OFF_TOPIC_MARGIN of the best passage (MiniLM cosines; unrelated text scores ~0-0.2).
ON_TOPIC = 0.35
OFF_TOPIC_MARGIN = 0.25


def union(hit_lists: Iterable[list[ScoredPassage]]) -> list[ScoredPassage]:
    """Every passage once, in the order first seen: a near-duplicate of one seen before (the same page in
    another rendering, typedrag.index.base.distinct) counts as seen."""
    return distinct([hit for hits in hit_lists for hit in hits])


def on_topic(question: str, pool: list[ScoredPassage]) -> Flow[list[ScoredPassage]]:
    """The pooled passages that speak to the question, best first.

    Sub-queries carry cue words ("causes", "risks") that can pull in passages about the cue alone
    (a plumbing "sink" for "Why did the Titanic sink?"); scoring every pooled passage against the
    question itself keeps them out.
    """
    [ranked] = yield Rank([question], pool)
    if not ranked:
        return []
    floor = min(ON_TOPIC, ranked[0].score - OFF_TOPIC_MARGIN)
    return [hit for hit in ranked if hit.score >= floor]


def assign(
    queries: list[str], own_hits: list[list[ScoredPassage]], pool: list[ScoredPassage], k: int
) -> Flow[list[list[ScoredPassage]]]:
    """Give each aspect up to k pooled passages that no other aspect has, taking turns, best match first.

    An aspect prefers its own search results, then any pooled passage, each ranked by the reranker
    against the aspect's query; an aspect left with no passage gets none (the caller drops it).
    """
    if not pool:
        return [[] for _ in queries]
    preferences = []
    for ranked, own in zip((yield Rank(queries, pool)), own_hits):
        mine = {hit.passage_id for hit in own}
        preferences.append(sorted(ranked, key=lambda h: (h.passage_id not in mine, -h.score)))
    taken: set[str] = set()
    assigned: list[list[ScoredPassage]] = [[] for _ in queries]
    for _ in range(k):
        for index, ranked in enumerate(preferences):
            hit = next((h for h in ranked if h.passage_id not in taken), None)
            if hit is not None:
                taken.add(hit.passage_id)
                assigned[index].append(hit)
    return assigned
