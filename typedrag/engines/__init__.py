"""Engines perform the LLM roles of Typed-RAG: fill a plan schema, write a grounded text.

`LLMEngine` does it with any chat model; `OfflineEngine` does it with each strategy's offline
planner and extractive selection, so typedrag runs end to end with no model configured.
"""

from typedrag.engines.base import Engine, Extract, Part, PlanTask, Section, Trace, WriteTask

__all__ = ["Engine", "Extract", "Part", "PlanTask", "Section", "Trace", "WriteTask"]
