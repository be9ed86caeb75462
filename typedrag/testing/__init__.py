"""Test doubles: in-process fakes (a scripted chat model, list retrievers) and a loopback OpenAI-protocol server."""

from typedrag.index.memory import FunctionRetriever, ListRetriever
from typedrag.testing.fakes import ScriptedCall, ScriptedChatModel, ScriptedReader

__all__ = ["FunctionRetriever", "ListRetriever", "ScriptedCall", "ScriptedChatModel", "ScriptedReader"]
