"""Engines perform the LLM roles of Typed-RAG: planning, answering, aggregating, mediating.

`LLMEngine` does it with any chat model; `OfflineEngine` does it with heuristics and extractive
selection so typedrag runs end to end with no model configured.
"""

from typedrag.engines.base import AnswerRequest, AnswerStyle, Engine, PartialAnswer, Trace

__all__ = ["AnswerRequest", "AnswerStyle", "Engine", "PartialAnswer", "Trace"]
