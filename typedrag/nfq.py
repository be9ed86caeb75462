"""The NF-CATS question taxonomy (Bolotova et al., SIGIR 2022) that Typed-RAG routes on."""

from __future__ import annotations

from enum import StrEnum


class NFQType(StrEnum):
    """The eight NF-CATS question types; the six non-factoid ones have a Typed-RAG strategy.

    >>> NFQType.parse("evidence based")
    <NFQType.EVIDENCE_BASED: 'EVIDENCE-BASED'>
    """

    NOT_A_QUESTION = "NOT-A-QUESTION"
    FACTOID = "FACTOID"
    EVIDENCE_BASED = "EVIDENCE-BASED"
    COMPARISON = "COMPARISON"
    EXPERIENCE = "EXPERIENCE"
    REASON = "REASON"
    INSTRUCTION = "INSTRUCTION"
    DEBATE = "DEBATE"

    @classmethod
    def parse(cls, text: str) -> "NFQType":
        """Accept `debate`, `Evidence-based`, `evidence_based`, ... ; raise ValueError listing the choices."""
        key = text.strip().upper().replace("_", "-").replace(" ", "-")
        for member in cls:
            if member.value == key:
                return member
        raise ValueError(f"unknown question type {text!r}; choose one of: {', '.join(m.value.lower() for m in cls)}")


# The six non-factoid types Typed-RAG has a strategy for; the other two fall back to plain RAG.
NON_FACTOID_TYPES = (
    NFQType.EVIDENCE_BASED,
    NFQType.COMPARISON,
    NFQType.EXPERIENCE,
    NFQType.REASON,
    NFQType.INSTRUCTION,
    NFQType.DEBATE,
)
