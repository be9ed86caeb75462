"""What the three framework adapters share, so each of them is only the framework's side.

- running typedrag's async pipeline from synchronous framework code (and a notebook's running loop);
- the answer as a stream of text pieces followed by the finished `AnswerResult`;
- framework documents as typedrag passages, and typedrag sources as framework metadata;
- the `ChatModel` scaffold: call records, token counts, streaming and typedrag's own structured-output
  step (`typedrag.llm.structured.validated`: validate, one repair round, recorded fallback).

Every hop to another thread carries the caller's contextvars with it: the frameworks keep their current
run there (LangChain's callbacks, LlamaIndex's active span, OpenTelemetry's current span), so typedrag's
inner runs stay nested under the host's run whichever thread they run in.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel

from typedrag import telemetry
from typedrag.errors import LLMError
from typedrag.history import Turn
from typedrag.index.base import Retriever
from typedrag.index.memory import ListRetriever
from typedrag.llm.base import ChatModel, Completion, LLMCall, Message
from typedrag.llm.openai_chat import response_format
from typedrag.llm.structured import Checked, validated, validator
from typedrag.pipeline import Pipeline
from typedrag.records import SECTION_SEPARATOR, Passage, ScoredPassage
from typedrag.redact import redact_text
from typedrag.result import AnswerResult, Source

T = TypeVar("T")

# ---------------------------------------------------------------- running async code from sync code


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to the end from synchronous code: in this thread when no event loop runs here
    (a script, a worker thread), else in a helper thread with its own loop (a notebook, an async caller)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="typedrag-sync") as pool:
        return pool.submit(contextvars.copy_context().run, asyncio.run, coroutine).result()


def iterate_sync(make: Callable[[], AsyncIterator[T]], context: contextvars.Context | None = None) -> Iterator[T]:
    """An async iterator as a plain one: it runs in a helper thread with its own loop, items come through a
    queue as they are made. Leaving the loop early stops the producer (and so the answer being written).
    The thread runs in a copy of `context`, by default the caller's when it first asks for an item."""
    items: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()

    async def pump() -> None:
        async for item in make():
            items.put(("item", item))
            if stop.is_set():
                break

    def work() -> None:
        try:
            asyncio.run(pump())
        except BaseException as error:  # handed to the consumer, raised there
            items.put(("error", error))
        else:
            items.put(("done", None))

    caller = context.copy() if context is not None else contextvars.copy_context()
    threading.Thread(target=caller.run, args=(work,), name="typedrag-stream", daemon=True).start()
    try:
        while True:
            kind, value = items.get()
            if kind == "done":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()


# ---------------------------------------------------------------- the answer as a stream


def restart_marker(reason: str) -> str:
    """Text streamed when a typed plan fails after part of its answer went out and plain RAG starts over:
    streamed pieces cannot be taken back, so the text says so (as typedrag's OpenAI-compatible server does)."""
    return f"\n\n[{reason}]\n\n"


async def answer_stream(
    pipeline: Pipeline, question: str, *, method: str = "typed", forced_type: str | None = None,
    history: list[Turn] | None = None, context: contextvars.Context | None = None,
) -> AsyncIterator[str | AnswerResult]:
    """The answer's text piece by piece as it is written, then the finished `AnswerResult` (last item).
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

    answering = pipeline.answer(question, method=method, forced_type=forced_type, on_event=on_event, history=history)
    task = asyncio.create_task(answering, context=context.copy() if context is not None else None)
    task.add_done_callback(lambda _: pieces.put_nowait(None))
    streamed = False
    try:
        while (piece := await pieces.get()) is not None:
            streamed = True
            yield piece
        result = task.result()
        if not streamed and result.answer:
            yield result.answer
        yield result
    finally:
        task.cancel()


# ---------------------------------------------------------------- documents <-> passages

_DOC_ID_KEYS = ("doc_id", "document_id", "ref_doc_id", "source", "file_path", "file_name", "url")
_TITLE_KEYS = ("title", "file_name", "source", "file_path", "url")


def passage_of(text: str, metadata: Mapping[str, Any], *, node_id: str | None = None, page: int | None = None) -> Passage:
    """A framework document as a typedrag passage. Ids, titles and sections come from the metadata typedrag
    itself writes (`passage_id`, `doc_id`, `title`, `section`), else from the framework's usual keys
    (`source`, `file_name`, ...; markdown splitters' `Header 1`, `Header 2`, ...), else from the document id
    (or, with none, a hash of the text: the same text always gets the same id)."""
    passage_id = _text(metadata.get("passage_id")) or node_id or "doc-" + hashlib.sha1(text.encode()).hexdigest()[:12]
    doc_id = next((_text(metadata.get(key)) for key in _DOC_ID_KEYS if _text(metadata.get(key))), "")
    title = next((_text(metadata.get(key)) for key in _TITLE_KEYS if _text(metadata.get(key))), "")
    if title and title in (_text(metadata.get("source")), _text(metadata.get("file_path"))):
        title = os.path.basename(title.rstrip("/")) or title  # a path or URL: its last part names it
    page_end = metadata.get("page_end")
    return Passage(
        passage_id=passage_id,
        doc_id=doc_id or passage_id.rpartition("#")[0] or passage_id,
        title=title,
        text=text,
        section=_text(metadata.get("section")) or _headers(metadata),
        page=page,
        page_end=page_end if isinstance(page_end, int) and page is not None and page_end > page else None,
    )


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _headers(metadata: Mapping[str, Any]) -> str:
    """"Header 1 › Header 2", as LangChain's MarkdownHeaderTextSplitter names the heading path."""
    keys = sorted((key for key in metadata if isinstance(key, str) and key.startswith("Header ")), key=lambda k: k[7:].zfill(3))
    return SECTION_SEPARATOR.join(_text(metadata[key]) for key in keys if _text(metadata[key]))


def page_number(value: Any, *, zero_based: bool = False) -> int | None:
    """A 1-based page number from a framework's page field (an int, or a label like "12"), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and value >= 0:
        return value + 1 if zero_based else value or None
    return None


def scored(passages: Sequence[tuple[Passage, float | None]]) -> list[ScoredPassage]:
    """Passages best first with their scores; a passage the framework gave no score ranks by position."""
    return [ScoredPassage(p, float(s) if isinstance(s, (int, float)) else 1.0 / (rank + 1)) for rank, (p, s) in enumerate(passages)]


# ---------------------------------------------------------------- a framework's long documents as typedrag passages

WINDOW_WORDS = 100  # typedrag's own passage size (`typedrag index --passage-words`), which its steps are built for


def windows_of(passage: Passage) -> tuple[Passage, ...]:
    """A framework document longer than one of typedrag's passages, cut as typedrag's index cuts a document
    (`typedrag.corpus.chunker`): ~100-word windows ending at sentence ends, ids `<id>#<n>`, each with the
    document's title, section and page. A document that fits one passage is itself."""
    if len(passage.text.split()) <= WINDOW_WORDS * 3 // 2:  # the chunker's longest passage
        return (passage,)
    return _window_index(passage)[0]


@lru_cache(maxsize=32)
def _window_index(passage: Passage) -> tuple[tuple[Passage, ...], ListRetriever]:
    """The document's windows and a BM25 index over them, kept for the next search (a typed plan searches
    several times, and a framework returns the same document to each search)."""
    from typedrag.corpus.chunker import iter_passages
    from typedrag.records import Document

    cut = iter_passages(Document(doc_id=passage.passage_id, title=passage.title, text=passage.text), WINDOW_WORDS)
    windows = tuple(replace(w, doc_id=passage.doc_id, section=passage.section, page=passage.page, page_end=passage.page_end)
                    for w in cut)
    return windows, ListRetriever(windows)


def best_windows(query: str, found: Sequence[tuple[Passage, float | None]], k: int) -> list[ScoredPassage]:
    """The framework's documents for `query` (best first, with their scores) as at most `k` passages: a long
    document gives its windows that BM25 ranks best for the query (its share of `k`, in the document's place),
    so an answer reads passages of typedrag's size, never a whole long document (valgrind's 212 KB NEWS made
    the offline engine embed 4,568 sentences for one answer)."""
    found = list(found)
    if all(len(windows_of(p)) == 1 for p, _ in found):
        return scored(found[:k])
    share = -(-k // max(1, len(found)))  # ceil: a single long document gives all k
    picked: list[tuple[Passage, float | None]] = []
    for passage, score in found:
        windows = windows_of(passage)
        if len(windows) > 1:
            best = [hit.passage for hit in _window_index(passage)[1].search(query, share)] or list(windows[:1])
            picked += [(window, None if score is None else score) for window in best]
        else:
            picked.append((passage, score))
    return scored(picked[:k])


def source_metadata(source: Source) -> dict[str, Any]:
    """What a typedrag source carries into a framework document's metadata (the frameworks add their page key)."""
    metadata: dict[str, Any] = {"passage_id": source.passage_id, "title": source.title, "section": source.section}
    doc_id = source.passage_id.rpartition("#")[0]  # typedrag's own ids are "<doc_id>#<position>"
    if doc_id:
        metadata["doc_id"] = doc_id
    metadata["source_number"] = source.number  # the [n] the answer cites it by
    return metadata


class ThreadedSearch:
    """`search_many` for an adapter: the queries run side by side, as typedrag's own retrievers do."""

    name: str

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:  # each adapter has its own
        raise NotImplementedError

    def search_many(self, queries: list[str], k: int = 10) -> list[list[ScoredPassage]]:
        if len(queries) <= 1:
            return [self.search(q, k) for q in queries]
        # One copy of the caller's context per query: a context can be entered by one thread at a time.
        contexts = [contextvars.copy_context() for _ in queries]
        with ThreadPoolExecutor(max_workers=min(4, len(queries)), thread_name_prefix="typedrag-search") as pool:
            return list(pool.map(lambda context, q: context.run(self.search, q, k), contexts, queries))


def sync_or_async(call: Callable[[], T], acall: Callable[[], Coroutine[Any, Any, T]] | None) -> T:
    """The framework's synchronous call; when it has only an async one (`NotImplementedError`), that one run
    to the end here (typedrag calls retrievers from worker threads, where no loop runs)."""
    try:
        return call()
    except NotImplementedError:
        if acall is None:
            raise
        return run_sync(acall())


# ---------------------------------------------------------------- chat models


@dataclass
class Reply:
    """One reply from a framework chat model, with what it said about itself (zeros/None when it says nothing)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None


_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "response format", "grammar")


class FrameworkChatModel:
    """A typedrag `ChatModel` over a framework's chat model. A subclass sends one request (`_send`); this
    class keeps the call record (requests, latency, tokens, finish reason), streams plain replies to
    `on_text`, and runs typedrag's structured-output step: the tolerant parser and pydantic validation, ONE
    repair round, and a recorded FAILED outcome the strategy falls back on.

    The framework's own structured output is used only where it is exact: its OpenAI client, which sends the
    schema as `response_format` (the server then decodes only schema-valid JSON). If the server refuses it,
    the adapter asks in plain text from then on. The framework model's own settings (temperature, token limit)
    are left as you configured them."""

    name: str

    def __init__(self, *, structured_output: bool) -> None:
        self.structured_output = structured_output

    async def _send(self, messages: list[Message], *, role: str, schema_format: dict[str, Any] | None,
                    on_text: Callable[[str], None] | None) -> Reply:
        raise NotImplementedError

    def _strict_schemas(self) -> bool:
        """Whether the endpoint is OpenAI itself, which enforces a schema only in strict mode."""
        return False

    async def complete(
        self,
        messages: list[Message],
        *,
        role: str,
        schema: type[BaseModel] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        accept: Callable[[str], bool] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        """One completion; `accept` only matters to a cache, and these adapters keep none."""
        call = LLMCall(role=role, engine=self.name, requests=0)
        framework, _, model = self.name.partition(":")
        with telemetry.llm_call(
            call, model=model or self.name, provider=framework, messages=messages, max_tokens=max_tokens,
            temperature=temperature, structured=schema is not None, streaming=on_text is not None,
        ) as traced:
            if schema is None:
                text = await self._request(call, messages, role, None, on_text)
                if not text.strip():
                    raise LLMError(f"{self.name} returned an empty reply")
                traced.reply(text)
                return Completion(text=text, call=call)
            check = validator(schema)

            async def ask(turns: list[Message]) -> tuple[str, Checked]:
                text = await self._request(call, turns, role, schema, None)
                return text, check(text)

            parsed, text = await validated(ask, messages, schema, max_tokens, call)
            traced.reply(text)
            return Completion(text=text, parsed=parsed, call=call)

    async def _request(self, call: LLMCall, messages: list[Message], role: str, schema: type[BaseModel] | None,
                       on_text: Callable[[str], None] | None) -> str:
        schema_format = response_format(schema, strict=self._strict_schemas()) if schema is not None and self.structured_output else None
        call.requests += 1
        started = time.perf_counter()
        try:
            reply = await self._send(messages, role=role, schema_format=schema_format, on_text=on_text)
        except LLMError:
            raise
        except Exception as error:
            if schema_format is not None and any(word in str(error).lower() for word in _FORMAT_WORDS):
                self.structured_output = False  # the endpoint takes no response_format: plain text from now on
                return await self._request(call, messages, role, schema, on_text)
            raise LLMError(f"{self.name} failed: {type(error).__name__}: {redact_text(str(error))[:300]}") from error
        finally:
            call.latency_ms = round(call.latency_ms + (time.perf_counter() - started) * 1000, 1)
        call.prompt_tokens += reply.prompt_tokens
        call.completion_tokens += reply.completion_tokens
        call.finish_reason = reply.finish_reason
        return reply.text


def is_openai_endpoint(base_url: str | None) -> bool:
    """True for OpenAI's own API (no base URL set means it too)."""
    if not base_url:
        return True
    try:
        return urlsplit(base_url).hostname == "api.openai.com"
    except ValueError:
        return False


def count(value: Any) -> int:
    """A token count a framework reported, or 0 for none or nonsense."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


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
