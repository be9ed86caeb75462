"""Every number the offline engine's choices turn on, in one frozen object.

A benchmark sweeps them by passing its own `OfflineSettings` to `OfflineEngine(settings=...)`,
never by editing code; what each value was measured against is in BENCHMARKS.md ("Offline engine
settings"), together with the corpus it was tuned on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OfflineSettings:
    """How the offline engine picks and lays out sentences."""

    # Sentences quoted: plain RAG's answer (and so every typed answer's lead), and what each type adds to it.
    answer_sentences: int = 4
    added_sentences: int = 2  # a typed answer adds at most this many sentences of its own shape to the lead
    added_max_words: int = 30  # an added point is one short sentence, not a run-on
    min_words: int = 5  # shorter fragments and longer run-ons read badly out of context
    max_words: int = 70
    # Relevance of a sentence to a section's query: MiniLM cosine plus the weight of the query's rare words it holds.
    lexical_weight: float = 1.0
    min_relevance: float = 0.25  # below this a sentence is off topic: better to say less
    # The meaning must match too, relative to the best sentence (a question the embedder cannot read keeps
    # the passages BM25 found): the bar is min(min_similarity, best - similarity_margin).
    min_similarity: float = 0.1
    similarity_margin: float = 0.25
    subject_bonus: float = 0.6  # a sentence from the article the query names ("Black Death", not "Death")
    cue_bonus: float = 0.1  # a sentence of the section's shape outranks a slightly closer one
    near_duplicate: float = 0.9  # cosine above which two sentences say the same
    diversity: float = 0.3  # maximal marginal relevance: how much a sentence like one already chosen loses


DEFAULT = OfflineSettings()
