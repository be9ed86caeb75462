"""Citations that hold, whatever the model wrote: the one place an answer's markers are checked.

1. A marker naming no source the step was given (`[90]` with 26 sources) is not a citation: it is
   removed, and the caller records the numbers.
2. An answer with no marker left (small models often cite nothing) is attributed sentence by
   sentence: each sentence gets the marker of the passage it reads closest to, by MiniLM cosine,
   when that is at least SUPPORT. A sentence no passage supports stays uncited, and so does one that
   says the sources lack something (it reads close to the passages it talks about, and claims nothing
   they say); an answer no passage supports at all is the caller's to drop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from typedrag.abstain import denies_sources
from typedrag.citations import cited_numbers, keep_known
from typedrag.embed import Embedder, default_embedder
from typedrag.result import Source
from typedrag.text import split_sentences

# A sentence is attributed to a passage it reads this close to (MiniLM cosine; a sentence taken from a
# passage scores 0.6-0.9 against it, text on the same subject that says something else 0.2-0.45).
SUPPORT = 0.5
MIN_WORDS = 4  # shorter lines ("Steps:", a label) are layout, not claims


@dataclass(frozen=True)
class Settled:
    """An answer after its citations were checked: its text, and what was changed on the way."""

    text: str
    removed: tuple[int, ...] = ()  # numbers of markers that named no given source
    attributed: int = 0  # sentences given a marker by similarity (the answer cited nothing itself)
    claims: int = 0  # sentences that could carry a citation (when attributed)

    @property
    def supported(self) -> bool:
        """The answer cites a given source, itself or by attribution."""
        return bool(cited_numbers(self.text))

    def notes(self, what: str) -> list[str]:
        """One-line notes for the trace about what was changed."""
        notes = []
        if self.removed:
            shown = ", ".join(f"[{n}]" for n in self.removed[:8]) + (" ..." if len(self.removed) > 8 else "")
            notes.append(
                f"{what}: removed {len(self.removed)} citation markers naming no source it was given ({shown})"
            )
        if self.attributed:
            notes.append(
                f"{what}: cited none of its sources; {self.attributed} of {self.claims} sentences attributed "
                f"to the passage they read closest to (cosine >= {SUPPORT})"
            )
        return notes


def settle(text: str, sources: list[Source], embedder: Embedder | None = None) -> Settled:
    """`text` with only markers of `sources`, attributed sentence by sentence if it then cites none."""
    cleaned, removed = keep_known(text, {source.number for source in sources})
    if cited_numbers(cleaned) or not sources:
        return Settled(cleaned, tuple(removed))
    claims = [s for s in split_sentences(cleaned) if len(s.split()) >= MIN_WORDS and not denies_sources(s)]
    if not claims:
        return Settled(cleaned, tuple(removed))
    embedder = embedder or default_embedder()
    vectors = embedder.embed(claims + [f"{source.title}. {source.text}" for source in sources])
    similarity = vectors[: len(claims)] @ vectors[len(claims) :].T
    best = np.argmax(similarity, axis=1)
    attributed, position, pieces = 0, 0, []
    for index, claim in enumerate(claims):
        at = cleaned.find(claim, position)
        if at < 0:
            continue
        end = at + len(claim)
        pieces.append(cleaned[position:end])
        if similarity[index, best[index]] >= SUPPORT:
            pieces.append(f" [{sources[best[index]].number}]")
            attributed += 1
        position = end
    pieces.append(cleaned[position:])
    return Settled("".join(pieces), tuple(removed), attributed, len(claims))
