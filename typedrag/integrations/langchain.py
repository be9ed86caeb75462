"""typedrag and LangChain, both ways (`pip install 'typedrag[langchain]'`).

Their parts inside typedrag:
- `LangChainRetriever`: any `BaseRetriever` (a vector store's `as_retriever()` included) or `VectorStore`
  as a typedrag `Retriever`;
- `LangChainChatModel`: any `BaseChatModel` as a typedrag `ChatModel`.

typedrag inside their chains:
- `TypedRAGRunnable`: a `Runnable` from a question (a string or a dict holding it, with `chat_history`) to
  `{"answer", "type", "strategy", "sources", "trace"}`; or, where a chat model stands (fed a prompt value or
  messages, whose last human message is the question), to what a chat model gives, an `AIMessage` of the
  answer with the rest in its `response_metadata`, so `prompt | typed_rag | StrOutputParser()` reads the text;
  with `invoke`/`ainvoke`, `stream`/`astream` (answer tokens as `{"answer": piece}` chunks, then one chunk
  with the rest; message chunks for a prompt) and `batch`/`abatch`, traced by LangChain's callbacks like any runnable;
- `TypedRAGRetriever`: a `BaseRetriever` returning the typed evidence pool (the answer's sources).

Sources are `Document`s: `id` and `metadata["passage_id"]` are the passage id, `metadata` also holds
`doc_id`, `title`, `section`, `source_number` (the [n] the answer cites), `score`, and the page as LangChain's
PDF loaders write it (`page` 0-based, `page_label` the printed number).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from typing_extensions import TypedDict  # pydantic builds schemas from it on Python < 3.12, typing's it refuses

from typedrag.extras import require

require("langchain_core", "langchain", "the LangChain integration")

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManager,
    CallbackManagerForRetrieverRun,
)  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models import BaseChatModel, LanguageModelInput  # noqa: E402
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_messages,
)  # noqa: E402
from langchain_core.output_parsers import BaseOutputParser  # noqa: E402
from langchain_core.prompt_values import PromptValue  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.callbacks import Callbacks  # noqa: E402
from langchain_core.runnables import Runnable, RunnableConfig  # noqa: E402
from langchain_core.runnables.config import ensure_config  # noqa: E402
from langchain_core.runnables.utils import AddableDict  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field  # noqa: E402

from typedrag.integrations.chat import FrameworkChatModel, Reply, count, is_openai_endpoint  # noqa: E402
from typedrag.integrations.common import answer_stream, pipeline_for  # noqa: E402
from typedrag.integrations.documents import best_windows, page_number, passage_of, source_metadata  # noqa: E402
from typedrag.integrations.threads import ThreadedSearch, iterate_sync, run_sync, sync_or_async  # noqa: E402
from typedrag.history import Turn  # noqa: E402
from typedrag.llm.base import ChatModel, Message  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.records import Passage, ScoredPassage  # noqa: E402
from typedrag.result import AnswerResult, Source  # noqa: E402

__all__ = [
    "LangChainChatModel",
    "TypedRAGQuestion",
    "LangChainRetriever",
    "TypedRAGOutput",
    "TypedRAGRetriever",
    "TypedRAGRunnable",
    "document_of",
    "passage_of_document",
]


# ---------------------------------------------------------------- documents <-> passages


def passage_of_document(document: Document) -> Passage:
    """A LangChain document as a typedrag passage (see `typedrag.integrations.documents.passage_of`)."""
    meta = document.metadata or {}
    page = page_number(meta.get("page_label")) or page_number(meta.get("page"), zero_based=True)
    return passage_of(document.page_content, meta, node_id=document.id, page=page)


def document_of(source: Source) -> Document:
    """A typedrag source as a LangChain document; `passage_of_document` reads it back to the same passage."""
    metadata: dict[str, Any] = {**source_metadata(source), "score": source.score}
    if source.page is not None:
        metadata.update(page=source.page - 1, page_label=str(source.page))
    if source.page_end is not None:
        metadata["page_end"] = source.page_end
    return Document(id=source.passage_id, page_content=source.text, metadata=metadata)


# ---------------------------------------------------------------- their retriever inside typedrag


class LangChainRetriever(ThreadedSearch):
    """A LangChain retriever or vector store as a typedrag `Retriever`.

    A vector store (or its `as_retriever()` with plain similarity search) is asked for exactly `k` documents
    with their scores; any other retriever is invoked with `k=k` (LangChain's convention; ignored by
    retrievers that take no arguments) and cut to `k`, scored by `metadata["score"]` or by rank. A retriever
    that only implements the async path is run through `ainvoke`.
    """

    def __init__(self, retriever: BaseRetriever | VectorStore, *, name: str | None = None) -> None:
        self.retriever = retriever
        self.name = name or f"langchain:{type(_store_of(retriever) or retriever).__name__}"

    def search(self, query: str, k: int = 10) -> list[ScoredPassage]:
        if k <= 0:
            return []
        store = _store_of(self.retriever)
        if store is not None:
            extra = self.retriever.search_kwargs if isinstance(self.retriever, VectorStoreRetriever) else {}
            with _retriever_run(self.retriever, store, query) as run:
                found = store.similarity_search_with_score(
                    query, k=k, **{key: v for key, v in extra.items() if key != "k"}
                )
                run.documents = [doc for doc, _ in found[:k]]
            return best_windows(query, [(passage_of_document(doc), score) for doc, score in found[:k]], k)
        retriever = self.retriever
        documents = sync_or_async(lambda: retriever.invoke(query, k=k), lambda: retriever.ainvoke(query, k=k))
        return best_windows(
            query, [(passage_of_document(doc), (doc.metadata or {}).get("score")) for doc in documents[:k]], k
        )


class _Run:
    documents: list[Document]


@contextmanager
def _retriever_run(retriever: BaseRetriever | VectorStore, store: VectorStore, query: str) -> Iterator[_Run]:
    """A search typedrag makes on the store itself (for its scores) as the retriever run LangChain would have
    made of `retriever.invoke`: callbacks and LangSmith see it, under the run it belongs to (the current one,
    which typedrag carries into its worker threads), with the retriever's name, tags and metadata."""
    config = ensure_config()
    if isinstance(retriever, BaseRetriever):
        name, tags, metadata = (
            retriever.get_name(),
            retriever.tags,
            {**(retriever.metadata or {}), **retriever._get_ls_params()},
        )
    else:
        name, tags, metadata = (
            type(store).__name__,
            None,
            {"ls_retriever_name": "vectorstore", "ls_vector_store_provider": type(store).__name__},
        )
    manager = CallbackManager.configure(
        config.get("callbacks"),
        None,
        inheritable_tags=config.get("tags"),
        local_tags=tags,
        inheritable_metadata=config.get("metadata"),
        local_metadata=metadata,
    )
    run_manager = manager.on_retriever_start(None, query, name=config.get("run_name") or name)
    run = _Run()
    run.documents = []
    try:
        yield run
    except BaseException as error:
        run_manager.on_retriever_error(error)
        raise
    run_manager.on_retriever_end(run.documents)


def _store_of(retriever: BaseRetriever | VectorStore) -> VectorStore | None:
    """The vector store to ask directly (for scores and exact k): the store itself, or a plain-similarity retriever's."""
    if isinstance(retriever, VectorStore):
        return retriever
    if isinstance(retriever, VectorStoreRetriever) and retriever.search_type == "similarity":
        return retriever.vectorstore
    return None


# ---------------------------------------------------------------- their chat model inside typedrag


class LangChainChatModel(FrameworkChatModel):
    """A LangChain chat model as a typedrag `ChatModel`: `LLMEngine(LangChainChatModel(ChatOpenAI(...)))`.

    Calls go through `ainvoke`/`astream`, so LangChain callbacks and tracing see each of them (run name
    `typedrag:<role>`). Token counts come from the reply's `usage_metadata`. `structured_output` (default:
    on for `ChatOpenAI`/`AzureChatOpenAI`, off for others) sends plan schemas as `response_format`.
    """

    def __init__(self, model: BaseChatModel, *, name: str | None = None, structured_output: bool | None = None) -> None:
        openai_client = type(model).__module__.startswith("langchain_openai")
        super().__init__(structured_output=openai_client if structured_output is None else structured_output)
        self.model = model
        model_name = getattr(model, "model_name", None) or getattr(model, "model", None)
        self.name = name or f"langchain:{model_name if isinstance(model_name, str) else model._llm_type}"
        self._openai_api = openai_client and is_openai_endpoint(getattr(model, "openai_api_base", None))

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
        model: Runnable = self.model.bind(response_format=schema_format) if schema_format else self.model
        config: RunnableConfig = {
            "run_name": f"typedrag:{role}",
            "tags": ["typedrag"],
            "metadata": {"typedrag_role": role},
        }
        turns = [_message(m) for m in messages]
        if on_text is None:
            reply = await model.ainvoke(turns, config=config)
        else:
            reply = None
            async for chunk in model.astream(turns, config=config):
                if chunk.text:
                    on_text(chunk.text)
                reply = chunk if reply is None else reply + chunk
            reply = reply or AIMessage(content="")
        usage = getattr(reply, "usage_metadata", None) or {}
        return Reply(
            text=reply.text,
            prompt_tokens=count(usage.get("input_tokens")),
            completion_tokens=count(usage.get("output_tokens")),
            finish_reason=(reply.response_metadata or {}).get("finish_reason"),
        )


def _message(message: Message) -> BaseMessage:
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return kinds.get(message["role"], HumanMessage)(content=message["content"])


# ---------------------------------------------------------------- typedrag inside their chains


# A question, a dict holding it (with its chat_history), or what LangChain's chat models take (a prompt value, messages).
TypedRAGInput = LanguageModelInput | dict[str, Any]


class TypedRAGOutput(TypedDict, total=False):
    """What `TypedRAGRunnable` returns: the answer, the type it was routed on, the plan that ran, the sources
    as Documents (in number order, so [n] is `sources[n - 1]`), and the whole trace."""

    question: str
    answer: str
    type: str | None
    strategy: str
    abstained: bool  # the documents do not answer: `sources` are the nearest passages, not an answer
    # knowledge = "labelled": the sentences the model added from its own knowledge (the end of `answer`, labelled
    # "Not from your documents: ..."); empty when it added none
    unsourced: list[str]
    sources: list[Document]
    trace: AnswerResult


class TypedRAGQuestion(BaseModel):
    """What a model passes when it calls typedrag as a tool (`TypedRAGRunnable.as_tool`)."""

    question: str = Field(description="The question to answer from the documents, worded to stand alone")


TOOL_DESCRIPTION = (
    "Answers a question from the documents, with the sources it cites. Suited to questions without a one-fact "
    "answer: comparisons, reasons, how-tos, advice, debates. Says so when the documents do not answer."
)


def tool_text(output: TypedRAGOutput) -> str:
    """What a tool call returns to the model: the answer, then the sources it cites as `[n] title (passage id)`
    (the nearest passages, so marked, when the documents do not answer)."""
    result = output["trace"]
    cited = {n for c in result.citations for n in c.source_numbers}
    listed = [s for s in result.sources if s.number in cited] or (result.sources[:5] if result.abstained else [])
    lines = [f"[{s.number}] {s.where} ({s.passage_id})" if s.where else f"[{s.number}] {s.passage_id}" for s in listed]
    heading = "Nearest passages, not an answer:" if result.abstained else "Sources:"
    return output["answer"] + (f"\n\n{heading}\n" + "\n".join(lines) if lines else "")


class TypedRAGRunnable(Runnable[TypedRAGInput, TypedRAGOutput | AIMessage]):
    """typedrag's pipeline as a LangChain `Runnable`. The input is the question, or a dict holding it as
    `question`, `input` or `query` (so it drops into chains built for `create_retrieval_chain`), with the
    conversation before it as `chat_history` (messages, or `("human", "...")` tuples); the output is a
    `TypedRAGOutput` dict.

    Fed what a chat model takes, a prompt value or messages, it stands where the model of a
    `prompt | model | parser` chain stands and answers as a chat model does: an `AIMessage` whose content is
    the answer and whose `response_metadata` holds the rest of the output (`question`, `type`, `sources`,
    `trace`...), so any output parser after it reads the text (a dict it cannot: LangChain's parsers take a
    string or a message). The last human message is the question, the messages before it the history
    (system messages are instructions for the answer).

    >>> from typedrag import ListRetriever, OfflineEngine, Pipeline
    >>> chain = TypedRAGRunnable(Pipeline(OfflineEngine(), ListRetriever(["Cats purr when content."])))
    >>> chain.get_name()
    'TypedRAG'
    """

    def __init__(
        self, pipeline: Pipeline, *, method: str = "typed", forced_type: str | None = None, name: str = "TypedRAG"
    ) -> None:
        self.pipeline, self.method, self.forced_type, self.name = pipeline, method, forced_type, name

    @classmethod
    def from_components(
        cls,
        retriever: BaseRetriever | VectorStore,
        chat_model: BaseChatModel | None = None,
        *,
        method: str = "typed",
        forced_type: str | None = None,
        **options: Any,
    ) -> "TypedRAGRunnable":
        """Typed-RAG over your LangChain retriever and chat model (none: typedrag's offline, extractive engine).
        `method` and `forced_type` are the runnable's; other `options` go to `Pipeline`."""
        model: ChatModel | None = LangChainChatModel(chat_model) if chat_model is not None else None
        return cls(
            pipeline_for(LangChainRetriever(retriever), model, **options), method=method, forced_type=forced_type
        )

    def invoke(self, input: TypedRAGInput, config: RunnableConfig | None = None, **kwargs: Any) -> TypedRAGOutput:
        return self._call_with_config(lambda value: run_sync(self._answer(value)), input, config, run_type="chain")

    def as_tool(
        self,
        args_schema: type[BaseModel] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        arg_types: dict[str, type] | None = None,
    ) -> BaseTool:
        """typedrag as a tool an agent calls with `{"question": ...}`: the model gets the answer and the sources it
        cites as text (`tool_text`), the application the whole output as the tool message's `artifact`.
        `args_schema` or `arg_types` given: LangChain's own `Runnable.as_tool`, which passes the arguments as a dict."""
        if args_schema is not None or arg_types is not None:
            return super().as_tool(args_schema, name=name, description=description, arg_types=arg_types)

        def answer(question: str, callbacks: Callbacks = None) -> tuple[str, TypedRAGOutput]:
            output = self.invoke(question, config={"callbacks": callbacks})
            return tool_text(output), output

        async def aanswer(question: str, callbacks: Callbacks = None) -> tuple[str, TypedRAGOutput]:
            output = await self.ainvoke(question, config={"callbacks": callbacks})
            return tool_text(output), output

        return StructuredTool.from_function(
            func=answer,
            coroutine=aanswer,
            name=name or self.get_name(),
            description=description or TOOL_DESCRIPTION,
            args_schema=TypedRAGQuestion,
            response_format="content_and_artifact",
        )

    def __or__(self, other: Any) -> Runnable:
        """`typed | StrOutputParser()`: an output parser reads the answer's text (the output is a dict; other steps
        get it whole). In a longer chain fed a dict, pick it yourself: `step | typed.pick("answer") | StrOutputParser()`
        (fed a prompt, typed answers with a message, which a parser reads as it is)."""
        if isinstance(other, BaseOutputParser):
            return self.pick("answer") | other
        return super().__or__(other)

    async def ainvoke(
        self, input: TypedRAGInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> TypedRAGOutput:
        return await self._acall_with_config(self._answer, input, config, run_type="chain")

    def batch(
        self,
        inputs: list[TypedRAGInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[TypedRAGOutput]:
        """All questions in one event loop (`abatch`), so a model client is shared, not opened per thread;
        `max_concurrency` in the config caps how many are answered at once."""
        return run_sync(self.abatch(inputs, config, return_exceptions=return_exceptions, **kwargs))

    def stream(
        self, input: TypedRAGInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[TypedRAGOutput]:
        yield from self._transform_stream_with_config(iter([input]), self._chunks, config, run_type="chain")

    async def astream(
        self, input: TypedRAGInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[TypedRAGOutput]:
        async def one() -> AsyncIterator[TypedRAGInput]:
            yield input

        async for chunk in self._atransform_stream_with_config(one(), self._achunks, config, run_type="chain"):
            yield chunk

    async def _answer(self, value: TypedRAGInput) -> Any:
        question, history = conversation_of(value)
        result = await self.pipeline.answer(question, method=self.method, forced_type=self.forced_type, history=history)
        if as_chat_model(value):
            return AIMessage(content=result.reply, name=self.name, response_metadata=dict(_rest(result)))
        return {"answer": result.reply, **_rest(result)}

    def _chunks(self, inputs: Iterator[TypedRAGInput]) -> Iterator[Any]:
        value = list(inputs)[-1]
        question, history = conversation_of(value)
        stream = lambda: answer_stream(
            self.pipeline, question, method=self.method, forced_type=self.forced_type, history=history
        )  # noqa: E731
        for item in iterate_sync(stream):
            yield _chunk(item, self.name if as_chat_model(value) else None)

    async def _achunks(self, inputs: AsyncIterator[TypedRAGInput]) -> AsyncIterator[Any]:
        value = [item async for item in inputs][-1]
        question, history = conversation_of(value)
        async for item in answer_stream(
            self.pipeline, question, method=self.method, forced_type=self.forced_type, history=history
        ):
            yield _chunk(item, self.name if as_chat_model(value) else None)


def as_chat_model(value: TypedRAGInput) -> bool:
    """Whether `value` is what a chat model takes (a prompt value or messages), not typedrag's own question (a
    string, or a dict holding it): then typedrag answers as a chat model does, with a message."""
    return not isinstance(value, (str, dict))


def conversation_of(value: TypedRAGInput) -> tuple[str, list[Turn]]:
    """(the question, the conversation before it) from any input `TypedRAGRunnable` takes."""
    if isinstance(value, str):
        return value, []
    if isinstance(value, dict):
        for key in ("question", "input", "query"):
            if isinstance(value.get(key), str):
                return value[key], turns_of(convert_to_messages(value.get("chat_history") or []))
        raise ValueError(
            "TypedRAG needs the question as a string, a dict with 'question', 'input' or 'query' (and 'chat_history'), "
            f"or messages; got keys {sorted(value)}"
        )
    return _last_human(value.to_messages() if isinstance(value, PromptValue) else convert_to_messages(value))


def _last_human(messages: list[BaseMessage]) -> tuple[str, list[Turn]]:
    """The last human message's text, and the messages before it as turns."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)), None)
    if last is None:
        raise ValueError(
            "TypedRAG needs a human message in the conversation (these messages hold no human message): "
            "the last one is the question"
        )
    return messages[last].text, turns_of(messages[:last])


def turns_of(messages: list[BaseMessage]) -> list[Turn]:
    """LangChain messages as conversation turns: human, AI and system messages (tool messages are left out)."""
    roles = {"human": "user", "ai": "assistant", "system": "system"}
    return [Turn(role=roles[m.type], content=m.text) for m in messages if m.type in roles and m.text.strip()]


def _chunk(item: str | AnswerResult, message_name: str | None = None) -> Any:
    """A stream chunk: `{"answer": piece}`, or the rest of the output at the end. They are AddableDicts, as
    LangChain's own dict-valued runnables stream, so `chunk + chunk + ...` is the whole output; with a
    `message_name` (typedrag stands where a chat model does) they are message chunks that add up to its message."""
    if message_name is not None:
        if isinstance(item, AnswerResult):
            return AIMessageChunk(
                content="", name=message_name, response_metadata=dict(_rest(item)), chunk_position="last"
            )
        return AIMessageChunk(content=item, name=message_name)
    return AddableDict(_rest(item) if isinstance(item, AnswerResult) else {"answer": item})


def _rest(result: AnswerResult) -> TypedRAGOutput:
    """Everything but the answer text (streamed separately): merged chunks make the whole output."""
    return {
        "question": result.question,
        "type": result.type.type if result.type else None,
        "strategy": result.strategy,
        "abstained": result.abstained,
        "unsourced": list(result.unsourced.sentences) if result.unsourced is not None else [],
        "sources": [document_of(s) for s in result.sources],
        "trace": result,
    }


class TypedRAGRetriever(BaseRetriever):
    """The typed evidence pool as a LangChain retriever: the passages Typed-RAG's plan for the question's
    type gathered (its sources, in citation order), for a chain that writes its own answer. It runs the
    whole pipeline, so give it the offline engine unless you also want the typed answer written."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    pipeline: Any
    k: int = 5
    method: str = "typed"
    forced_type: str | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        return self._documents(run_sync(self._result(query)), k)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        return self._documents(await self._result(query), k)

    async def _result(self, query: str) -> AnswerResult:
        return await self.pipeline.answer(query, method=self.method, forced_type=self.forced_type)

    def _documents(self, result: AnswerResult, k: int | None) -> list[Document]:
        return [document_of(source) for source in result.sources[: self.k if k is None else k]]
