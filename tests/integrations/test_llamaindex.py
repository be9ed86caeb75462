"""typedrag and LlamaIndex both ways, against llama-index-core's own doubles (MockLLM, MockEmbedding, a
CustomLLM), its VectorStoreIndex, and (when llama-index-llms-openai-like is installed) OpenAILike on the
loopback OpenAI stub. Nothing here may fetch NLTK data or tiktoken files: the guard in conftest fails any
test that tries. The last tests show when LlamaIndex would fetch them (only when NLTK_DATA or
TIKTOKEN_CACHE_DIR point at a folder without them: it ships both in llama_index/core/_static) and that
ingestion with the shipped data, or with data the test provides, runs with the network refused."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.llms import CustomLLM, MockLLM  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402

from typedrag import ListRetriever, OfflineEngine, Pipeline  # noqa: E402
from typedrag.engines.llm_engine import LLMEngine  # noqa: E402
from typedrag.integrations.llamaindex import (  # noqa: E402
    LlamaIndexChatModel,
    LlamaIndexRetriever,
    TypedRAGChatEngine,
    TypedRAGQueryEngine,
    node_of,
    passage_of_node,
)
from typedrag.llm.base import StructuredOutcome  # noqa: E402
from typedrag.records import Passage  # noqa: E402
from typedrag.result import AnswerResult, Source  # noqa: E402
from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_responder  # noqa: E402

from . import network_guard  # noqa: E402
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

HERE = Path(__file__).resolve().parent


def index() -> VectorStoreIndex:
    """Nodes built directly: no text splitter runs, so no tokenizer or NLTK data is needed."""
    nodes = [
        TextNode(id_=f"titanic-{i}", text=text, metadata={"title": "Titanic", "page_label": str(i + 1)})
        for i, text in enumerate(TITANIC)
    ]
    return VectorStoreIndex(nodes=nodes, embed_model=MockEmbedding(embed_dim=8))


class ScriptedLLM(CustomLLM):
    """LlamaIndex's own base for custom LLMs, answering from a script; reports token usage as OpenAI does."""

    replies: list[str]
    position: int = 0
    reply: Any = None  # replies chosen by the prompt instead (tests/integrations/conftest.replies_by_kind)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted")

    def _next(self, prompt: str = "") -> str:
        if self.reply is not None:
            return self.reply(prompt)
        reply = self.replies[min(self.position, len(self.replies) - 1)]
        self.position += 1
        return reply

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        text = self._next(prompt)
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
        return CompletionResponse(text=text, raw={"usage": usage, "choices": [{"finish_reason": "stop"}]})

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text, sent = self._next(prompt), ""
        for word in text.split(" "):
            piece = word if not sent else " " + word
            sent += piece
            yield CompletionResponse(text=sent, delta=piece)


def llm_pipeline(llm) -> Pipeline:
    return Pipeline(LLMEngine(LlamaIndexChatModel(llm)), ListRetriever(TITANIC))


# ---------------------------------------------------------------- their retriever inside typedrag


def test_an_index_gives_exactly_k_nodes_as_passages_with_their_ids_and_pages():
    retriever = LlamaIndexRetriever(index())
    for k in (1, 3):
        hits = retriever.search(QUESTION, k)
        assert len(hits) == k
    hit = retriever.search(QUESTION, 1)[0]
    position = int(hit.passage_id.rsplit("-", 1)[1])
    assert hit.passage.text == TITANIC[position] and hit.passage.title == "Titanic" and hit.passage.page == position + 1
    assert isinstance(hit.score, float)


def test_a_configured_retriever_is_cut_to_k():
    retriever = LlamaIndexRetriever(index().as_retriever(similarity_top_k=4))
    assert len(retriever.search(QUESTION, 2)) == 2 and len(retriever.search(QUESTION, 10)) == 4


class AsyncOnlyRetriever(BaseRetriever):
    def _retrieve(self, query_bundle):
        raise NotImplementedError("async only")

    async def _aretrieve(self, query_bundle):
        await asyncio.sleep(0)
        return [NodeWithScore(node=TextNode(id_=f"a-{i}", text=t), score=1.0 - i / 10) for i, t in enumerate(TITANIC)]


def test_an_async_only_retriever_works_from_typedrags_worker_threads():
    retriever = LlamaIndexRetriever(AsyncOnlyRetriever())
    assert [h.passage_id for h in retriever.search("iceberg", 2)] == ["a-0", "a-1"]
    result = asyncio.run(Pipeline(OfflineEngine(), retriever).answer(QUESTION))
    assert result.sources and all(s.passage_id.startswith("a-") for s in result.sources)


def test_sources_map_to_nodes_and_back_to_the_same_passage():
    source = Source(
        number=1,
        passage_id="manual#7",
        title="Manual",
        section="Boats",
        page=12,
        text="Lifeboats hang from davits.",
        score=0.5,
    )
    node = node_of(source)
    assert node.node_id == "manual#7" and node.score == 0.5 and node.metadata["page_label"] == "12"
    assert passage_of_node(node) == Passage("manual#7", "manual", "Manual", "Lifeboats hang from davits.", "Boats", 12)


# ---------------------------------------------------------------- typedrag inside their apps


def test_query_returns_the_answer_with_scored_source_nodes_and_the_typed_metadata():
    response = TypedRAGQueryEngine.from_components(index()).query(QUESTION)
    trace: AnswerResult = response.metadata["trace"]
    assert str(response) == trace.answer and response.metadata["type"] == trace.type.type
    assert set(response.metadata) >= {"type", "strategy", "plan", "aspects", "fallbacks"}
    assert [n.node_id for n in response.source_nodes] == [s.passage_id for s in trace.sources]
    assert all(n.node_id.startswith("titanic-") and n.score is not None for n in response.source_nodes)


def test_streaming_query_yields_tokens_then_fills_sources_and_metadata():
    response = TypedRAGQueryEngine.from_components(index(), streaming=True).query(QUESTION)
    tokens = list(response.response_gen)
    assert len(tokens) > 1 and response.source_nodes and response.metadata["trace"].answer == "".join(tokens)


async def test_aquery_and_async_streaming():
    engine = TypedRAGQueryEngine.from_components(index())
    answer = (await engine.aquery(QUESTION)).response
    streamed = await TypedRAGQueryEngine.from_components(index(), streaming=True).aquery(QUESTION)
    tokens = [t async for t in streamed.async_response_gen()]
    assert len(tokens) > 1 and "".join(tokens) == answer and streamed.source_nodes


def test_retrieve_gives_the_typed_evidence_pool_as_nodes():
    """Issue 41 #13: `TypedRAGQueryEngine.retrieve()` raised NotImplementedError (LlamaIndex's base); it gives the
    nodes a query answers from, as retriever query engines do, for a QueryBundle or a string, sync or async."""
    from llama_index.core.schema import QueryBundle

    engine = TypedRAGQueryEngine.from_components(index())
    nodes = engine.retrieve(QueryBundle(QUESTION))
    response = engine.query(QUESTION)
    assert nodes and [n.node_id for n in nodes] == [n.node_id for n in response.source_nodes]
    assert all(isinstance(n, NodeWithScore) and n.node_id.startswith("titanic-") and n.score is not None for n in nodes)
    assert [n.node_id for n in engine.retrieve(QUESTION)] == [n.node_id for n in nodes]
    assert [n.node_id for n in asyncio.run(engine.aretrieve(QUESTION))] == [n.node_id for n in nodes]


class WholeFile(BaseRetriever):
    """A retriever that returns a long file as one node, as a reader without a node parser gives it."""

    def _retrieve(self, query_bundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(id_="news", text=long_document(), metadata={"file_name": "NEWS"}), score=0.9)
        ]


def test_a_long_document_from_the_framework_is_read_a_passage_at_a_time():
    """Issue 41 #18: a long node was used whole (every sentence of it embedded for one answer); it is cut as
    typedrag's index cuts documents, and a search gives its best windows."""
    hits = LlamaIndexRetriever(WholeFile()).search(LONG_QUESTION, 4)
    assert 1 <= len(hits) <= 4 and all(len(h.passage.text.split()) <= MOST_WORDS for h in hits)
    assert (
        LONG_ANSWER in hits[0].passage.text
        and hits[0].passage_id.startswith("news#")
        and hits[0].passage.title == "NEWS"
    )
    nodes = TypedRAGQueryEngine.from_components(WholeFile()).query(LONG_QUESTION).source_nodes
    assert nodes and all(len(n.node.get_content().split()) <= MOST_WORDS for n in nodes)


def test_from_components_takes_the_method_and_a_forced_type():
    """Issue 35, minor: `method=` went on to Pipeline and raised TypeError."""
    assert TypedRAGQueryEngine.from_components(index(), method="rag").query(QUESTION).metadata["strategy"] == "rag"
    assert (
        TypedRAGQueryEngine.from_components(index(), forced_type="debate").query(QUESTION).metadata["type"] == "DEBATE"
    )


def test_mockllms_replies_fail_the_plan_which_is_repaired_once_then_falls_back_recorded():
    response = TypedRAGQueryEngine(llm_pipeline(MockLLM(max_tokens=4))).query(QUESTION)
    trace: AnswerResult = response.metadata["trace"]
    plan_call = plan_call_of(trace)
    assert (
        plan_call.requests == 2
        and plan_call.structured is StructuredOutcome.FAILED
        and "after one repair" in plan_call.error
    )
    assert response.metadata["fallbacks"] and response.metadata["strategy"] == "rag"
    assert str(response) == "text text text text"


def test_a_custom_llms_plan_repaired_on_the_second_reply_is_used_and_its_usage_counted():
    llm = ScriptedLLM(
        replies=[],
        reply=replies_by_kind(plan="I would search for the causes.", repair=PLAN, answer="It struck an iceberg [1]."),
    )
    result = asyncio.run(llm_pipeline(llm).answer(QUESTION, forced_type="reason"))
    plan_call = plan_call_of(result)
    assert plan_call.structured is StructuredOutcome.REPAIRED and result.plan_used
    assert plan_call.prompt_tokens > 0 and plan_call.completion_tokens > 0 and plan_call.finish_reason == "stop"


def test_the_llms_stream_reaches_the_query_engines_stream():
    engine = TypedRAGQueryEngine(
        llm_pipeline(ScriptedLLM(replies=["It struck an iceberg [1] and sank fast."])), streaming=True, method="rag"
    )
    response = engine.query(QUESTION)
    tokens = list(response.response_gen)
    assert tokens[:3] == ["It", " struck", " an"] and "".join(tokens) == "It struck an iceberg [1] and sank fast."


def test_openailike_on_the_stub_sends_the_schema_repairs_and_streams():
    openai_like = pytest.importorskip("llama_index.llms.openai_like")

    def respond(request):
        if is_repair(request.last_user):
            return Reply(content="still not JSON")
        if request.schema_name:
            return Reply(content="Sure! A plan.")
        return default_responder(request)

    with OpenAIStubServer(respond) as server:
        llm = openai_like.OpenAILike(
            model="stub-model", api_base=server.base_url, api_key="sk-test", is_chat_model=True, max_retries=0
        )
        response = TypedRAGQueryEngine(llm_pipeline(llm), streaming=True, forced_type="reason").query(QUESTION)
        tokens = list(response.response_gen)
    trace: AnswerResult = response.metadata["trace"]
    plans = [r for r in server.requests if r.schema_name == "SubQueryPlan"]
    assert len(plans) == 2 and is_repair(plans[1].last_user)
    assert plan_call_of(trace).structured is StructuredOutcome.FAILED and trace.strategy == "rag"
    assert any(r.body.get("stream") for r in server.requests) and len(tokens) > 1
    assert plan_call_of(trace).prompt_tokens > 0


# ---------------------------------------------------------------- offline: where NLTK data would be fetched

LONG_DOCUMENT = textwrap.dedent("""
    import os
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    text = " ".join(["The Titanic struck an iceberg in the North Atlantic and sank within hours."] * 400)
    index = VectorStoreIndex.from_documents([Document(text=text)], embed_model=MockEmbedding(embed_dim=8))
    print("nodes", len(index.docstore.docs))
""")


def run_offline(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    script = tmp_path / "ingest.py"
    script.write_text(LONG_DOCUMENT)
    return subprocess.run(
        [sys.executable, str(HERE / "network_guard.py"), str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def offline_env(tmp_path: Path, *, proxies: bool = True, **extra: str) -> dict[str, str]:
    """This environment less any cache variable, with HTTP(S) proxies on a closed loopback port (a second
    wall besides the guard; the control test goes without, so the guard itself sees the attempt)."""
    import os

    env = {
        k: v for k, v in os.environ.items() if k not in ("NLTK_DATA", "TIKTOKEN_CACHE_DIR", "HTTP_PROXY", "HTTPS_PROXY")
    }
    walls = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"} if proxies else {}
    return {**env, "HOME": str(tmp_path), **walls, **extra}


@pytest.mark.parametrize("variable", ["NLTK_DATA", "TIKTOKEN_CACHE_DIR"])
def test_a_cache_variable_pointing_at_an_empty_folder_makes_llamaindex_reach_for_the_network(tmp_path, variable):
    """The control for the next tests: with its data folder redirected to an empty one, LlamaIndex's splitter
    downloads NLTK data or tiktoken files, and the guard sees it."""
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_offline(tmp_path, offline_env(tmp_path, proxies=False, **{variable: str(empty)}))
    assert network_guard.BLOCKED in done.stderr, done.stdout + done.stderr


def test_splitting_a_long_text_works_offline_with_the_data_llamaindex_ships(tmp_path):
    done = run_offline(tmp_path, offline_env(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert network_guard.BLOCKED not in done.stderr and int(done.stdout.split()[-1]) > 1


def test_splitting_a_long_text_works_offline_with_nltk_data_the_test_provides(tmp_path):
    import llama_index.core

    data = tmp_path / "nltk_data"
    bundled = Path(llama_index.core.__file__).parent / "_static" / "nltk_cache" / "tokenizers" / "punkt_tab"
    shutil.copytree(bundled, data / "tokenizers" / "punkt_tab")
    (data / "corpora" / "stopwords").mkdir(parents=True)
    (data / "corpora" / "stopwords" / "english").write_text("\n".join(["a", "an", "the", "and", "in", "of", "within"]))
    done = run_offline(tmp_path, offline_env(tmp_path, NLTK_DATA=str(data)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert network_guard.BLOCKED not in done.stderr and int(done.stdout.split()[-1]) > 1


# ---------------------------------------------------------------- a chat engine


def test_the_chat_engine_answers_a_follow_up_with_the_conversation_before_it():
    from llama_index.core.llms import ChatMessage, MessageRole

    engine = TypedRAGChatEngine(Pipeline(OfflineEngine(), ListRetriever(SHIPS)), system_prompt="Answer briefly.")
    engine.chat(FIRST)
    response = engine.chat(FOLLOW_UP)
    trace = response.metadata["trace"]
    assert read_with_history(trace) and trace.instructions == "Answer briefly."
    assert (
        response.metadata["standalone_question"] == trace.standalone_question
        and response.metadata["abstained"] is False
    )
    assert response.source_nodes[0].node.get_content() == SHIPS[1]
    assert [m.role for m in engine.chat_history] == [MessageRole.USER, MessageRole.ASSISTANT] * 2
    streamed = engine.stream_chat(FOLLOW_UP)
    assert "".join(streamed.response_gen) and streamed.source_nodes[0].node.get_content() == SHIPS[1]
    engine.reset()
    alone = engine.chat(FOLLOW_UP).metadata["trace"]
    assert not read_with_history(alone) and len(engine.chat_history) == 2  # after reset: no conversation, the Lusitania
    given = [
        ChatMessage(role=MessageRole.USER, content=FIRST),
        ChatMessage(role=MessageRole.ASSISTANT, content="A liner."),
    ]
    assert read_with_history(
        engine.chat(FOLLOW_UP, chat_history=given).metadata["trace"]
    )  # as LlamaIndex's engines: it replaces


async def test_the_chat_engine_streams_asynchronously_in_the_conversation():
    engine = TypedRAGChatEngine(Pipeline(OfflineEngine(), ListRetriever(SHIPS)))
    await engine.achat(FIRST)
    streamed = await engine.astream_chat(FOLLOW_UP)
    text = "".join([piece async for piece in streamed.async_response_gen()])
    assert text.strip() == engine.chat_history[-1].content and streamed.source_nodes[0].node.get_content() == SHIPS[1]


# ---------------------------------------------------------------- issue 55 E14: typedrag's own index inside LlamaIndex


def test_typedrags_own_index_as_a_llamaindex_retriever_with_ref_doc_ids(small_index):
    """Issue 55 E14: no LlamaIndex retriever over typedrag's own index, and typedrag's nodes had no `ref_doc_id`."""
    from llama_index.core import get_response_synthesizer
    from llama_index.core.query_engine import RetrieverQueryEngine

    from typedrag.index import open_retriever
    from typedrag.integrations.llamaindex import TypedRAGChatEngine, TypedRAGQueryEngine, TypedragRetriever

    retriever = TypedragRetriever(index=str(small_index), similarity_top_k=3)
    nodes = retriever.retrieve("crocodile snout")
    expected = open_retriever(small_index).search("crocodile snout", 3)
    assert [n.node.node_id for n in nodes] == [hit.passage_id for hit in expected]
    assert [n.node.ref_doc_id for n in nodes] == [hit.passage.doc_id for hit in expected] and all(
        n.score for n in nodes
    )
    theirs = RetrieverQueryEngine(retriever, response_synthesizer=get_response_synthesizer(llm=MockLLM()))
    assert [n.node.ref_doc_id for n in theirs.query("crocodile snout").source_nodes] == [
        hit.passage.doc_id for hit in expected
    ]

    question = "What is the difference between a crocodile and an alligator?"
    for engine in (
        TypedRAGQueryEngine.from_components(retriever, method="rag"),
        TypedRAGQueryEngine(retriever=open_retriever(small_index), method="rag"),
        TypedRAGQueryEngine(open_retriever(small_index), method="rag"),
    ):  # the first guesses
        response = engine.query(question)
        assert "snout" in response.response and all(n.node.ref_doc_id for n in response.source_nodes)
    assert "snout" in TypedRAGChatEngine(retriever=retriever, method="rag").chat(question).response
    with pytest.raises(
        TypeError, match=r"TypedRAGQueryEngine takes a typedrag Pipeline or a retriever: .*TypedragRetriever\(index="
    ):
        TypedRAGQueryEngine("my-index")
