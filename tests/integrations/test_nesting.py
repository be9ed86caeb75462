"""typedrag's inner runs stay nested under the host framework's run, whichever thread they run in: LangChain's
callbacks and LlamaIndex's instrumentation keep the current run in contextvars, which a worker thread does
not inherit unless typedrag carries them over (typedrag/integrations/threads.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core import Document as LlamaDocument  # noqa: E402
from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.instrumentation import get_dispatcher  # noqa: E402
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler  # noqa: E402

from typedrag import OfflineEngine, Pipeline  # noqa: E402
from typedrag.integrations.langchain import LangChainRetriever, TypedRAGRunnable  # noqa: E402
from typedrag.integrations.llamaindex import TypedRAGChatEngine, TypedRAGQueryEngine  # noqa: E402

COMETS = [
    "A comet is an icy body that releases gas and dust when it passes close to the Sun.",
    "An asteroid is a rocky or metallic body orbiting the Sun, mostly between Mars and Jupiter.",
    "Comets grow glowing tails near the Sun, while asteroids mostly do not.",
    "The asteroid belt lies between the orbits of Mars and Jupiter.",
]
COMPARISON = "What is the difference between a comet and an asteroid?"
SEARCHES = 3  # the question, and one query per compared item


class WordRetriever(BaseRetriever):
    """A plain LangChain retriever (not a vector store, which typedrag asks directly): each search is a run."""

    texts: list[str]

    def _get_relevant_documents(self, query: str, *, run_manager: Any, **kwargs: Any) -> list[Document]:
        words = set(query.lower().split())
        ranked = sorted(self.texts, key=lambda t: -len(words & set(t.lower().split())))
        return [Document(page_content=t, metadata={"title": f"Astronomy {i}"}) for i, t in enumerate(ranked)]


class Runs(BaseCallbackHandler):
    """The TypedRAG chain's run ids and the parent of every retriever run."""

    def __init__(self) -> None:
        self.chains: set[Any] = set()
        self.retriever_parents: list[Any] = []

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, name=None, **kwargs):
        if name == "TypedRAG":
            self.chains.add(run_id)

    def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None, **kwargs):
        self.retriever_parents.append(parent_run_id)

    def nested(self) -> int:
        return sum(parent in self.chains for parent in self.retriever_parents)


def comparison_chain() -> TypedRAGRunnable:
    return TypedRAGRunnable(
        Pipeline(OfflineEngine(), LangChainRetriever(WordRetriever(texts=COMETS))), forced_type="comparison"
    )


@pytest.mark.parametrize("how", ["invoke", "stream", "batch"])
def test_every_inner_retriever_run_is_nested_under_the_chains_run_in_sync_calls(how):
    runs = Runs()
    chain = comparison_chain()
    config = {"callbacks": [runs]}
    if how == "invoke":
        chain.invoke(COMPARISON, config)
    elif how == "stream":
        chunks = list(chain.stream(COMPARISON, config))
        assert chunks[-1]["strategy"] == "comparison"
    else:
        chain.batch([COMPARISON], config)
    assert len(runs.chains) == 1
    assert (len(runs.retriever_parents), runs.nested()) == (SEARCHES, SEARCHES)


@pytest.mark.parametrize("how", ["ainvoke", "astream", "abatch"])
async def test_every_inner_retriever_run_is_nested_under_the_chains_run_in_async_calls(how):
    runs = Runs()
    chain = comparison_chain()
    config = {"callbacks": [runs]}
    if how == "ainvoke":
        await chain.ainvoke(COMPARISON, config)
    elif how == "astream":
        [chunk async for chunk in chain.astream(COMPARISON, config)]
    else:
        await chain.abatch([COMPARISON], config)
    assert (len(runs.retriever_parents), runs.nested()) == (SEARCHES, SEARCHES)


async def test_sync_invoke_from_inside_a_running_event_loop_nests_too():
    """A notebook or an async app calling the sync API: typedrag answers in a helper thread with its own loop."""
    runs = Runs()
    comparison_chain().invoke(COMPARISON, {"callbacks": [runs]})
    assert (len(runs.retriever_parents), runs.nested()) == (SEARCHES, SEARCHES)


@pytest.fixture
def llama_spans():
    handler = SimpleSpanHandler()
    dispatcher = get_dispatcher()
    dispatcher.add_span_handler(handler)
    try:
        yield handler
    finally:
        dispatcher.span_handlers.remove(handler)


def retrievals_under_the_query(handler: SimpleSpanHandler, engine: str = "TypedRAGQueryEngine.") -> tuple[int, int]:
    """(retriever spans, how many of them descend from the query (or chat) engine's span)."""
    spans = {span.id_: span for span in handler.completed_spans}

    def root(span):
        while span.parent_id in spans:
            span = spans[span.parent_id]
        return span

    retrievals = [
        s
        for s in spans.values()
        if s.id_.startswith(("VectorIndexRetriever.retrieve", "VectorIndexRetriever.aretrieve"))
    ]
    return len(retrievals), sum(root(s).id_.startswith(engine) for s in retrievals)


@pytest.mark.parametrize("streaming", [False, True], ids=["response", "streaming"])
def test_llamaindex_sees_the_typed_plans_retrievals_inside_the_query_span(llama_spans, streaming):
    index = VectorStoreIndex.from_documents(
        [LlamaDocument(text=t) for t in COMETS], embed_model=MockEmbedding(embed_dim=8)
    )
    engine = TypedRAGQueryEngine(
        TypedRAGQueryEngine.from_components(index).pipeline, streaming=streaming, forced_type="comparison"
    )
    llama_spans.completed_spans.clear()
    response = engine.query(COMPARISON)
    if streaming:  # read after `query` returned and its span ended
        assert "".join(response.response_gen)
    assert retrievals_under_the_query(llama_spans) == (SEARCHES, SEARCHES)

    llama_spans.completed_spans.clear()

    async def aquery() -> None:
        response = await engine.aquery(COMPARISON)
        if streaming:
            assert "".join([piece async for piece in response.async_response_gen()])

    asyncio.run(aquery())
    assert retrievals_under_the_query(llama_spans) == (SEARCHES, SEARCHES)


@pytest.mark.parametrize("how", ["chat", "stream_chat", "astream_chat"])
def test_llamaindex_sees_a_chat_messages_retrievals_inside_the_chat_engines_span(llama_spans, how):
    index = VectorStoreIndex.from_documents(
        [LlamaDocument(text=t) for t in COMETS], embed_model=MockEmbedding(embed_dim=8)
    )
    engine = TypedRAGChatEngine(TypedRAGChatEngine.from_components(index).pipeline, forced_type="comparison")
    llama_spans.completed_spans.clear()
    if how == "chat":
        assert engine.chat(COMPARISON).response
    elif how == "stream_chat":  # the deltas are read after `stream_chat` returned and its span ended
        assert "".join(response.delta for response in engine.stream_chat(COMPARISON).chat_stream)
    else:

        async def astream_chat() -> str:
            response = await engine.astream_chat(COMPARISON)
            return "".join([piece async for piece in response.async_response_gen()])

        assert asyncio.run(astream_chat())
    assert retrievals_under_the_query(llama_spans, "TypedRAGChatEngine.") == (SEARCHES, SEARCHES)


def test_leaving_a_synchronous_stream_early_stops_its_producer_even_while_it_waits():
    """A framework's sync stream (`iterate_sync`) left after its first piece: the producer is cancelled where it
    stands, here waiting for a model that has not answered yet, so no more model calls are spent on it."""
    import threading

    from typedrag.integrations.threads import iterate_sync

    stopped = threading.Event()

    async def pieces():
        try:
            yield "first"
            await asyncio.sleep(3600)  # a model that takes its time over the next piece
            yield "second"
        finally:
            stopped.set()

    stream = iterate_sync(pieces)
    assert next(stream) == "first"
    stream.close()
    assert stopped.wait(60), "the producer went on after the stream was left"


def test_a_synchronous_stream_hands_its_producers_error_to_the_reader():
    from typedrag.integrations.threads import iterate_sync

    async def pieces():
        yield "first"
        raise ValueError("the endpoint broke")

    stream = iterate_sync(pieces)
    assert next(stream) == "first"
    with pytest.raises(ValueError, match="the endpoint broke"):
        next(stream)
