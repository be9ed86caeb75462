"""Every number the offline engine's choices turn on, in one frozen object.

A benchmark sweeps them by passing its own `OfflineSettings` to `OfflineEngine(settings=...)`,
never by editing code; what each value was measured against is in docs/lab/2026-12-01-offline-settings.md and the notes after it. The reader's own
bars (when a sentence answers, when it is on topic) ship with its model (typedrag/reader/model).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OfflineSettings:
    """How many sentences the offline engine quotes, and which it considers."""

    answer_sentences: int = 4  # plain RAG quotes at most this many sentences that answer
    lead_sentences: int = 4  # ...and on-topic ones after them up to this many (docs/lab/2026-12-02-reader-model.md)
    # ...taken only from the passages an answering sentence is quoted from: the answer's own context rather than
    # another passage's sentence on the same topic. A blind reader preferred it 24-11 on 38 changed answers of six
    # manuals, noise 52 against 73; key terms 100 against 101 of 251 (docs/lab/2026-12-07-filler-context.md).
    fill_from_answering_passages: bool = True
    nearest_sentences: int = 2  # ...or, when none answers, this many on-topic ones, marked as the nearest
    added_sentences: int = 2  # a typed answer adds at most this many sentences of its type's role
    added_bar: float = 0.40  # ...each read as answering with at least this chance (docs/lab/2026-12-03-faq-entries.md)
    list_steps: int = 8  # a document's own numbered list quoted as the steps: at most this many
    # A typed answer's planned aspect may add, from its own passages, this many sentences the reader reads as
    # answering the question (at its bar, and at least `aspect_bar`), whatever role it reads, when it reads them as
    # likelier to answer than every sentence plain RAG's answer quotes: what the plan's searches found better (issue
    # 55). Off (0): on two manuals held out, each of the 3 answers it changed gained only a sentence a blind reader
    # counted as noise (docs/lab/2026-12-06-held-out-borg-sqlalchemy.md).
    aspect_sentences: int = 0
    aspect_bar: float = 0.0
    # A typed answer also adds sentences by the role the reader reads (causes, advice, for and against, a point
    # about each compared item, steps the document did not number). Off: the reader's role is right about half
    # the time held out, and a blind reader preferred plain RAG where they were added (docs/lab/2026-12-03-typed-never-loses.md).
    # A procedure the document numbered itself is structure, not a reading, and is added either way.
    role_additions: bool = False
    min_words: int = 4  # shorter pieces are labels and fragments
    max_words: int = 70  # longer ones are run-ons


DEFAULT = OfflineSettings()
