"""What Reason, Instruction and Debate share offline: an aspect quotes sentences of its own shape only, and
the combined answer is plain RAG's lead (the overview, quoted whole) plus the aspects' best such points."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from typedrag.engines.base import Extract, Section, WriteTask
from typedrag.engines.offline.settings import OfflineSettings

OVERVIEW = "overview"  # the aspect that answers the question itself: plain RAG's answer


@dataclass(frozen=True)
class Facet:
    """An aspect the offline planner asks for: the word that ends its sub-query (or its name), the short
    label it shows under, and the shape its sentences must have."""

    word: str
    label: str
    shape: re.Pattern[str]


def facet_of(part_label: str, query: str, facets: tuple[Facet, ...]) -> Facet | None:
    """The facet an aspect stands for, by its name or the last word of its query (None: an aspect some
    other planner wrote, which gets no label and no shape)."""
    for facet in facets:
        if part_label.casefold() == facet.word or query.casefold().endswith(f" {facet.word}"):
            return facet
    return None


def aspect(task: WriteTask, settings: OfflineSettings, facets: tuple[Facet, ...]) -> Extract:
    """One aspect's answer: its passages' sentences of the aspect's shape, nearest the aspect first; none if it has none."""
    question, label, query = task.values["question"], task.values["focus"], task.values.get("query", task.values["focus"])
    facet = facet_of(label, query, facets)
    return Extract(
        (
            Section(
                query=f"{query} {question}",
                sentences=settings.added_sentences,
                shape=facet.shape if facet else None,
                shape_only=facet is not None,
                max_words=settings.added_max_words,
            ),
        )
    )


def combined(
    task: WriteTask,
    settings: OfflineSettings,
    facets: tuple[Facet, ...],
    *,
    layout: Literal["bullets", "numbered"] = "bullets",
    header: str = "",
    header_needs: tuple[str, ...] = (),
    footer: str = "",
    in_order: bool = False,
) -> Extract:
    """The overview quoted whole (plain RAG's answer), then up to `added_sentences` points from the other
    aspects, one each from the first ones that have a sentence of their shape."""
    question = task.values["question"]
    sections = [Section(query=question, groups=frozenset({i}), verbatim=True) for i, p in enumerate(task.parts) if p.label == OVERVIEW]
    others = [(i, p) for i, p in enumerate(task.parts) if p.label != OVERVIEW]
    each = settings.added_sentences if len(others) == 1 else 1
    for index, part in others[: settings.added_sentences]:
        facet = facet_of(part.label, part.query, facets)
        sections.append(
            Section(
                query=f"{part.query} {question}",
                label=facet.label if facet else part.label,
                sentences=each,
                shape=facet.shape if facet else None,
                shape_only=facet is not None,
                groups=frozenset({index}),
                optional=True,
                in_order=in_order,
                max_words=settings.added_max_words,
            )
        )
    return Extract(tuple(sections), layout=layout, header=header, header_needs=header_needs, footer=footer)
