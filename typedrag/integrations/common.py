"""What the three framework adapters share, so each of them is only the framework's side: the answer as a
stream of text pieces followed by the finished `AnswerResult`, and typedrag's pipeline over adapted parts.
The rest lives by job, and the adapters import it from there:

- typedrag.integrations.threads: running typedrag's async pipeline from synchronous framework code (and a
  notebook's running loop), with the caller's contextvars carried to the thread it runs in;
- typedrag.integrations.documents: framework documents as typedrag passages, and typedrag sources as
  framework metadata;
- typedrag.integrations.chat: the `ChatModel` scaffold (call records, token counts, streaming, typedrag's own
  structured-output step).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator
from typing import Any

from typedrag.history import Turn
from typedrag.index.base import Retriever
from typedrag.llm.base import ChatModel
from typedrag.pipeline import Pipeline
from typedrag.result import AnswerResult

# ---------------------------------------------------------------- the answer as a stream


def restart_marker(reason: str) -> str:
    """Text streamed when a typed plan fails after part of its answer went out and plain RAG starts over:
    streamed pieces cannot be taken back, so the text says so (as typedrag's OpenAI-compatible server does)."""
    return f"\n\n[{reason}]\n\n"


async def answer_stream(
    pipeline: Pipeline,
    question: str,
    *,
    method: str = "typed",
    forced_type: str | None = None,
    history: list[Turn] | None = None,
    context: contextvars.Context | None = None,
    knowledge: str | None = None,
) -> AsyncIterator[str | AnswerResult]:
    """The answer's text piece by piece as it is written, then the finished `AnswerResult` (last item): the
    pieces concatenate to `AnswerResult.reply`, the answer followed (knowledge = "labelled") by what the model
    added from its own knowledge as a paragraph of its own, "Not from your documents: ...".
    An engine that does not stream gives its whole answer as one piece. Closing the iterator early
    cancels the answer, so no more model calls are spent on it. `history`: the conversation before it.
    The answer runs in a copy of `context` (default: the reader's when it first asks): a caller that hands
    the stream out to be read later, after its own run has ended, passes the context of that run."""
    loop = asyncio.get_running_loop()
    pieces: asyncio.Queue[str | None] = asyncio.Queue()

    def on_event(name: str, data: dict[str, Any]) -> None:  # may be called from a worker thread
        if name == "token":
            loop.call_soon_threadsafe(pieces.put_nowait, data["text"])
        elif name == "restart":
            loop.call_soon_threadsafe(pieces.put_nowait, restart_marker(data["reason"]))
        elif name == "unsourced":
            loop.call_soon_threadsafe(pieces.put_nowait, "\n\n" + data["text"])

    answering = pipeline.answer(
        question, method=method, forced_type=forced_type, on_event=on_event, history=history, knowledge=knowledge
    )
    task = asyncio.create_task(answering, context=context.copy() if context is not None else None)
    task.add_done_callback(lambda _: pieces.put_nowait(None))
    streamed = False
    try:
        while (piece := await pieces.get()) is not None:
            streamed = True
            yield piece
        result = task.result()
        if not streamed and result.reply:
            yield result.reply
        yield result
    finally:
        task.cancel()


# ---------------------------------------------------------------- building the pipeline


def pipeline_for(retriever: Retriever, chat_model: ChatModel | None = None, **options: Any) -> Pipeline:
    """typedrag's pipeline over adapted parts: the LLM engine on `chat_model`, or the offline (extractive)
    engine without one. `options` go to `Pipeline` (classifier, reranker, settings, routes)."""
    if chat_model is None:
        from typedrag.engines.offline import OfflineEngine

        engine: Any = OfflineEngine()
    else:
        from typedrag.engines.llm_engine import LLMEngine

        engine = LLMEngine(chat_model)
    return Pipeline(engine, retriever, **options)
