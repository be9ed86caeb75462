"""MRR and MPR over LINKAGE ranks, per method x question type x source dataset (with marginals).

MRR = mean(1 / rank). MPR = mean((1 - (rank - 1) / |R|) * 100), |R| = that question's number of
references. Failed items (no answer, or no parsable judge verdict) are counted, never averaged in.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

ALL = "all"  # the marginal over sources or types


@dataclass(frozen=True)
class Score:
    """One system's LINKAGE rank for one question (None when the answer or every judge round failed)."""

    question_id: str
    method: str
    source: str
    type: str
    references: int  # |R|
    rank: float | None  # None: failed (see `failure`)
    failure: str | None = None  # "answer" or "judge"


@dataclass(frozen=True)
class Cell:
    """MRR and MPR of one (system, source, type) group, with how many were scored and failed."""

    method: str
    source: str
    type: str
    scored: int
    failures: int
    mrr: float | None
    mpr: float | None


def reciprocal_rank(rank: float) -> float:
    return 1.0 / rank


def percentile_rank(rank: float, references: int) -> float:
    return (1.0 - (rank - 1.0) / references) * 100.0


def cells(scores: list[Score]) -> list[Cell]:
    """One cell per (method, source, type), plus `all` marginals over sources, types and both."""
    groups: dict[tuple[str, str, str], list[Score]] = defaultdict(list)
    for score in scores:
        for source in (score.source, ALL):
            for type_ in (score.type, ALL):
                groups[(score.method, source, type_)].append(score)
    result = []
    for (method, source, type_), items in sorted(groups.items()):
        ranked = [s for s in items if s.rank is not None]
        result.append(
            Cell(
                method=method,
                source=source,
                type=type_,
                scored=len(ranked),
                failures=len(items) - len(ranked),
                mrr=_mean([reciprocal_rank(s.rank) for s in ranked]),
                mpr=_mean([percentile_rank(s.rank, s.references) for s in ranked]),
            )
        )
    return result


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
