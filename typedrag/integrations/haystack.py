"""typedrag and Haystack, both ways (`pip install 'typedrag[haystack]'`).

Their parts inside typedrag:
- `HaystackRetriever`: any Haystack retriever component that takes a `query` string (BM25, a hybrid
  retriever, a `SuperComponent` that embeds then retrieves...) as a typedrag `Retriever`;
- `HaystackChatModel`: any Haystack chat generator as a typedrag `ChatModel`.

typedrag inside their pipelines:
- `TypedragRetriever`, a retriever component over typedrag's own index (`typedrag index ... --index DIR`):
  `query` (and `top_k`) in, `documents` out, each with its passage id, `meta["doc_id"]`, title, section, page;
- `TypedRAG`, a component: `query` (and optionally `documents` from your retriever, and `history`, the
  conversation before it as Haystack `ChatMessage`s) in; `answers`
  (one `GeneratedAnswer`), `documents` (the sources, in citation order) and `trace` (the whole result as
  a dict) out. With `documents` it plans over those; without, over its own `retriever`. `run_async` for
  `AsyncPipeline`, `streaming_callback` for the answer tokens, `to_dict`/`from_dict` for YAML pipelines.

Documents and passages map both ways: the document id is the passage id, `meta["doc_id"]`, `["title"]`,
`["section"]` and Haystack's `page_number` the rest; `score` is the source's score.

Chunks as Haystack's `DocumentSplitter` cuts them (by default 200 words at a time, `split_by="word"`, so its cuts
fall mid-sentence) are made whole where they can be before typedrag reads them (`sentence_aligned`): adjacent
chunks of one document are joined, and the half sentence a chunk begins or ends with is left out, so an answer
never quotes half a sentence. Split by sentence (`split_by="sentence"` or `"period"`) to keep every sentence.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from typedrag.extras import require

require("haystack", "haystack", "the Haystack integration")

from haystack import Document, GeneratedAnswer, component, default_from_dict, default_to_dict  # noqa: E402
from haystack.core.serialization import component_to_dict  # noqa: E402
from haystack.dataclasses import ChatMessage, ChatRole, ComponentInfo, StreamingChunk  # noqa: E402
from haystack.utils import deserialize_callable, serialize_callable  # noqa: E402
from haystack.utils.deserialization import deserialize_component_inplace  # noqa: E402

from typedrag.integrations.chat import FrameworkChatModel, Reply, count, is_openai_endpoint  # noqa: E402
from typedrag.integrations.common import answer_stream, pipeline_for  # noqa: E402
from typedrag.integrations.documents import best_windows, page_number, passage_of, source_metadata, windows_of  # noqa: E402
from typedrag.integrations.threads import ThreadedSearch, iterate_sync, sync_or_async  # noqa: E402
from typedrag.history import Turn  # noqa: E402
from typedrag.index.base import Retriever  # noqa: E402
from typedrag.index.memory import ListRetriever  # noqa: E402
from typedrag.llm.base import ChatModel, Message  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.records import Passage, ScoredPassage  # noqa: E402
from typedrag.result import AnswerResult, Source  # noqa: E402
from typedrag.text import split_sentences  # noqa: E402

__all__ = [
    "HaystackChatModel",
    "HaystackRetriever",
    "TypedRAG",
    "TypedragRetriever",
    "document_of",
    "passage_of_document",
    "sentence_aligned",
]

StreamingCallback = Callable[[StreamingChunk], Any]  # sync, or async for run_async (Haystack's convention)


# ---------------------------------------------------------------- documents <-> passages


def passage_of_document(document: Document) -> Passage:
    """A Haystack document as a typedrag passage (see `typedrag.integrations.documents.passage_of`)."""
    meta = document.meta or {}
    return passage_of(document.content or "", meta, node_id=document.id, page=page_number(meta.get("page_number")))


def document_of(source: Source) -> Document:
    """A typedrag source as a Haystack document; `passage_of_document` reads it back to the same passage."""
    meta: dict[str, Any] = source_metadata(source)
    if source.page is not None:
        meta["page_number"] = source.page
    if source.page_end is not None:
        meta["page_end"] = source.page_end
    return Document(id=source.passage_id, content=source.text, meta=meta, score=source.score)


def sentence_aligned(documents: list[Document]) -> list[Document]:
    """`documents` with DocumentSplitter's chunks (those whose meta has its `source_id` and `split_idx_start`) made
    whole where they can be: chunks of one source that touch or overlap are joined into one, and a chunk that
    begins inside its document (or ends without a sentence's end) loses the half sentence at that edge; one left
    with no whole sentence is left out. Other documents are kept as they are; a document's runs, in its order, take
    the place of its best-ranked chunk (the first given)."""
    runs: dict[str, list[Document]] = {}
    order: list[Document | str] = []
    for document in documents:
        meta = document.meta or {}
        source, start = meta.get("source_id"), meta.get("split_idx_start")
        if not isinstance(source, str) or not isinstance(start, int) or not document.content:
            order.append(document)
            continue
        if source not in runs:
            runs[source] = []
            order.append(source)
        runs[source].append(document)
    joined = {
        source: [d for run in _touching(chunks) if (d := _whole_sentences(run)) is not None]
        for source, chunks in runs.items()
    }
    return [d for item in order for d in (joined[item] if isinstance(item, str) else [item])]


def _touching(chunks: list[Document]) -> list[list[Document]]:
    """Chunks of one source in document order, in runs of chunks that touch or overlap."""
    runs: list[list[Document]] = []
    for chunk in sorted(chunks, key=lambda d: d.meta["split_idx_start"]):
        last = runs[-1][-1] if runs else None
        if last is not None and chunk.meta["split_idx_start"] <= last.meta["split_idx_start"] + len(last.content or ""):
            runs[-1].append(chunk)
        else:
            runs.append([chunk])
    return runs


def _whole_sentences(run: list[Document]) -> Document | None:
    """One run of touching chunks as one document, without the half sentences at its edges (None: it holds none
    whole). A chunk that begins inside its document is taken to begin inside a sentence, as a cut by words does."""
    first, start = run[0], run[0].meta["split_idx_start"]
    text = first.content or ""
    for chunk in run[1:]:
        text += (chunk.content or "")[start + len(text) - chunk.meta["split_idx_start"] :]
    sentences = [s for s in split_sentences(text) if s.strip()]
    if start > 0 and sentences:  # the piece before the first sentence end is the tail of one cut off
        sentences = sentences[1:]
    if sentences and not _SENTENCE_END.search(sentences[-1]):  # ends inside a sentence
        sentences = sentences[:-1]
    if not sentences:
        return None
    whole = text[text.find(sentences[0]) : text.rfind(sentences[-1]) + len(sentences[-1])]
    best = max((d.score for d in run if d.score is not None), default=None)
    return Document(id=first.id, content=whole, meta=dict(first.meta), score=best)


_SENTENCE_END = re.compile(r"[.!?:;][\]\"')»”’]*\s*$")


# ---------------------------------------------------------------- their retriever inside typedrag


class HaystackRetriever(ThreadedSearch):
    """A Haystack retriever component as a typedrag `Retriever`: `run(query=..., top_k=k)["documents"]`.

    Scores are the documents' own (by rank when a retriever gives none). A component whose `run` raises
    `NotImplementedError` runs through `run_async`. `top_k` names the component's own result-count input.
    """

    def __init__(self, retriever: Any, *, top_k: str = "top_k", name: str | None = None) -> None:
        if not hasattr(retriever, "run"):
            raise TypeError(f"{type(retriever).__name__} is not a Haystack component (it has no run method)")
        self.retriever, self.top_k = retriever, top_k
        self.name = name or f"haystack:{type(retriever).__name__}"

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        if k <= 0:
            return []
        inputs = {"query": query, self.top_k: k}
        run_async = getattr(self.retriever, "run_async", None)
        found = sync_or_async(
            lambda: self.retriever.run(**inputs), (lambda: run_async(**inputs)) if run_async else None
        )
        documents: list[Document] = sentence_aligned(found["documents"][:k])
        return best_windows(query, [(passage_of_document(d), d.score) for d in documents], k)


# ---------------------------------------------------------------- their chat generator inside typedrag


class HaystackChatModel(FrameworkChatModel):
    """A Haystack chat generator as a typedrag `ChatModel`: `LLMEngine(HaystackChatModel(OpenAIChatGenerator()))`.

    Calls go through `run_async` when the generator has it (else `run` in a worker thread), with a
    `streaming_callback` when typedrag streams the answer. Token counts and the finish reason come from the
    reply's `meta`. `structured_output` (default: on for `OpenAIChatGenerator` and its Azure sibling) sends
    plan schemas as `generation_kwargs["response_format"]`.
    """

    def __init__(self, generator: Any, *, name: str | None = None, structured_output: bool | None = None) -> None:
        openai_client = type(generator).__name__ in ("OpenAIChatGenerator", "AzureOpenAIChatGenerator")
        super().__init__(structured_output=openai_client if structured_output is None else structured_output)
        self.generator = generator
        model = getattr(generator, "model", None) or getattr(generator, "azure_deployment", None)
        self.name = name or f"haystack:{model if isinstance(model, str) else type(generator).__name__}"
        self._openai_api = type(generator).__name__ == "OpenAIChatGenerator" and is_openai_endpoint(
            getattr(generator, "api_base_url", None)
        )

    def _strict_schemas(self) -> bool:
        return self._openai_api

    async def _send(
        self,
        messages: list[Message],
        *,
        role: str,
        schema_format: dict[str, Any] | None,
        on_text: Callable[[str], None] | None,
    ) -> Reply:
        turns = [_message(m) for m in messages]
        inputs: dict[str, Any] = {"messages": turns}
        if schema_format:
            inputs["generation_kwargs"] = {"response_format": schema_format}
        run_async = getattr(self.generator, "run_async", None)
        if inspect.iscoroutinefunction(run_async):
            if on_text is not None:

                async def hear(chunk: StreamingChunk) -> None:
                    if chunk.content:
                        on_text(chunk.content)

                inputs["streaming_callback"] = hear
            output = await run_async(**inputs)
        else:
            if on_text is not None:
                loop = asyncio.get_running_loop()

                def hear_from_thread(
                    chunk: StreamingChunk,
                ) -> None:  # pieces reach `on_text` in the loop's thread, in order
                    if chunk.content:
                        loop.call_soon_threadsafe(on_text, chunk.content)

                inputs["streaming_callback"] = hear_from_thread
            output = await asyncio.to_thread(lambda: self.generator.run(**inputs))
        replies: list[ChatMessage] = output.get("replies") or []
        if not replies:
            return Reply(text="")
        meta = replies[0].meta or {}
        usage = meta.get("usage") or {}
        finish = meta.get("finish_reason")
        return Reply(
            text=replies[0].text or "",
            prompt_tokens=count(usage.get("prompt_tokens")),
            completion_tokens=count(usage.get("completion_tokens")),
            finish_reason=finish if isinstance(finish, str) else None,
        )


def _message(message: Message) -> ChatMessage:
    makers = {"system": ChatMessage.from_system, "user": ChatMessage.from_user, "assistant": ChatMessage.from_assistant}
    return makers.get(message["role"], ChatMessage.from_user)(message["content"])


# ---------------------------------------------------------------- typedrag inside their pipelines


@component
class TypedragRetriever:
    """typedrag's own index as a Haystack retriever component: `TypedragRetriever(index="my-index")` searches the
    index `typedrag index ... --index my-index` built (its hybrid search, or `mode`: bm25, dense, hybrid) and
    gives its passages as Documents: id the passage id, `meta` its `doc_id`, `title`, `section`, `page_number`.
    `index` may also be an open typedrag retriever (`open_retriever(...)`, a Milvus one, a `ListRetriever`)."""

    def __init__(
        self, index: str | os.PathLike | Retriever = "typedrag-index", top_k: int = 10, mode: str | None = None
    ) -> None:
        self.index, self.top_k, self.mode = index, top_k, mode
        self.retriever: Retriever | None = None if isinstance(index, (str, os.PathLike)) else index

    def warm_up(self) -> None:
        """Open the index (once)."""
        if self.retriever is None:
            from typedrag.index.tantivy import open_retriever

            self.retriever = open_retriever(Path(self.index), self.mode)  # type: ignore[arg-type]  # a path here

    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int | None = None) -> dict[str, list[Document]]:
        """The index's best `top_k` passages for `query`, best first, with their scores."""
        self.warm_up()
        assert self.retriever is not None
        hits = self.retriever.search(query, self.top_k if top_k is None else top_k)
        return {"documents": [_document_of_hit(hit) for hit in hits]}

    def to_dict(self) -> dict[str, Any]:
        index = self.index if isinstance(self.index, (str, os.PathLike)) else getattr(self.index, "index_dir", None)
        if index is None:
            raise TypeError(f"TypedragRetriever over a {type(self.index).__name__} cannot be saved: give it index=PATH")
        return default_to_dict(self, index=str(index), top_k=self.top_k, mode=self.mode)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TypedragRetriever":
        return default_from_dict(cls, data)


def _document_of_hit(hit: ScoredPassage) -> Document:
    document = document_of(Source.of(1, hit))
    document.meta.pop("source_number", None)  # a search's result, not a source an answer cites
    document.meta["doc_id"] = hit.passage.doc_id
    return document


def _is_typedrag_retriever(retriever: Any) -> bool:
    """A typedrag `Retriever` (open_retriever's, a ListRetriever...), not a Haystack component."""
    return not hasattr(retriever, "run") and callable(getattr(retriever, "search", None))


@component
class TypedRAG:
    """Typed-RAG as a Haystack component: in place of a generator (and its prompt builder) after your
    retriever, or on its own with a `retriever` of its own.

    `chat_generator` writes the plans and answers (none: typedrag's offline, extractive engine); `retriever`
    is searched for each sub-query when `run` gets no `documents`: a Haystack retriever component, or typedrag's
    own index (`TypedragRetriever(index=...)`, or a retriever `open_retriever(...)` gave). With `documents`, the
    plans search those (BM25 over the given documents), so they come from your retriever and its filters.
    `knowledge="labelled"` lets the generator add what it knows where the documents do not cover the question,
    apart: the answer ends with it, "Not from your documents: ...", and its `meta["unsourced"]` lists those sentences.
    """

    def __init__(
        self,
        chat_generator: Any = None,
        retriever: Any = None,
        *,
        method: str = "typed",
        top_k: int = 5,
        streaming_callback: StreamingCallback | None = None,
        knowledge: Literal["documents", "labelled"] = "documents",
    ) -> None:
        if _is_typedrag_retriever(retriever):
            retriever = TypedragRetriever(index=retriever)
        self.chat_generator, self.retriever = chat_generator, retriever
        self.method, self.top_k, self.streaming_callback = method, top_k, streaming_callback
        self.knowledge = knowledge
        self._pipeline: Pipeline | None = None

    def warm_up(self) -> None:
        """Build typedrag's pipeline (the classifier and reranker load here, once), and warm the generator."""
        if self._pipeline is not None:
            return
        if hasattr(self.chat_generator, "warm_up"):
            self.chat_generator.warm_up()
        model: ChatModel | None = HaystackChatModel(self.chat_generator) if self.chat_generator is not None else None
        retriever: Retriever | None = None
        if isinstance(self.retriever, TypedragRetriever):  # typedrag's own index: searched as it is
            self.retriever.warm_up()
            retriever = self.retriever.retriever
        elif self.retriever is not None:
            retriever = HaystackRetriever(self.retriever)
        pipeline = pipeline_for(retriever, model)  # type: ignore[arg-type]  # None: documents come with each run
        pipeline.settings.top_k = self.top_k
        pipeline.settings.knowledge = self.knowledge
        if pipeline.classifier is None:
            from typedrag.classify.shipped import load_default_classifier

            pipeline.classifier = load_default_classifier()
        self._pipeline = pipeline

    @component.output_types(answers=list[GeneratedAnswer], documents=list[Document], trace=dict[str, Any])
    def run(
        self,
        query: str,
        documents: list[Document] | None = None,
        forced_type: str | None = None,
        streaming_callback: StreamingCallback | None = None,
        history: list[ChatMessage] | None = None,
    ) -> dict[str, Any]:
        """Answer `query`: `answers` holds one GeneratedAnswer (its `meta`: type, strategy, citations),
        `documents` the sources, `trace` the whole AnswerResult as a dict. `history` is the conversation
        before `query` (user, assistant and system messages): a follow-up is read with it."""
        pipeline = self._for(documents)
        callback = streaming_callback or self.streaming_callback
        result = None
        turns = turns_of(history or [])
        for item in iterate_sync(
            lambda: answer_stream(pipeline, query, method=self.method, forced_type=forced_type, history=turns)
        ):
            if isinstance(item, AnswerResult):
                result = item
            elif callback is not None:
                callback(self._chunk(item))
        assert result is not None  # answer_stream always ends with the result
        return _outputs(query, result)

    @component.output_types(answers=list[GeneratedAnswer], documents=list[Document], trace=dict[str, Any])
    async def run_async(
        self,
        query: str,
        documents: list[Document] | None = None,
        forced_type: str | None = None,
        streaming_callback: StreamingCallback | None = None,
        history: list[ChatMessage] | None = None,
    ) -> dict[str, Any]:
        """`run` for `AsyncPipeline`; an async `streaming_callback` is awaited."""
        pipeline = self._for(documents)
        callback = streaming_callback or self.streaming_callback
        result = None
        async for item in answer_stream(
            pipeline, query, method=self.method, forced_type=forced_type, history=turns_of(history or [])
        ):
            if isinstance(item, AnswerResult):
                result = item
            elif callback is not None:
                heard = callback(self._chunk(item))
                if inspect.isawaitable(heard):
                    await heard
        assert result is not None
        return _outputs(query, result)

    def _for(self, documents: list[Document] | None) -> Pipeline:
        """The pipeline for one run: over the given documents, or over the component's own retriever."""
        self.warm_up()
        base = self._pipeline
        assert base is not None
        if documents is None:
            if base.retriever is None:
                raise ValueError("TypedRAG needs documents (connect a retriever's output) or a retriever of its own")
            return base
        # BM25 over the documents cut as typedrag's index cuts them: a long document is read a window at a time
        retriever: Retriever = ListRetriever(
            [w for d in sentence_aligned(documents) for w in windows_of(passage_of_document(d))]
        )
        return Pipeline(
            base.engine,
            retriever,
            classifier=base.classifier,
            reranker=base.reranker,
            settings=base.settings,
            routes=base.routes,
            fallback=base.fallback,
        )

    def _chunk(self, text: str) -> StreamingChunk:
        return StreamingChunk(content=text, component_info=ComponentInfo.from_component(self))

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            chat_generator=component_to_dict(self.chat_generator, "chat_generator")
            if self.chat_generator is not None
            else None,
            retriever=component_to_dict(self.retriever, "retriever") if self.retriever is not None else None,
            method=self.method,
            top_k=self.top_k,
            knowledge=self.knowledge,
            streaming_callback=serialize_callable(self.streaming_callback) if self.streaming_callback else None,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TypedRAG":
        init = data.get("init_parameters", {})
        for key in ("chat_generator", "retriever"):
            if init.get(key):
                deserialize_component_inplace(init, key=key)
        if init.get("streaming_callback"):
            init["streaming_callback"] = deserialize_callable(init["streaming_callback"])
        return default_from_dict(cls, data)


def turns_of(messages: list[ChatMessage]) -> list[Turn]:
    """Haystack chat messages as conversation turns: user, assistant and system ones (tool messages are left out)."""
    roles = {ChatRole.USER: "user", ChatRole.ASSISTANT: "assistant", ChatRole.SYSTEM: "system"}
    return [Turn(role=roles[m.role], content=m.text) for m in messages if m.role in roles and (m.text or "").strip()]


def _outputs(query: str, result: AnswerResult) -> dict[str, Any]:
    documents = [document_of(s) for s in result.sources]
    meta = {
        "type": result.type.type if result.type else None,
        "strategy": result.strategy,
        "standalone_question": result.standalone_question,
        "abstained": result.abstained,
        "unsourced": list(result.unsourced.sentences) if result.unsourced is not None else [],  # knowledge = labelled
        "citations": [c.model_dump() for c in result.citations],
        "fallbacks": [f.model_dump() for f in result.fallbacks],
    }
    answer = GeneratedAnswer(data=result.reply, query=query, documents=documents, meta=meta)
    return {"answers": [answer], "documents": documents, "trace": result.model_dump(mode="json")}
