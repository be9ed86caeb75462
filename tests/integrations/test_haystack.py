"""typedrag and Haystack both ways, against Haystack's own parts (MockChatGenerator, InMemoryDocumentStore
with InMemoryBM25Retriever, Pipeline.run and run_async, YAML serialisation) and OpenAIChatGenerator on the
loopback OpenAI stub (structured plans, repair, streaming and usage across the real client)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("haystack")

from haystack import Document, GeneratedAnswer, Pipeline as HaystackPipeline, component  # noqa: E402
from haystack.components.generators.chat import MockChatGenerator, OpenAIChatGenerator  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from haystack.dataclasses import ChatMessage  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402
from haystack.utils import Secret  # noqa: E402

from typedrag import Pipeline  # noqa: E402
from typedrag.engines.llm_engine import LLMEngine  # noqa: E402
from typedrag.index.memory import ListRetriever  # noqa: E402
from typedrag.integrations.haystack import (
    HaystackChatModel,
    HaystackRetriever,
    TypedRAG,
    document_of,
    passage_of_document,
)  # noqa: E402
from typedrag.llm.base import StructuredOutcome  # noqa: E402
from typedrag.records import Passage  # noqa: E402
from typedrag.result import Source  # noqa: E402
from typedrag.citations import strip_markers  # noqa: E402
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
    replies_by_kind,
)

TRUSTED = ["typedrag.integrations.haystack"]  # Haystack deserialises only modules it is told to trust


def document_store(name: str) -> InMemoryDocumentStore:
    store = InMemoryDocumentStore(index=name)
    store.write_documents(
        [
            Document(id=f"titanic-{i}", content=t, meta={"title": "Titanic", "page_number": i + 1})
            for i, t in enumerate(TITANIC)
        ]
    )
    return store


# ---------------------------------------------------------------- their retriever inside typedrag


def test_a_bm25_retriever_gives_k_scored_passages_with_their_ids_and_pages():
    retriever = HaystackRetriever(InMemoryBM25Retriever(document_store("k")))
    hits = retriever.search("iceberg struck Titanic", 2)
    assert len(hits) == 2 and hits[0].score >= hits[1].score > 0
    position = int(hits[0].passage_id.rsplit("-", 1)[1])
    assert (
        hits[0].passage.text == TITANIC[position]
        and hits[0].passage.page == position + 1
        and hits[0].passage.title == "Titanic"
    )
    assert [len(r) for r in retriever.search_many(["iceberg", "lifeboats"], 1)] == [1, 1]


@component
class AsyncOnlyRetriever:
    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int = 10) -> dict:
        raise NotImplementedError("async only")

    @component.output_types(documents=list[Document])
    async def run_async(self, query: str, top_k: int = 10) -> dict:
        await asyncio.sleep(0)
        return {"documents": [Document(id=f"a-{i}", content=t) for i, t in enumerate(TITANIC[:top_k])]}


def test_an_async_only_retriever_works_from_typedrags_worker_threads():
    from typedrag import OfflineEngine

    retriever = HaystackRetriever(AsyncOnlyRetriever())
    assert [h.passage_id for h in retriever.search("iceberg", 2)] == ["a-0", "a-1"]
    result = asyncio.run(Pipeline(OfflineEngine(), retriever).answer(QUESTION))
    assert result.sources and all(s.passage_id.startswith("a-") for s in result.sources)


def test_sources_map_to_documents_and_back_to_the_same_passage():
    source = Source(
        number=3,
        passage_id="manual#7",
        title="Manual",
        section="Boats",
        page=12,
        page_end=14,
        text="Davits.",
        score=0.5,
    )
    document = document_of(source)
    assert (
        document.id == "manual#7"
        and document.score == 0.5
        and document.meta["page_number"] == 12
        and document.meta["source_number"] == 3
    )
    assert passage_of_document(document) == Passage("manual#7", "manual", "Manual", "Davits.", "Boats", 12, 14)


# ---------------------------------------------------------------- typedrag inside their pipelines


def rag_pipeline(typed: TypedRAG, store: InMemoryDocumentStore) -> HaystackPipeline:
    pipeline = HaystackPipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(store, top_k=4))
    pipeline.add_component("typedrag", typed)
    pipeline.connect("retriever.documents", "typedrag.documents")
    return pipeline


def test_after_their_retriever_it_answers_from_those_documents_with_the_typed_outputs():
    store = document_store("after")
    outputs = rag_pipeline(TypedRAG(), store).run({"retriever": {"query": QUESTION}, "typedrag": {"query": QUESTION}})[
        "typedrag"
    ]
    answer = outputs["answers"][0]
    assert (
        isinstance(answer, GeneratedAnswer) and answer.query == QUESTION and answer.data == outputs["trace"]["answer"]
    )
    assert (
        answer.meta["type"] == outputs["trace"]["type"]["type"]
        and answer.meta["strategy"] == outputs["trace"]["strategy"]
    )
    retrieved = {d.id for d in InMemoryBM25Retriever(store, top_k=4).run(query=QUESTION)["documents"]}
    assert outputs["documents"] and {d.id for d in outputs["documents"]} <= retrieved  # only what their retriever found
    assert [d.meta["source_number"] for d in outputs["documents"]] == list(range(1, len(outputs["documents"]) + 1))


def test_with_a_retriever_of_its_own_it_streams_and_serialises_to_yaml_and_back():
    typed = TypedRAG(retriever=InMemoryBM25Retriever(document_store("own")), top_k=3)
    pipeline = HaystackPipeline()
    pipeline.add_component("typedrag", typed)
    loaded = HaystackPipeline.loads(pipeline.dumps(), allowed_modules=TRUSTED)
    assert loaded.dumps() == pipeline.dumps()
    heard = []
    outputs = loaded.run({"typedrag": {"query": QUESTION, "streaming_callback": heard.append}})["typedrag"]
    assert len(heard) > 1 and "".join(c.content for c in heard) == outputs["answers"][0].data
    assert heard[0].component_info.name == "typedrag"
    assert len(outputs["documents"]) >= 1 and all(d.id.startswith("titanic-") for d in outputs["documents"])


def test_a_long_document_handed_in_is_read_a_passage_at_a_time():
    """Issue 41 #18: one long document through `TypedRAG.run(documents=...)` took minutes (every sentence of it
    embedded); it is cut as typedrag's index cuts documents, and the plans search its windows."""
    document = Document(id="news", content=long_document(), meta={"file_path": "/usr/share/doc/valgrind/NEWS"})
    outputs = TypedRAG().run(query=LONG_QUESTION, documents=[document])
    sources = outputs["documents"]
    assert sources and all(len(d.content.split()) <= MOST_WORDS for d in sources)
    assert all(d.id.startswith("news#") and d.meta["doc_id"] == "news" for d in sources)
    assert any(LONG_ANSWER in d.content for d in sources)
    store = InMemoryDocumentStore(index="long")
    store.write_documents([document])
    hits = HaystackRetriever(InMemoryBM25Retriever(store)).search(LONG_QUESTION, 3)
    assert (
        1 <= len(hits) <= 3
        and LONG_ANSWER in hits[0].passage.text
        and all(len(h.passage.text.split()) <= MOST_WORDS for h in hits)
    )


def test_the_docs_name_the_trusted_module_for_each_way_of_loading_a_pipeline():
    """Issue 35, minor: the README (now docs/integrations.md) showed `allowed_modules` for `loads` only, and `from_dict` refuses without it."""
    import re

    from haystack.core.errors import DeserializationError

    page = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    section = page.split("\n## Haystack", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r'allowed_modules=\["([\w.]+)"\]', section)
    assert named and set(named) == set(TRUSTED)
    for way in ("Pipeline.loads(", "Pipeline.load(", "Pipeline.from_dict("):
        assert way in section, way
    pipeline = HaystackPipeline()
    pipeline.add_component("typedrag", TypedRAG())
    with pytest.raises(DeserializationError):
        HaystackPipeline.from_dict(pipeline.to_dict())
    assert HaystackPipeline.from_dict(pipeline.to_dict(), allowed_modules=named).to_dict() == pipeline.to_dict()


def test_to_dict_from_dict_keeps_the_chat_generator_and_settings():
    typed = TypedRAG(chat_generator=MockChatGenerator(responses="It struck an iceberg [1]."), method="rag", top_k=2)
    again = TypedRAG.from_dict(typed.to_dict())
    assert isinstance(again.chat_generator, MockChatGenerator) and again.method == "rag" and again.top_k == 2
    assert (
        again.run(QUESTION, documents=[Document(content=t) for t in TITANIC])["answers"][0].data
        == "It struck an iceberg [1]."
    )


async def test_run_async_in_a_pipeline_run_async_with_an_async_streaming_callback():
    heard: list[str] = []

    async def hear(chunk) -> None:
        heard.append(chunk.content)

    store = document_store("async")
    pipeline = HaystackPipeline()  # Haystack 3 runs any pipeline async (AsyncPipeline in 2.x)
    pipeline.add_component("retriever", InMemoryBM25Retriever(store))
    pipeline.add_component("typedrag", TypedRAG(streaming_callback=hear))
    pipeline.connect("retriever.documents", "typedrag.documents")
    outputs = (await pipeline.run_async({"retriever": {"query": QUESTION}, "typedrag": {"query": QUESTION}}))[
        "typedrag"
    ]
    assert len(heard) > 1 and "".join(heard) == outputs["answers"][0].data


# ---------------------------------------------------------------- their chat generator inside typedrag


def llm_pipeline(generator) -> Pipeline:
    return Pipeline(LLMEngine(HaystackChatModel(generator)), ListRetriever(TITANIC))


def test_a_failing_plan_is_repaired_once_then_falls_back_and_the_trace_says_so():
    reply = replies_by_kind(plan="no plan", repair="still no plan", answer="It struck an iceberg [1].")
    generator = MockChatGenerator(response_fn=lambda messages: reply(messages[-1].text or ""))
    result = asyncio.run(llm_pipeline(generator).answer(QUESTION, forced_type="reason"))
    plan_call = plan_call_of(result)
    assert (
        plan_call.requests == 2
        and plan_call.structured is StructuredOutcome.FAILED
        and plan_call.reply == "still no plan"
    )
    assert result.strategy == "rag" and any(f.step == "reason" for f in result.fallbacks)
    assert plan_call.prompt_tokens > 0 and plan_call.finish_reason == "stop"  # the mock's usage and finish reason


def scripted_plans(messages: list[ChatMessage]) -> str:
    """A response_fn: the repair round gets a valid plan, the first plan request prose, answers a citation."""
    last = messages[-1].text or ""
    if is_repair(last):
        return PLAN
    return "Let me think about a plan." if '"sub_queries"' in last else "It struck an iceberg [1]."


def test_a_plan_repaired_on_the_second_reply_is_used():
    result = asyncio.run(
        llm_pipeline(MockChatGenerator(response_fn=scripted_plans)).answer(QUESTION, forced_type="reason")
    )
    assert (
        plan_call_of(result).structured is StructuredOutcome.REPAIRED
        and result.plan_used
        and result.strategy == "reason"
    )


def test_a_sync_only_generators_stream_reaches_typedrag_in_order():
    @component
    class SyncOnly:
        @component.output_types(replies=list[ChatMessage])
        def run(self, messages: list[ChatMessage], streaming_callback=None, generation_kwargs=None) -> dict:
            return MockChatGenerator(responses="It struck an iceberg [1] and sank.").run(
                messages, streaming_callback=streaming_callback
            )

    chunks = [c["text"] for name, c in collect(llm_pipeline(SyncOnly()), "rag") if name == "token"]
    assert len(chunks) > 3 and "".join(chunks) == "It struck an iceberg [1] and sank."


def collect(pipeline: Pipeline, method: str) -> list[tuple[str, dict]]:
    events: list[tuple[str, dict]] = []
    asyncio.run(pipeline.answer(QUESTION, method=method, on_event=lambda name, data: events.append((name, data))))
    return events


@pytest.mark.parametrize("repair_fixes_it", [True, False])
def test_openaichatgenerator_on_the_stub_sends_the_schema_repairs_streams_and_counts_tokens(repair_fixes_it):
    def respond(request):
        if is_repair(request.last_user):
            return Reply(content=PLAN if repair_fixes_it else "still not JSON")
        if request.schema_name:
            return Reply(content="Sure! A plan.")
        return default_responder(request)

    with OpenAIStubServer(respond) as server:
        generator = OpenAIChatGenerator(
            api_key=Secret.from_token("sk-test"), model="stub-model", api_base_url=server.base_url, max_retries=0
        )
        heard: list[str] = []
        outputs = TypedRAG(
            chat_generator=generator, retriever=InMemoryBM25Retriever(document_store(f"stub-{repair_fixes_it}"))
        ).run(QUESTION, forced_type="reason", streaming_callback=lambda chunk: heard.append(chunk.content))
    trace = outputs["trace"]
    plans = [r for r in server.requests if r.schema_name == "SubQueryPlan"]
    assert (
        len(plans) == 2 and is_repair(plans[1].last_user) and plans[0].body["response_format"]["type"] == "json_schema"
    )
    plan_call = next(call for call in trace["llm_calls"] if call["role"].startswith("plan:"))
    assert plan_call["requests"] == 2 and plan_call["prompt_tokens"] > 0 and plan_call["completion_tokens"] > 0
    assert any(r.body.get("stream") for r in server.requests) and len(heard) > 1 and "".join(heard) == trace["answer"]
    if repair_fixes_it:
        assert plan_call["structured"] == "repaired" and trace["strategy"] == "reason"
    else:
        assert plan_call["structured"] == "failed" and trace["strategy"] == "rag" and trace["fallbacks"]


# ---------------------------------------------------------------- conversations


def test_history_as_chat_messages_reads_a_follow_up_with_the_conversation():
    store = InMemoryDocumentStore()
    store.write_documents([Document(content=text) for text in SHIPS])
    component = TypedRAG(retriever=InMemoryBM25Retriever(store))
    history = [
        ChatMessage.from_system("Answer briefly."),
        ChatMessage.from_user(FIRST),
        ChatMessage.from_assistant("A British liner."),
    ]
    outputs = component.run(FOLLOW_UP, history=history)
    trace = outputs["trace"]
    assert "Titanic" in trace["standalone_question"] and trace["instructions"] == "Answer briefly."
    assert outputs["documents"][0].content == SHIPS[1]
    assert outputs["answers"][0].meta["standalone_question"] == trace["standalone_question"]
    alone = component.run(FOLLOW_UP)
    assert alone["trace"]["standalone_question"] is None and alone["documents"][0].content != SHIPS[1]


async def test_run_async_takes_the_history_too():
    component = TypedRAG(retriever=InMemoryBM25Retriever(_ships_store()))
    outputs = await component.run_async(
        FOLLOW_UP, history=[ChatMessage.from_user(FIRST), ChatMessage.from_assistant("A liner.")]
    )
    assert "Titanic" in outputs["trace"]["standalone_question"] and outputs["documents"][0].content == SHIPS[1]


def _ships_store() -> InMemoryDocumentStore:
    store = InMemoryDocumentStore()
    store.write_documents([Document(content=text) for text in SHIPS])
    return store


# ---------------------------------------------------------------- issue 55 E14: typedrag's own index, Haystack's chunks

TITANIC_ARTICLE = (
    "RMS Titanic was a British passenger liner that sank in the North Atlantic Ocean on 15 April 1912. "
    "She struck an iceberg at 23:40 on the night of 14 April, four days into her maiden voyage from Southampton. "
    "The collision buckled the starboard hull plates and opened six of her sixteen watertight compartments to the sea. "
    "The ship had been designed to stay afloat with four compartments flooded, so she could not survive six. "
    "Warnings of sea ice had been received from other ships during the day, yet she kept close to her full speed. "
    "There were lifeboats for only about half of the people on board, because the rules of the time counted tonnage. "
    "Many of the lifeboats were launched only partly filled, and more than 1,500 people died in the freezing water."
)


def test_haystacks_word_split_chunks_are_read_as_whole_sentences():
    """Issue 55 E14: DocumentSplitter cuts by words (its default, 200 at a time), mid-sentence; fed its chunks, offline
    answers quoted half-sentences ("hull plates and opened six of her sixteen watertight compartments to the sea.").
    Adjacent chunks of one document are joined, and a chunk's half sentences at its edges left out."""
    from haystack.components.preprocessors import DocumentSplitter

    from typedrag.text import split_sentences

    splitter = DocumentSplitter(split_by="word", split_length=23)
    splitter.warm_up()
    chunks = splitter.run(documents=[Document(id="titanic", content=TITANIC_ARTICLE, meta={"title": "Titanic"})])[
        "documents"
    ]
    assert len(chunks) > 3 and not all(c.content.rstrip().endswith(".") for c in chunks)  # cut mid-sentence
    store = InMemoryDocumentStore()
    store.write_documents(chunks)
    pipeline = HaystackPipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(store, top_k=3))
    pipeline.add_component("typed", TypedRAG(method="rag"))
    pipeline.connect("retriever.documents", "typed.documents")
    whole = {s.strip() for s in split_sentences(TITANIC_ARTICLE)}
    for question in (
        "Why did the Titanic sink?",
        "How many compartments did the collision open?",
        "Why were there too few lifeboats?",
    ):
        output = pipeline.run({"retriever": {"query": question}, "typed": {"query": question}})["typed"]
        result = output["trace"]
        if result["abstained"]:
            continue
        quoted = [strip_markers(s).strip() for s in split_sentences(result["answer"])]
        assert quoted and all(s in whole for s in quoted), (question, quoted)
        assert all(s["text"].strip() == "" or split_sentences(s["text"])[0].strip() in whole for s in result["sources"])


def test_joined_chunks_keep_the_text_between_them_once_and_their_best_score():
    from haystack.components.preprocessors import DocumentSplitter

    from typedrag.integrations.haystack import sentence_aligned

    splitter = DocumentSplitter(split_by="word", split_length=20, split_overlap=5)
    splitter.warm_up()
    chunks = splitter.run(documents=[Document(content=TITANIC_ARTICLE)])["documents"]
    for n, chunk in enumerate(chunks):
        chunk.score = float(n)
    joined = sentence_aligned(
        [chunks[2], Document(id="other", content="Other."), chunks[1], chunks[5], chunks[6], chunks[8]]
    )
    assert [d.id for d in joined] == [chunks[1].id, "other"]  # a document's runs where its best chunk was
    assert joined[0].score == 2.0  # chunks 1 and 2 overlap: one text, "15 April 1912." the tail of a sentence cut off
    assert joined[0].content == (
        "She struck an iceberg at 23:40 on the night of 14 April, four days into her maiden voyage from Southampton."
    )
    # 5 and 6 touch but hold no sentence whole, nor does the last chunk, which begins inside one: left out


def test_typedrags_own_index_as_a_haystack_retriever_and_the_first_guess_at_typedrag_over_it(small_index):
    """Issue 55 E14: no Haystack retriever over typedrag's own index, and `TypedRAG(retriever=open_retriever(...))` failed
    ("TantivyRetriever is not a Haystack component"): both work, and the component saves and loads as YAML."""
    from typedrag.index import open_retriever
    from typedrag.integrations.haystack import TypedragRetriever

    retriever = TypedragRetriever(index=small_index, top_k=3)
    documents = retriever.run(query="crocodile snout")["documents"]
    assert len(documents) == 3 and documents[0].meta["doc_id"] and documents[0].meta["title"] and documents[0].score
    assert documents[0].id == open_retriever(small_index).search("crocodile snout", 1)[0].passage_id

    pipeline = HaystackPipeline()
    pipeline.add_component("retriever", TypedragRetriever(index=str(small_index), top_k=4))
    pipeline.add_component("typed", TypedRAG(method="rag"))
    pipeline.connect("retriever.documents", "typed.documents")
    restored = HaystackPipeline.loads(pipeline.dumps(), allowed_modules=TRUSTED)
    question = "What is the difference between a crocodile and an alligator?"
    answer = restored.run({"retriever": {"query": question}, "typed": {"query": question}})["typed"]["answers"][0]
    assert "snout" in answer.data

    guessed = TypedRAG(retriever=open_retriever(small_index), method="rag")  # the first guess
    first = guessed.run(query=question)
    assert "snout" in first["answers"][0].data and first["documents"][0].meta["doc_id"]
    assert guessed.to_dict()["init_parameters"]["retriever"]["init_parameters"]["index"] == str(
        small_index
    )  # saved as the index's path
