"""typedrag and LangChain both ways, against langchain-core's own doubles (fake chat models, the in-memory
vector store with deterministic embeddings), LangChain's standard retriever tests, and ChatOpenAI on the
loopback OpenAI stub (structured plans, repair, streaming and usage across the real client)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel, SimpleChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from langchain_tests.integration_tests import RetrieversIntegrationTests, ToolsIntegrationTests  # noqa: E402
from langchain_tests.unit_tests import ToolsUnitTests  # noqa: E402

from typedrag import ListRetriever, OfflineEngine, Pipeline  # noqa: E402
from typedrag.pipeline import PipelineSettings  # noqa: E402
from typedrag.engines.llm_engine import LLMEngine  # noqa: E402
from typedrag.errors import LLMError  # noqa: E402
from typedrag.integrations.langchain import (  # noqa: E402
    LangChainChatModel,
    LangChainRetriever,
    TypedRAGRetriever,
    TypedRAGRunnable,
    document_of,
    passage_of_document,
)
from typedrag.llm.base import StructuredOutcome  # noqa: E402
from typedrag.records import Passage  # noqa: E402
from typedrag.result import Source  # noqa: E402
from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_responder  # noqa: E402

from conftest import plan_call_of  # noqa: E402

from .conftest import (  # noqa: E402
    FIRST,
    FOLLOW_UP,
    LONG_ANSWER,
    LONG_QUESTION,
    MOST_WORDS,
    PLAN,
    QUESTION,
    SHIPS,
    TITANIC,
    is_repair,
    long_document,
    read_with_history,
    replies_by_kind,
)


def vector_store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents(
        [
            Document(
                id=f"titanic-{i}",
                page_content=text,
                metadata={"source": f"/manuals/titanic-{i}.txt", "page_label": str(i + 3)},
            )
            for i, text in enumerate(TITANIC)
        ]
    )
    return store


def offline_chain() -> TypedRAGRunnable:
    return TypedRAGRunnable.from_components(vector_store().as_retriever())


# ---------------------------------------------------------------- their retriever inside typedrag


@pytest.mark.parametrize(
    "make",
    [lambda s: s, lambda s: s.as_retriever(), lambda s: s.as_retriever(search_type="mmr")],
    ids=["vector-store", "similarity-retriever", "mmr-retriever"],
)
def test_a_vector_store_or_its_retriever_gives_k_passages_with_their_ids_titles_and_pages(make):
    retriever = LangChainRetriever(make(vector_store()))
    hits = retriever.search(QUESTION, 3)
    assert len(hits) == 3
    ids = {f"titanic-{i}" for i in range(len(TITANIC))}
    for hit in hits:
        position = int(hit.passage_id.rsplit("-", 1)[1])
        assert hit.passage_id in ids and hit.passage.text == TITANIC[position]
        assert hit.passage.doc_id == f"/manuals/titanic-{position}.txt"
        assert hit.passage.title == f"titanic-{position}.txt"  # the file name, not the whole path
        assert hit.passage.page == position + 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert [len(r) for r in retriever.search_many([QUESTION, "iceberg"], 2)] == [2, 2]


class AsyncOnlyRetriever(BaseRetriever):
    """A retriever with only the async path, as some database clients are."""

    texts: list[str]

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        raise NotImplementedError("async only")

    async def _aget_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        await asyncio.sleep(0)
        words = set(query.lower().split())
        ranked = sorted(self.texts, key=lambda t: -len(words & set(t.lower().split())))
        return [
            Document(page_content=t, metadata={"title": "Titanic", "Header 1": "Sinking", "Header 2": "Causes"})
            for t in ranked
        ]


def test_an_async_only_retriever_works_from_typedrags_worker_threads_and_maps_markdown_headers():
    retriever = LangChainRetriever(AsyncOnlyRetriever(texts=TITANIC))
    hits = retriever.search("iceberg struck", 2)
    assert len(hits) == 2 and hits[0].passage.section == "Sinking › Causes"
    result = asyncio.run(Pipeline(OfflineEngine(), retriever).answer(QUESTION))  # search runs in worker threads
    assert result.sources and all(s.title == "Titanic" for s in result.sources)


def test_sources_map_to_documents_and_back_to_the_same_passage():
    source = Source(
        number=2,
        passage_id="manual#7",
        title="Manual",
        section="Boats › Davits",
        page=12,
        page_end=13,
        text="Lifeboats hang from davits.",
        score=0.5,
    )
    document = document_of(source)
    assert document.id == "manual#7" and document.metadata["page"] == 11 and document.metadata["page_label"] == "12"
    assert document.metadata["source_number"] == 2 and document.metadata["score"] == 0.5
    assert passage_of_document(document) == Passage(
        "manual#7", "manual", "Manual", "Lifeboats hang from davits.", "Boats › Davits", 12, 13
    )


# ---------------------------------------------------------------- typedrag inside their chains


def test_invoke_returns_the_typed_answer_with_sources_as_the_stores_documents():
    output = offline_chain().invoke({"question": QUESTION})
    trace = output["trace"]
    assert (
        output["type"] == trace.type.type and output["strategy"] == trace.strategy and output["answer"] == trace.answer
    )
    assert output["sources"] and all(isinstance(d, Document) for d in output["sources"])
    assert [d.id for d in output["sources"]] == [s.passage_id for s in trace.sources]
    assert all(d.id.startswith("titanic-") for d in output["sources"])
    assert [d.metadata["source_number"] for d in output["sources"]] == list(range(1, len(output["sources"]) + 1))


def test_stream_yields_answer_tokens_then_the_rest_and_the_chunks_add_up_to_the_output():
    chunks = list(offline_chain().stream(QUESTION))
    tokens = [c["answer"] for c in chunks if "answer" in c]
    assert len(tokens) > 1 and "sources" in chunks[-1] and "answer" not in chunks[-1]
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk  # LangChain's AddableDict: a stream's chunks add up to the whole output
    assert merged["answer"] == "".join(tokens) == chunks[-1]["trace"].answer
    assert merged["type"] == chunks[-1]["trace"].type.type and merged["sources"] == chunks[-1]["sources"]


async def test_ainvoke_and_astream_give_the_same_answer_as_invoke():
    chain = offline_chain()
    output = await chain.ainvoke(QUESTION)
    chunks = [chunk async for chunk in chain.astream(QUESTION)]
    assert "".join(c.get("answer", "") for c in chunks) == output["answer"] == chain.invoke(QUESTION)["answer"]
    assert chunks[-1]["sources"][0].id == output["sources"][0].id


def test_batch_answers_each_question_in_order():
    questions = [QUESTION, "How do icebergs form?"]
    outputs = offline_chain().batch(questions, {"max_concurrency": 2})
    assert [o["question"] for o in outputs] == questions
    assert all(o["answer"] for o in outputs)


def test_the_chain_is_traced_by_langchain_callbacks_like_any_runnable():
    class Runs(BaseCallbackHandler):
        def __init__(self) -> None:
            self.started: list[str] = []
            self.ended: list[Any] = []

        def on_chain_start(self, serialized, inputs, *, name=None, **kwargs):
            self.started.append(name)

        def on_chain_end(self, outputs, **kwargs):
            self.ended.append(outputs)

    runs = Runs()
    offline_chain().invoke(QUESTION, {"callbacks": [runs]})
    assert "TypedRAG" in runs.started and runs.ended and runs.ended[-1]["answer"]


def test_the_graph_and_the_schemas_build_on_the_lowest_supported_python():
    """Issue 35, F1: on Python 3.11 pydantic refuses typing.TypedDict, and get_graph() reads the output schema."""
    chain = offline_chain()
    graph = chain.get_graph()
    assert [node.name for node in graph.nodes.values()] == ["TypedRAGInput", "TypedRAG", "TypedRAGOutput"]
    output = chain.get_output_jsonschema()
    assert {"answer", "type", "strategy", "sources", "trace"} <= set(output["$defs"]["TypedRAGOutput"]["properties"])
    assert "TypedRAG --> TypedRAGOutput" in graph.draw_mermaid()
    assert chain.get_input_jsonschema()


def test_a_prompt_template_or_a_chat_prompt_or_messages_can_feed_the_runnable():
    """Issue 35, F2: what LangChain's own model runnables take; the question is the last human message's text."""
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.prompts import ChatPromptTemplate, PromptTemplate

    chain = offline_chain()
    expected = chain.invoke(QUESTION)["answer"]
    chat = ChatPromptTemplate.from_messages([("system", "Answer briefly."), ("human", "{q}")])
    assert (PromptTemplate.from_template("{q}") | chain).invoke({"q": QUESTION}).content == expected
    assert (chat | chain).invoke({"q": QUESTION}).response_metadata["question"] == QUESTION
    earlier = [HumanMessage("How do icebergs form?"), AIMessage("From glaciers."), SystemMessage("Be brief.")]
    assert chain.invoke([*earlier, HumanMessage(QUESTION)]).response_metadata["question"] == QUESTION
    assert chain.invoke([("human", QUESTION)]).response_metadata["question"] == QUESTION
    assert "".join(c.text for c in (chat | chain).stream({"q": QUESTION})) == expected
    with pytest.raises(ValueError, match="no human message"):
        chain.invoke([SystemMessage("Be brief.")])


def test_from_components_takes_the_method_and_a_forced_type():
    """Issue 35, minor: `method=` went on to Pipeline and raised TypeError."""
    chain = TypedRAGRunnable.from_components(vector_store().as_retriever(), method="rag")
    assert chain.method == "rag" and chain.invoke(QUESTION)["strategy"] == "rag"
    forced = TypedRAGRunnable.from_components(vector_store().as_retriever(), forced_type="debate")
    assert forced.invoke(QUESTION)["type"] == "DEBATE"


def test_typed_evidence_retriever_returns_the_answers_sources():
    pipeline = offline_chain().pipeline
    documents = TypedRAGRetriever(pipeline=pipeline, k=2).invoke(QUESTION)
    result = asyncio.run(pipeline.answer(QUESTION))
    assert [d.id for d in documents] == [s.passage_id for s in result.sources[:2]]


class TestTypedRAGRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's own contract for retrievers, on the typed evidence retriever."""

    @property
    def retriever_constructor(self) -> type[TypedRAGRetriever]:
        return TypedRAGRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"pipeline": Pipeline(OfflineEngine(), ListRetriever(TITANIC)), "k": 3}

    @property
    def retriever_query_example(self) -> str:
        return QUESTION


# ---------------------------------------------------------------- as LangChain users write it (issue 41 #11, #17, #18)


def test_as_tool_with_a_name_and_a_description_is_a_question_tool():
    """Issue 41 #11: `as_tool(name=..., description=...)` raised unless `arg_types` was given. A model calls it
    with a question; it gets the answer and its cited sources as text, the application the whole output."""
    from langchain_core.messages import ToolMessage

    tool = offline_chain().as_tool(name="manuals", description="Answers questions about the Titanic from the manuals.")
    assert tool.name == "manuals" and tool.description.startswith("Answers questions about the Titanic")
    assert set(tool.args) == {"question"} and tool.args["question"]["type"] == "string"
    message = tool.invoke({"type": "tool_call", "id": "call-1", "name": "manuals", "args": {"question": QUESTION}})
    assert isinstance(message, ToolMessage) and message.tool_call_id == "call-1"
    output = message.artifact
    assert message.content.startswith(output["answer"]) and "\nSources:\n[" in message.content
    assert all(
        f"({d.id})" in message.content
        for d in output["sources"]
        if d.metadata["source_number"] in {n for c in output["trace"].citations for n in c.source_numbers}
    )
    assert asyncio.run(tool.ainvoke({"question": QUESTION})).startswith(output["answer"])
    typed = offline_chain().as_tool(arg_types={"question": str})  # LangChain's own way still works
    assert typed.invoke({"question": QUESTION})["answer"] == output["answer"]


class TestTypedRAGToolStandard(ToolsUnitTests):
    """LangChain's own contract for tools (unit part), on `TypedRAGRunnable.as_tool(name=..., description=...)`."""

    @property
    def tool_constructor(self):
        return offline_chain().as_tool(
            name="titanic_manuals", description="Answers questions from the Titanic manuals."
        )

    @property
    def tool_invoke_params_example(self) -> dict:
        return {"question": QUESTION}


class TestTypedRAGToolIntegrationStandard(ToolsIntegrationTests):
    """LangChain's own contract for tools (integration part): a ToolCall gives a ToolMessage, sync and async."""

    @property
    def tool_constructor(self):
        return offline_chain().as_tool(
            name="titanic_manuals", description="Answers questions from the Titanic manuals."
        )

    @property
    def tool_invoke_params_example(self) -> dict:
        return {"question": QUESTION}


def test_an_output_parser_after_the_runnable_reads_the_answer():
    """Issue 41 #11: `typed | StrOutputParser()` raised a ValidationError (the output is a dict)."""
    from langchain_core.output_parsers import StrOutputParser

    chain = offline_chain()
    answer = chain.invoke(QUESTION)["answer"]
    text = chain | StrOutputParser()
    assert text.invoke(QUESTION) == answer
    assert "".join(text.stream(QUESTION)) == answer
    assert asyncio.run(text.ainvoke({"question": QUESTION})) == answer
    assert (chain.pick("answer") | StrOutputParser()).invoke(QUESTION) == answer  # in a longer chain


def test_typedrag_after_a_prompt_answers_as_a_chat_model_does_so_a_parser_reads_the_text():
    """Issue 55 E5: `PromptTemplate.from_template("{q}") | typed_rag | StrOutputParser()`, a newcomer's first chain,
    raised pydantic's `ValidationError for Generation` (the parser got the output dict; LangChain builds that
    sequence itself, so `typed | parser` picking the answer never applied). Fed a prompt, typedrag answers as the
    model of `prompt | model | parser` does: a message, its content the answer, the rest in its metadata."""
    from langchain_core.messages import AIMessage
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate, PromptTemplate

    typed_rag = offline_chain()
    answer = typed_rag.invoke(QUESTION)["answer"]
    for prompt in (PromptTemplate.from_template("{q}"), ChatPromptTemplate.from_messages([("human", "{q}")])):
        text = prompt | typed_rag | StrOutputParser()
        assert text.invoke({"q": QUESTION}) == answer
        assert "".join(text.stream({"q": QUESTION})) == answer
        assert asyncio.run(text.ainvoke({"q": QUESTION})) == answer
        assert text.batch([{"q": QUESTION}]) == [answer]
        message = (prompt | typed_rag).invoke({"q": QUESTION})
        assert isinstance(message, AIMessage) and message.content == answer
        rest = message.response_metadata
        assert (
            rest["question"] == QUESTION
            and rest["trace"].answer == answer
            and rest["sources"][0].metadata["passage_id"]
        )
        streamed = None
        for chunk in (prompt | typed_rag).stream({"q": QUESTION}):
            streamed = chunk if streamed is None else streamed + chunk
        assert streamed.content == answer and streamed.response_metadata["trace"].answer == answer


class RetrieverRuns(BaseCallbackHandler):
    """Every retriever run: its name, its parent run, the documents it ended with."""

    def __init__(self) -> None:
        self.chains: set[Any] = set()
        self.started: dict[Any, tuple[str, Any]] = {}
        self.ended: dict[Any, int] = {}

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, name=None, **kwargs):
        if name == "TypedRAG":
            self.chains.add(run_id)

    def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None, name=None, **kwargs):
        self.started[run_id] = (name, parent_run_id)

    def on_retriever_end(self, documents, *, run_id, **kwargs):
        self.ended[run_id] = len(documents)


@pytest.mark.parametrize("how", ["invoke", "stream", "ainvoke"])
@pytest.mark.parametrize(
    ("make", "name"),
    [(lambda s: s.as_retriever(), "VectorStoreRetriever"), (lambda s: s, "InMemoryVectorStore")],
    ids=["as_retriever", "vector-store"],
)
def test_searches_of_a_vector_store_show_as_retriever_runs_under_the_chain(make, name, how):
    """Issue 41 #17: typedrag asks the store directly (for its scores), so LangChain callbacks and LangSmith saw no
    retrieval at all; each search is now a retriever run, under the chain's run, with the documents it found."""
    runs = RetrieverRuns()
    chain = TypedRAGRunnable.from_components(make(vector_store()), forced_type="comparison")
    config = {"callbacks": [runs]}
    question = "What is the difference between the Titanic and an iceberg?"
    if how == "invoke":
        chain.invoke(question, config)
    elif how == "stream":
        list(chain.stream(question, config))
    else:
        asyncio.run(chain.ainvoke(question, config))
    assert len(runs.started) >= 3  # the question and each compared item
    assert {n for n, _ in runs.started.values()} == {name}
    assert all(parent in runs.chains for _, parent in runs.started.values())
    assert runs.ended.keys() == runs.started.keys() and all(count > 0 for count in runs.ended.values())


class WholeFile(BaseRetriever):
    """A retriever that returns a long file whole, as a loader without a text splitter gives it."""

    text: str

    def _get_relevant_documents(self, query: str, *, run_manager: Any, **kwargs: Any) -> list[Document]:
        return [Document(id="news", page_content=self.text, metadata={"source": "/usr/share/doc/valgrind/NEWS"})]


def test_a_long_document_from_the_framework_is_read_a_passage_at_a_time():
    """Issue 41 #18: a 212 KB document was used whole, every sentence of it embedded for one answer (minutes). It
    is cut as typedrag's index cuts documents, and a search gives only its best windows."""
    retriever = LangChainRetriever(WholeFile(text=long_document()))
    hits = retriever.search(LONG_QUESTION, 5)
    assert 1 <= len(hits) <= 5 and all(len(h.passage.text.split()) <= MOST_WORDS for h in hits)
    assert LONG_ANSWER in hits[0].passage.text and hits[0].passage_id.startswith("news#")
    assert hits[0].passage.doc_id == "/usr/share/doc/valgrind/NEWS" and hits[0].passage.title == "NEWS"
    output = TypedRAGRunnable.from_components(WholeFile(text=long_document())).invoke(LONG_QUESTION)
    assert output["sources"] and all(len(d.page_content.split()) <= MOST_WORDS for d in output["sources"])
    assert any(LONG_ANSWER in d.page_content for d in output["sources"])  # the window that answers is read


# ---------------------------------------------------------------- their chat model inside typedrag


class Replying(SimpleChatModel):
    """LangChain's simple chat model base, replying by what the last message asks (not by call order)."""

    reply: Any

    @property
    def _llm_type(self) -> str:
        return "replying-fake"

    def _call(self, messages, stop=None, run_manager=None, **kwargs) -> str:
        return self.reply(messages[-1].content)


def llm_pipeline(model) -> Pipeline:
    """Without query expansion: a fake chat model's scripted replies go to the answer."""
    return Pipeline(
        LLMEngine(LangChainChatModel(model)), ListRetriever(TITANIC), settings=PipelineSettings(expand_queries=False)
    )


def test_a_plan_that_fails_is_repaired_once_then_falls_back_to_plain_rag_and_the_trace_says_so():
    model = Replying(
        reply=replies_by_kind(plan="no plan here", repair="still no plan", answer="It struck an iceberg [1].")
    )
    result = asyncio.run(llm_pipeline(model).answer(QUESTION, forced_type="reason"))
    plan_call = plan_call_of(result)
    assert plan_call.role == "plan:reason" and plan_call.requests == 2  # the reply, then ONE repair
    assert plan_call.structured is StructuredOutcome.FAILED and "after one repair" in plan_call.error
    assert plan_call.reply == "still no plan"
    assert result.strategy == "rag" and result.plan is None
    assert any(f.step == "reason" and "plain RAG" in f.reason for f in result.fallbacks)
    assert result.answer == "It struck an iceberg [1]."


def test_a_plan_repaired_on_the_second_reply_is_used():
    model = Replying(reply=replies_by_kind(plan="no plan here", repair=PLAN, answer="Because of the iceberg [1]."))
    result = asyncio.run(llm_pipeline(model).answer(QUESTION, forced_type="reason"))
    assert plan_call_of(result).structured is StructuredOutcome.REPAIRED and plan_call_of(result).requests == 2
    assert result.plan_used and result.plan["sub_queries"] == json.loads(PLAN)["sub_queries"]


def test_token_usage_and_finish_reason_from_the_reply_reach_the_trace():
    reply = AIMessage(
        content="It struck an iceberg [1].",
        usage_metadata={"input_tokens": 120, "output_tokens": 9, "total_tokens": 129},
        response_metadata={"finish_reason": "stop"},
    )
    model = GenericFakeChatModel(messages=iter([reply]))
    result = asyncio.run(llm_pipeline(model).answer(QUESTION, method="rag"))
    call = result.llm_calls[-1]
    assert (call.prompt_tokens, call.completion_tokens, call.finish_reason) == (120, 9, "stop")
    assert result.usage.prompt_tokens == 120


def test_the_models_stream_reaches_the_runnables_stream():
    model = FakeListChatModel(responses=["It struck an iceberg [1] and sank."])
    chain = TypedRAGRunnable(llm_pipeline(model), method="rag")
    tokens = [c["answer"] for c in chain.stream(QUESTION) if "answer" in c]
    assert (
        len(tokens) > 5 and "".join(tokens) == "It struck an iceberg [1] and sank."
    )  # the fake streams character by character


def test_a_failing_model_is_an_llm_error_the_pipeline_falls_back_on():
    class Broken(FakeListChatModel):
        def _call(self, *args, **kwargs):
            raise RuntimeError("the provider is down")

    with pytest.raises(LLMError, match="the provider is down"):
        asyncio.run(llm_pipeline(Broken(responses=["x"])).answer(QUESTION, method="rag"))


# ---------------------------------------------------------------- across the real OpenAI client


def flaky_plans(repair_fixes_it: bool):
    """Plans come back unusable; the repair round fixes them or not; answers are the stub's cited ones."""

    def respond(request):
        if is_repair(request.last_user):
            return Reply(content=PLAN if repair_fixes_it else "still not JSON")
        if request.schema_name:
            return Reply(content="Sure! I will think about a plan.")
        return default_responder(request)

    return respond


@pytest.mark.parametrize("repair_fixes_it", [True, False])
def test_chatopenai_on_the_stub_sends_the_schema_repairs_streams_and_counts_tokens(repair_fixes_it):
    from langchain_openai import ChatOpenAI

    with OpenAIStubServer(flaky_plans(repair_fixes_it)) as server:
        model = ChatOpenAI(
            model="stub-model", base_url=server.base_url, api_key="sk-test", max_retries=0, stream_usage=True
        )
        chain = TypedRAGRunnable(llm_pipeline(model), forced_type="reason")
        chunks = list(chain.stream(QUESTION))
    result = chunks[-1]["trace"]
    plan_requests = [r for r in server.requests if r.schema_name == "SubQueryPlan"]
    assert len(plan_requests) == 2 and is_repair(
        plan_requests[1].last_user
    )  # the schema went as response_format, twice
    assert plan_requests[0].body["response_format"]["type"] == "json_schema"
    plan_call = plan_call_of(result)
    assert plan_call.requests == 2 and plan_call.prompt_tokens > 0 and plan_call.completion_tokens > 0
    assert any(r.body.get("stream") for r in server.requests)  # the final answer streamed over HTTP
    tokens = [c["answer"] for c in chunks if "answer" in c]
    assert len(tokens) > 1 and "".join(tokens) == result.answer
    if repair_fixes_it:
        assert plan_call.structured is StructuredOutcome.REPAIRED and result.plan_used and result.strategy == "reason"
    else:
        assert plan_call.structured is StructuredOutcome.FAILED and result.strategy == "rag"
        assert any(f.step == "reason" for f in result.fallbacks)


def test_an_endpoint_that_refuses_response_format_gets_plain_text_plans_from_then_on():
    def respond(request):
        if request.body.get("response_format"):
            return Reply(status=400, content="response_format is not supported by this server")
        if '"sub_queries"' in request.last_user:
            return Reply(content=PLAN)
        return default_responder(request)

    from langchain_openai import ChatOpenAI

    with OpenAIStubServer(respond) as server:
        model = LangChainChatModel(
            ChatOpenAI(model="stub-model", base_url=server.base_url, api_key="sk-test", max_retries=0)
        )
        unexpanded = PipelineSettings(expand_queries=False)  # the plan is the first structured request
        result = asyncio.run(
            Pipeline(LLMEngine(model), ListRetriever(TITANIC), settings=unexpanded).answer(
                QUESTION, forced_type="reason"
            )
        )
    assert (
        plan_call_of(result).structured is StructuredOutcome.OK
        and plan_call_of(result).requests == 2
        and result.plan_used
    )
    assert model.structured_output is False
    assert sum(1 for r in server.requests if r.body.get("response_format")) == 1  # refused once, never sent again


# ---------------------------------------------------------------- conversations


def ships_chain() -> TypedRAGRunnable:
    return TypedRAGRunnable(Pipeline(OfflineEngine(), ListRetriever(SHIPS)))


def test_a_list_of_messages_is_a_conversation_its_last_human_message_the_question():
    messages = [
        SystemMessage("Answer briefly."),
        HumanMessage(FIRST),
        AIMessage("It was a British liner."),
        HumanMessage(FOLLOW_UP),
    ]
    output = ships_chain().invoke(messages).response_metadata
    trace = output["trace"]
    assert trace.question == FOLLOW_UP and trace.rewrite.history_turns == 2 and read_with_history(trace)
    assert trace.instructions == "Answer briefly."
    assert output["sources"][0].page_content == SHIPS[1] and output["abstained"] is False
    alone = ships_chain().invoke(FOLLOW_UP)["trace"]
    assert not read_with_history(alone)  # the same question without the conversation finds the Lusitania


def test_chat_history_in_a_dict_and_a_chat_prompt_value_are_conversations_too():
    chain = ships_chain()
    history = [("human", FIRST), ("ai", "It was a British liner.")]
    assert read_with_history(chain.invoke({"input": FOLLOW_UP, "chat_history": history})["trace"])
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("chat_history"), ("human", "{input}")])
    composed = prompt | chain
    assert read_with_history(composed.invoke({"input": FOLLOW_UP, "chat_history": history}).response_metadata["trace"])
    chunks = list(chain.stream({"input": FOLLOW_UP, "chat_history": history}))
    assert read_with_history(chunks[-1]["trace"])
    with pytest.raises(ValueError, match="needs a human message"):
        chain.invoke([SystemMessage("Answer briefly.")])


def test_labelled_knowledge_reaches_the_runnables_output_and_stream_apart_and_labelled():
    """knowledge = labelled through ChatOpenAI on the stub: the model's own sentences end the answer as a paragraph
    of their own, "Not from your documents: ...", are listed in `unsourced`, and the stream adds up to the same."""
    from langchain_openai import ChatOpenAI

    def knowing(request):
        if request.schema_name == "LabelledAnswer":
            return Reply(
                content=json.dumps(
                    {
                        "from_sources": "It struck an iceberg [1].",
                        "not_covered": "the band",
                        "from_own_knowledge": ["The band is said to have played on."],
                    }
                )
            )
        return default_responder(request)

    with OpenAIStubServer(knowing) as server:
        model = ChatOpenAI(model="stub-model", base_url=server.base_url, api_key="sk-test", max_retries=0)
        chain = TypedRAGRunnable.from_components(
            vector_store().as_retriever(), model, method="rag", settings=PipelineSettings(knowledge="labelled")
        )
        output = chain.invoke(QUESTION)
        chunks = list(chain.stream(QUESTION))
    assert (
        output["answer"] == "It struck an iceberg [1].\n\nNot from your documents: The band is said to have played on."
    )
    assert (
        output["unsourced"] == ["The band is said to have played on."]
        and output["trace"].answer == "It struck an iceberg [1]."
    )
    assert [c.source_numbers for c in output["trace"].citations] == [[1]]
    assert (
        "".join(c.get("answer", "") for c in chunks) == output["answer"]
        and chunks[-1]["unsourced"] == output["unsourced"]
    )
