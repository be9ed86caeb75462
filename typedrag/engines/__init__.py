"""Engines perform the LLM roles of Typed-RAG: fill a plan schema, write a grounded text.

`LLMEngine` does it with any chat model; `OfflineEngine` does it with planners that read the question
and a reader model that picks the sentences to quote, so typedrag runs end to end with no model configured.
"""

from typedrag.engines.base import Engine, Part, PlanTask, Trace, WriteTask, Written

__all__ = ["Engine", "Part", "PlanTask", "Trace", "WriteTask", "Written"]
