"""Instruction: sub-queries for steps and methods, answered concurrently, aggregated into ordered steps."""

from __future__ import annotations

from typedrag.nfq import NFQType
from typedrag.strategies.reason import ReasonStrategy


class InstructionStrategy(ReasonStrategy):
    """Same flow as Reason; the plan and aggregation prompts ask for steps instead of causes."""

    name = "instruction"
    kind = NFQType.INSTRUCTION
