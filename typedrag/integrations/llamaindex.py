"""typedrag and LlamaIndex, both ways (`pip install 'typedrag[llamaindex]'`).

Their parts inside typedrag:
- `LlamaIndexRetriever`: any LlamaIndex retriever, or any index (asked through `as_retriever`), as a
  typedrag `Retriever`;
- `LlamaIndexChatModel`: any LlamaIndex LLM as a typedrag `ChatModel`.

typedrag inside their apps:
- `TypedragRetriever`: typedrag's own index (`typedrag index ... --index DIR`) as a LlamaIndex retriever, its
  passages as `NodeWithScore`s (node id the passage id, `ref_doc_id` its document);
- `TypedRAGQueryEngine`: a query engine with `query`/`aquery` (and `streaming=True` for a
  `StreamingResponse`/`AsyncStreamingResponse`); its `source_nodes` are the answer's sources with their
  scores, in citation order, and `metadata` holds the type, strategy, plan, aspects, fallbacks and the trace;
  `retrieve`/`aretrieve` give those nodes alone.
- `TypedRAGChatEngine`: a chat engine (`chat`/`achat`, `stream_chat`/`astream_chat`, `chat_history`, `reset`):
  each message is answered with the conversation before it (a follow-up is read with the earlier turns).

Nodes and passages map both ways: the node id is the passage id, `ref_doc_id` (or `metadata["doc_id"]`) the
document, `metadata["title"]`/`["section"]` and LlamaIndex's `page_label` the rest.

Offline use: llama-index-core ships the NLTK data (punkt, stopwords) and tiktoken files its text splitters
need, and fetches them only when `NLTK_DATA` or `TIKTOKEN_CACHE_DIR` point at a folder without them; its
default models are OpenAI's, so give `VectorStoreIndex` your own `embed_model`. Nothing here touches either.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from typedrag.extras import require

require("llama_index.core", "llamaindex", "the LlamaIndex integration")

from llama_index.core.base.base_query_engine import BaseQueryEngine  # noqa: E402
from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402
from llama_index.core.base.response.schema import RESPONSE_TYPE, AsyncStreamingResponse, Response, StreamingResponse  # noqa: E402
from llama_index.core.callbacks import CallbackManager  # noqa: E402
from llama_index.core.chat_engine.types import AgentChatResponse, BaseChatEngine, StreamingAgentChatResponse  # noqa: E402
from llama_index.core.indices.base import BaseIndex  # noqa: E402
from llama_index.core.llms import LLM, ChatMessage, ChatResponse, MessageRole  # noqa: E402
from llama_index.core.schema import (
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)  # noqa: E402

from typedrag.integrations.chat import FrameworkChatModel, Reply, count, is_openai_endpoint  # noqa: E402
from typedrag.integrations.common import answer_stream, pipeline_for  # noqa: E402
from typedrag.integrations.documents import best_windows, page_number, passage_of, source_metadata  # noqa: E402
from typedrag.integrations.threads import ThreadedSearch, iterate_sync, run_sync, sync_or_async  # noqa: E402
from typedrag.history import Turn  # noqa: E402
from typedrag.index.base import Retriever  # noqa: E402
from typedrag.llm.base import ChatModel, Message  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.records import Passage, ScoredPassage  # noqa: E402
from typedrag.result import AnswerResult, Source  # noqa: E402

__all__ = [
    "LlamaIndexChatModel",
    "LlamaIndexRetriever",
    "TypedRAGChatEngine",
    "TypedRAGQueryEngine",
    "TypedragRetriever",
    "node_of",
    "passage_of_node",
]


# ---------------------------------------------------------------- nodes <-> passages


def passage_of_node(node: NodeWithScore | TextNode) -> Passage:
    """A LlamaIndex node as a typedrag passage (see `typedrag.integrations.documents.passage_of`)."""
    base = node.node if isinstance(node, NodeWithScore) else node
    meta = dict(base.metadata or {})
    if base.ref_doc_id and "doc_id" not in meta:
        meta["doc_id"] = base.ref_doc_id
    page = page_number(meta.get("page_label")) or page_number(meta.get("page"))
    return passage_of(base.get_content(metadata_mode=MetadataMode.NONE), meta, node_id=base.node_id, page=page)


def node_of(source: Source, doc_id: str | None = None) -> NodeWithScore:
    """A typedrag source as a scored LlamaIndex node, its document as `ref_doc_id` (`doc_id`, else read from the
    passage id); `passage_of_node` reads it back to the same passage."""
    metadata: dict[str, Any] = source_metadata(source)
    if source.page is not None:
        metadata["page_label"] = str(source.page)
    if source.page_end is not None:
        metadata["page_end"] = source.page_end
    document = doc_id or metadata.get("doc_id")
    if document:
        metadata["doc_id"] = document
    relationships = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=document)} if document else {}
    node = TextNode(id_=source.passage_id, text=source.text, metadata=metadata, relationships=relationships)
    return NodeWithScore(node=node, score=source.score)


# ---------------------------------------------------------------- their retriever inside typedrag


class LlamaIndexRetriever(ThreadedSearch):
    """A LlamaIndex retriever or index as a typedrag `Retriever`.

    An index is asked through `index.as_retriever(similarity_top_k=k)`, so exactly `k` nodes come back; a
    retriever returns as many as it was configured for, cut to `k`. Scores are the nodes' own (by rank when
    a retriever gives none). A retriever that only implements `_aretrieve` runs through `aretrieve`.
    """

    def __init__(self, retriever: BaseRetriever | BaseIndex, *, name: str | None = None) -> None:
        self.retriever = retriever
        self.name = name or f"llamaindex:{type(retriever).__name__}"

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        if k <= 0:
            return []
        retriever = (
            self.retriever.as_retriever(similarity_top_k=k) if isinstance(self.retriever, BaseIndex) else self.retriever
        )
        nodes = sync_or_async(lambda: retriever.retrieve(query), lambda: retriever.aretrieve(query))
        return best_windows(query, [(passage_of_node(n), n.score) for n in nodes[:k]], k)


# ---------------------------------------------------------------- typedrag's own index inside their apps


class TypedragRetriever(BaseRetriever):
    """typedrag's own index as a LlamaIndex retriever: `TypedragRetriever(index="my-index", similarity_top_k=5)`
    searches the index `typedrag index ... --index my-index` built (its hybrid search, or `mode`: bm25, dense,
    hybrid) and gives its passages as `NodeWithScore`s, `ref_doc_id` their document. `index` may also be an open
    typedrag retriever (`open_retriever(...)`, a Milvus one, a `ListRetriever`). It plugs into LlamaIndex's own
    query engines (`RetrieverQueryEngine.from_args(retriever, llm=...)`) and into `TypedRAGQueryEngine.from_components`."""

    def __init__(
        self,
        index: str | os.PathLike | Retriever = "typedrag-index",
        *,
        similarity_top_k: int = 5,
        mode: str | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        if isinstance(index, (str, os.PathLike)):
            from typedrag.index.tantivy import open_retriever

            index = open_retriever(Path(index), mode)
        self.retriever: Retriever = index
        self.similarity_top_k = similarity_top_k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.retriever.search(query_bundle.query_str, self.similarity_top_k)
        return [node_of(Source.of(1, hit), hit.passage.doc_id) for hit in hits]


def _retriever_of(retriever: Any) -> Retriever:
    """What `from_components` searches: typedrag's own retriever as it is (a `TypedragRetriever`'s, or one
    `open_retriever` gave), a LlamaIndex retriever or index through `LlamaIndexRetriever`."""
    if isinstance(retriever, TypedragRetriever):
        return retriever.retriever
    if not isinstance(retriever, (BaseRetriever, BaseIndex)) and callable(getattr(retriever, "search", None)):
        return retriever
    return LlamaIndexRetriever(retriever)


def _pipeline_of(pipeline: Any, retriever: Any, engine: str) -> Pipeline:
    """An engine's pipeline: the one given, or one over `retriever`; anything else is a one-line error saying
    what to write (a retriever passed where the pipeline goes, the commonest first guess, is taken as one)."""
    if pipeline is not None and retriever is None and not isinstance(pipeline, Pipeline):
        pipeline, retriever = None, pipeline
    searchable = isinstance(retriever, (BaseRetriever, BaseIndex)) or callable(getattr(retriever, "search", None))
    if (pipeline is None) == (retriever is None) or (retriever is not None and not searchable):
        raise TypeError(
            f"{engine} takes a typedrag Pipeline or a retriever: {engine}(pipeline) or "
            f'{engine}(retriever=TypedragRetriever(index="my-index")), or {engine}.from_components(retriever, llm)'
        )
    return pipeline if pipeline is not None else pipeline_for(_retriever_of(retriever))


# ---------------------------------------------------------------- their LLM inside typedrag


class LlamaIndexChatModel(FrameworkChatModel):
    """A LlamaIndex LLM as a typedrag `ChatModel`: `LLMEngine(LlamaIndexChatModel(OpenAI(...)))`.

    Calls go through `achat`/`astream_chat`, so LlamaIndex's instrumentation sees each of them. Token counts
    come from the response's `additional_kwargs` or its raw OpenAI-style `usage`. `structured_output`
    (default: on for `llama_index.llms.openai` and `openai_like` models) sends plan schemas as `response_format`.
    """

    def __init__(self, llm: LLM, *, name: str | None = None, structured_output: bool | None = None) -> None:
        openai_client = type(llm).__module__.startswith("llama_index.llms.openai")
        super().__init__(structured_output=openai_client if structured_output is None else structured_output)
        self.llm = llm
        model_name = llm.metadata.model_name
        self.name = name or f"llamaindex:{model_name if model_name and model_name != 'unknown' else llm.class_name()}"
        self._openai_api = openai_client and is_openai_endpoint(getattr(llm, "api_base", None))

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
        turns = [ChatMessage(role=MessageRole(m["role"]), content=m["content"]) for m in messages]
        options = {"response_format": schema_format} if schema_format else {}
        if on_text is None:
            response = await self.llm.achat(turns, **options)
        else:
            response = None
            async for response in await self.llm.astream_chat(turns, **options):
                if response.delta:
                    on_text(response.delta)
        if response is None:
            return Reply(text="")
        prompt, completion, finish = _usage(response)
        return Reply(
            text=response.message.content or "",
            prompt_tokens=prompt,
            completion_tokens=completion,
            finish_reason=finish,
        )


def _usage(response: ChatResponse) -> tuple[int, int, str | None]:
    """(prompt tokens, completion tokens, finish reason) from what the LLM reported, zeros/None for nothing."""
    extra = response.additional_kwargs or {}
    raw = response.raw
    usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    else:
        prompt, completion = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
    choices = raw.get("choices") if isinstance(raw, dict) else getattr(raw, "choices", None)
    first = choices[0] if isinstance(choices, list) and choices else None
    finish = first.get("finish_reason") if isinstance(first, dict) else getattr(first, "finish_reason", None)
    return (
        count(extra.get("prompt_tokens")) or count(prompt),
        count(extra.get("completion_tokens")) or count(completion),
        finish if isinstance(finish, str) else None,
    )


# ---------------------------------------------------------------- typedrag inside their apps


class TypedRAGQueryEngine(BaseQueryEngine):
    """typedrag's pipeline as a LlamaIndex query engine.

    >>> from typedrag import ListRetriever, OfflineEngine, Pipeline
    >>> engine = TypedRAGQueryEngine(Pipeline(OfflineEngine(), ListRetriever(["Cats purr when content."])))
    >>> engine.streaming
    False
    """

    def __init__(
        self,
        pipeline: Pipeline | None = None,
        *,
        retriever: Any = None,
        streaming: bool = False,
        method: str = "typed",
        forced_type: str | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        """Over `pipeline`, or over `retriever` (any `from_components` takes) with the offline engine."""
        super().__init__(callback_manager)
        self.pipeline = _pipeline_of(pipeline, retriever, type(self).__name__)
        self.streaming, self.method, self.forced_type = streaming, method, forced_type

    @classmethod
    def from_components(
        cls,
        retriever: BaseRetriever | BaseIndex | Retriever,
        llm: LLM | None = None,
        *,
        streaming: bool = False,
        method: str = "typed",
        forced_type: str | None = None,
        **options: Any,
    ) -> "TypedRAGQueryEngine":
        """Typed-RAG over your LlamaIndex retriever (or index; or typedrag's own: a `TypedragRetriever`, or what
        `open_retriever` gives) and LLM (none: typedrag's offline, extractive engine).
        `streaming`, `method` and `forced_type` are the query engine's; other `options` go to `Pipeline`."""
        model: ChatModel | None = LlamaIndexChatModel(llm) if llm is not None else None
        pipeline = pipeline_for(_retriever_of(retriever), model, **options)
        return cls(pipeline, streaming=streaming, method=method, forced_type=forced_type)

    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        if not self.streaming:
            return _response(run_sync(self._answer(query_bundle.query_str)))
        nodes: list[NodeWithScore] = []
        metadata: dict[str, Any] = {}
        query_run = contextvars.copy_context()  # the tokens are read after this query's span ends: answer inside it

        def tokens() -> Iterator[str]:
            for item in iterate_sync(lambda: self._stream(query_bundle.query_str), query_run):
                if isinstance(item, AnswerResult):
                    nodes.extend(node_of(s) for s in item.sources)
                    metadata.update(_metadata(item))
                else:
                    yield item

        return StreamingResponse(response_gen=tokens(), source_nodes=nodes, metadata=metadata)

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        if not self.streaming:
            return _response(await self._answer(query_bundle.query_str))
        nodes: list[NodeWithScore] = []
        metadata: dict[str, Any] = {}

        query_run = contextvars.copy_context()

        async def tokens() -> AsyncIterator[str]:
            async for item in self._stream(query_bundle.query_str, query_run):
                if isinstance(item, AnswerResult):
                    nodes.extend(node_of(s) for s in item.sources)
                    metadata.update(_metadata(item))
                else:
                    yield item

        return AsyncStreamingResponse(response_gen=tokens(), source_nodes=nodes, metadata=metadata)

    async def _answer(self, question: str) -> AnswerResult:
        return await self.pipeline.answer(question, method=self.method, forced_type=self.forced_type)

    def retrieve(self, query_bundle: QueryBundle | str) -> list[NodeWithScore]:
        """The typed evidence pool for the question: the passages the plan for its type gathered (the sources
        `query` answers from, in citation order), as LlamaIndex's retriever query engines return their nodes.
        The plan is typedrag's whole pipeline: with an LLM engine its plan and answer calls are made too."""
        return _nodes(run_sync(self._answer(_query_str(query_bundle))))

    async def aretrieve(self, query_bundle: QueryBundle | str) -> list[NodeWithScore]:
        """`retrieve` for async code."""
        return _nodes(await self._answer(_query_str(query_bundle)))

    def _stream(self, question: str, context: contextvars.Context | None = None) -> AsyncIterator[str | AnswerResult]:
        return answer_stream(self.pipeline, question, method=self.method, forced_type=self.forced_type, context=context)

    def _get_prompt_modules(self) -> dict[str, Any]:
        return {}  # typedrag's prompts are its own (typedrag.prompts), not LlamaIndex templates


class TypedRAGChatEngine(BaseChatEngine):
    """typedrag's pipeline as a LlamaIndex chat engine: each message is answered with the conversation before it,
    as LlamaIndex's own chat engines keep it (`chat_history`; passing `chat_history` to a call replaces it, as
    theirs do). System messages, and `system_prompt`, are instructions for the answer's writing. Responses carry
    the answer's sources as `source_nodes`; a non-streamed one also the typed trace as `metadata`.

    >>> from typedrag import ListRetriever, OfflineEngine, Pipeline
    >>> engine = TypedRAGChatEngine(Pipeline(OfflineEngine(), ListRetriever(["Cats purr when content."])))
    >>> engine.chat_history
    []
    """

    def __init__(
        self,
        pipeline: Pipeline | None = None,
        *,
        retriever: Any = None,
        method: str = "typed",
        forced_type: str | None = None,
        chat_history: list[ChatMessage] | None = None,
        system_prompt: str | None = None,
    ) -> None:
        """Over `pipeline`, or over `retriever` (any `from_components` takes) with the offline engine."""
        self.pipeline = _pipeline_of(pipeline, retriever, type(self).__name__)
        self.method, self.forced_type, self.system_prompt = method, forced_type, system_prompt
        self._history: list[ChatMessage] = list(chat_history or [])

    @classmethod
    def from_components(
        cls,
        retriever: BaseRetriever | BaseIndex | Retriever,
        llm: LLM | None = None,
        *,
        system_prompt: str | None = None,
        **options: Any,
    ) -> "TypedRAGChatEngine":
        """Typed-RAG chat over your LlamaIndex retriever (or index) and LLM (none: typedrag's offline, extractive engine)."""
        model: ChatModel | None = LlamaIndexChatModel(llm) if llm is not None else None
        return cls(pipeline_for(_retriever_of(retriever), model, **options), system_prompt=system_prompt)

    @property
    def chat_history(self) -> list[ChatMessage]:
        return list(self._history)

    def reset(self) -> None:
        self._history = []

    def chat(self, message: str, chat_history: list[ChatMessage] | None = None) -> AgentChatResponse:
        return run_sync(self.achat(message, chat_history))

    async def achat(self, message: str, chat_history: list[ChatMessage] | None = None) -> AgentChatResponse:
        history = self._begin(chat_history)
        result = await self.pipeline.answer(message, method=self.method, forced_type=self.forced_type, history=history)
        self._remember(message, result)
        return AgentChatResponse(
            response=result.reply, source_nodes=[node_of(s) for s in result.sources], metadata=_metadata(result)
        )

    def stream_chat(self, message: str, chat_history: list[ChatMessage] | None = None) -> StreamingAgentChatResponse:
        history, nodes = self._begin(chat_history), []
        chat_run = contextvars.copy_context()  # the deltas are read after this call's span ends: answer inside it

        def deltas() -> Iterator[ChatResponse]:
            text = ""
            for item in iterate_sync(lambda: self._stream(message, history), chat_run):
                if isinstance(item, AnswerResult):
                    nodes.extend(node_of(s) for s in item.sources)
                    self._remember(message, item)
                else:
                    text += item
                    yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=item)

        return StreamingAgentChatResponse(chat_stream=deltas(), source_nodes=nodes, is_writing_to_memory=False)

    async def astream_chat(
        self, message: str, chat_history: list[ChatMessage] | None = None
    ) -> StreamingAgentChatResponse:
        history, nodes = self._begin(chat_history), []
        chat_run = contextvars.copy_context()

        async def deltas() -> AsyncIterator[ChatResponse]:
            text = ""
            async for item in self._stream(message, history, chat_run):
                if isinstance(item, AnswerResult):
                    nodes.extend(node_of(s) for s in item.sources)
                    self._remember(message, item)
                else:
                    text += item
                    yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=item)

        return StreamingAgentChatResponse(achat_stream=deltas(), source_nodes=nodes, is_writing_to_memory=False)

    def _stream(
        self, message: str, history: list[Turn], context: contextvars.Context | None = None
    ) -> AsyncIterator[str | AnswerResult]:
        return answer_stream(
            self.pipeline, message, method=self.method, forced_type=self.forced_type, history=history, context=context
        )

    def _begin(self, chat_history: list[ChatMessage] | None) -> list[Turn]:
        """The conversation the next message is answered in, as turns (a given `chat_history` replaces the engine's)."""
        if chat_history is not None:
            self._history = list(chat_history)
        system = [Turn(role="system", content=self.system_prompt)] if self.system_prompt else []
        return system + turns_of(self._history)

    def _remember(self, message: str, result: AnswerResult) -> None:
        self._history += [
            ChatMessage(role=MessageRole.USER, content=message),
            ChatMessage(role=MessageRole.ASSISTANT, content=result.reply),
        ]


def turns_of(messages: list[ChatMessage]) -> list[Turn]:
    """LlamaIndex chat messages as conversation turns: user, assistant and system ones (tool calls are left out)."""
    roles = {MessageRole.USER: "user", MessageRole.ASSISTANT: "assistant", MessageRole.SYSTEM: "system"}
    return [
        Turn(role=roles[m.role], content=m.content) for m in messages if m.role in roles and (m.content or "").strip()
    ]


def _query_str(query: QueryBundle | str) -> str:
    return query if isinstance(query, str) else query.query_str


def _nodes(result: AnswerResult) -> list[NodeWithScore]:
    return [node_of(s) for s in result.sources]


def _response(result: AnswerResult) -> Response:
    return Response(result.reply, [node_of(s) for s in result.sources], _metadata(result))


def _metadata(result: AnswerResult) -> dict[str, Any]:
    return {
        "type": result.type.type if result.type else None,
        "strategy": result.strategy,
        "abstained": result.abstained,
        "unsourced": list(result.unsourced.sentences) if result.unsourced is not None else [],  # knowledge = labelled
        "standalone_question": result.standalone_question,
        "plan": result.plan,
        "plan_used": result.plan_used,
        "aspects": [a.model_dump() for a in result.aspects],
        "fallbacks": [f.model_dump() for f in result.fallbacks],
        "trace": result,
    }
