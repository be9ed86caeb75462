"""The LLM layer: one async chat-model interface for every role, OpenAI-compatible endpoints behind it."""

from typedrag.llm.base import ChatModel, Completion, LLMCall, LLMError, Message, StructuredOutcome

__all__ = ["ChatModel", "Completion", "LLMCall", "LLMError", "Message", "StructuredOutcome"]
