"""Typed-RAG strategies end to end: real index, real HTTP to a scripted OpenAI-protocol server."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from typedrag.engines.llm_engine import LLMEngine
from typedrag.engines.offline import OfflineEngine
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.nfq import NFQType
from typedrag.pipeline import Pipeline
from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_content

from conftest import plan_call_of


class RecordingRetriever:
    """Wraps the real retriever to see which queries a strategy sends."""

    def __init__(self, inner):
        self.inner, self.name, self.queries = inner, inner.name, []

    def search(self, query, k=10):
        self.queries.append(query)
        return self.inner.search(query, k)

    def search_many(self, queries, k=10):
        self.queries.extend(queries)
        return self.inner.search_many(queries, k)


ROME = [
    "Heavy taxation of the Roman provinces drained the economy of the Western Roman Empire and drove farmers off the land.",
    "Germanic invasions across the Rhine and Danube frontiers broke the Western Roman Empire's defences in the fifth century.",
    "Political instability and repeated civil wars between rival generals weakened the Western Roman Empire's central government.",
    "Inflation and the debasement of the silver coinage ruined trade in the late Roman Empire before its fall.",
    "The division of the Roman Empire into eastern and western halves left the western empire poorer and easier to conquer.",
    "The sack of Rome by the Visigoths in 410 shocked the Roman world and showed how far the empire had fallen.",
    "Plague and population decline left the late Western Roman Empire short of soldiers, farmers and taxpayers.",
    "Barbarian federates settled inside the Western Roman Empire and served in its armies under their own kings.",
    "Rome's reliance on mercenaries made the Western Roman Empire's army less loyal before the fall.",
    "Corruption at the imperial court of the Western Roman Empire hastened its fall, contemporaries wrote.",
    "The loss of North Africa to the Vandals cut the Western Roman Empire off from its richest tax revenue.",
    "Historians still debate whether the Western Roman Empire fell or was slowly transformed.",
    "Nuclear power produces electricity with very low carbon emissions and supplies reliable baseload power, its supporters say.",
    "Opponents of nuclear power point to accidents such as Chernobyl, long-lived radioactive waste and high construction costs.",
    "Nuclear power plants need years to build, and several projects in Europe ran far over budget.",
    "France generates most of its electricity from nuclear power and exports power to its neighbours.",
    "Nuclear waste stays radioactive for thousands of years and needs deep geological storage.",
    "Low-carbon nuclear power helps countries cut emissions while keeping the grid stable.",
    "Public opinion on nuclear power shifted sharply after the Fukushima accident in 2011.",
    "Small modular reactors promise cheaper nuclear power, but none has yet been built at scale.",
]


@pytest.fixture(scope="module")
def topical():
    """A retriever with one passage per facet, so every aspect finds passages of its own."""
    from typedrag.testing import ListRetriever

    return ListRetriever(ROME)


def pipeline_for(server, retriever, **model_kwargs) -> Pipeline:
    model_kwargs.setdefault("max_retries", 0)
    model = OpenAIChatModel(model="stub", base_url=server.base_url, timeout=10, **model_kwargs)
    return Pipeline(LLMEngine(model), retriever)


def scripted(plans: dict[str, object], answer=None):
    """Reply to plan requests with `plans[schema name]`, everything else with `answer(request)` or the default."""

    def responder(request):
        name = request.schema_name
        if name in plans:
            plan = plans[name]
            return Reply(content=plan if isinstance(plan, str) else json.dumps(plan))
        if answer is not None:
            return answer(request)
        return Reply(content=default_content(request))

    return responder


@pytest.mark.parametrize(
    ("nfq_type", "schema", "question"),
    [
        (NFQType.COMPARISON, "ComparisonPlan", "What is the difference between a crocodile and an alligator?"),
        (NFQType.EXPERIENCE, "ExperiencePlan", "Any advice for a beginner learning guitar?"),
        (NFQType.REASON, "SubQueryPlan", "Why did the Western Roman Empire fall?"),
        (NFQType.INSTRUCTION, "SubQueryPlan", "How do I bake bread at home?"),
        (NFQType.DEBATE, "DebatePlan", "Should countries build more nuclear power plants?"),
    ],
)
async def test_each_type_requests_its_plan_schema_and_answers(retriever, nfq_type, schema, question):
    with OpenAIStubServer() as server:
        result = await pipeline_for(server, retriever).answer(question, "typed", nfq_type)
    # the type's plan is its one structured request (the overview, begun beside it, may reach the server first)
    assert [r.schema_name for r in server.requests if r.schema_name] == [schema]
    assert result.strategy == nfq_type.value.lower()
    assert [f for f in result.fallbacks if not f.step.startswith("aspect:")] == []
    assert result.plan is not None
    assert result.answer.startswith("Stub answer")
    assert result.citations and all(c.passage_ids for c in result.citations)
    assert result.engines.generator.startswith("openai-compatible:stub@127.0.0.1")


def first_source(request) -> str:
    """The number of the first source a prompt shows: what an aspect that cites its own passage writes."""
    return re.search(r"^\[(\d+)\] ", request.last_user, re.M).group(1)


async def test_reason_retrieves_once_per_sub_query_and_aggregates_every_aspect(topical):
    plan = {"sub_queries": ["economic troubles taxation", "Germanic invasions frontiers", "political instability civil wars"]}

    def answer(request):
        if "Partial answers" in request.last_user:
            return Reply(content="Aggregated explanation [1].")
        if "Answer only this part of it: " not in request.last_user:  # the overview: plain RAG's own prompt
            return Reply(content=f"Overview of why Rome fell [{first_source(request)}].")
        focus = request.last_user.split("Answer only this part of it: ")[1].split("\n")[0]
        return Reply(content=f"Aspect answer about {focus} [{first_source(request)}].")

    recording = RecordingRetriever(topical)
    with OpenAIStubServer(scripted({"SubQueryPlan": plan}, answer)) as server:
        result = await pipeline_for(server, recording).answer("Why did Rome fall?", "typed", NFQType.REASON)
    # The question itself (never less evidence than plain RAG), and each sub-query with the question's subject.
    assert recording.queries == ["Why did Rome fall?", *(f"{q} Rome fall" for q in plan["sub_queries"])]
    aggregate = [r for r in server.requests if "Partial answers" in r.last_user]
    assert len(aggregate) == 1
    for sub_query in plan["sub_queries"]:
        assert f"Aspect answer about {sub_query}" in aggregate[0].last_user
    assert [a.label for a in result.aspects] == ["overview", *plan["sub_queries"]]  # overview: the question's own passages
    assert all(a.error is None for a in result.aspects)
    assert result.answer == "Aggregated explanation [1]."
    roles = [c.role for c in result.llm_calls]
    assert roles.count("aspect:reason") == 3 and roles.count("overview:reason") == 1


async def test_debate_perspectives_reach_the_mediator(topical):
    plan = {"topic": "nuclear power", "perspectives": [
        {"name": "advocates", "sub_query": "nuclear low carbon reliable"},
        {"name": "opponents", "sub_query": "nuclear accidents waste costs"},
    ]}

    def answer(request):
        if "perspective" in request.last_user and "Topic:" in request.last_user:
            return Reply(content="Balanced view [1].")
        return Reply(content=f"Case for {'advocates' if 'advocates' in request.last_user else 'opponents'} [{first_source(request)}].")

    recording = RecordingRetriever(topical)
    with OpenAIStubServer(scripted({"DebatePlan": plan}, answer)) as server:
        result = await pipeline_for(server, recording).answer("Is nuclear power good?", "typed", NFQType.DEBATE)
    assert recording.queries == [
        "Is nuclear power good?", "nuclear low carbon reliable nuclear power", "nuclear accidents waste costs nuclear power"
    ]
    assert [a.label for a in result.aspects] == ["overview", "advocates", "opponents"]
    mediation = server.requests[-1].last_user
    assert "Topic: nuclear power" in mediation
    assert "Case for advocates" in mediation and "Case for opponents" in mediation
    assert result.llm_calls[-1].role == "mediate:debate"


async def test_comparison_prompt_has_items_and_purpose_and_passages_are_deduplicated(retriever):
    plan = {"purpose": "difference", "items": ["crocodile snout", "alligator snout"]}
    recording = RecordingRetriever(retriever)
    with OpenAIStubServer(scripted({"ComparisonPlan": plan})) as server:
        result = await pipeline_for(server, recording).answer("Crocodile or alligator: how to tell?", "typed", NFQType.COMPARISON)
    # Each item is searched with the question's other words, never with the other item's.
    assert recording.queries == ["Crocodile or alligator: how to tell?", "crocodile snout tell", "alligator snout tell"]
    prompt = server.requests[1].last_user
    assert "crocodile snout; alligator snout" in prompt and "difference" in prompt
    ids = [s.passage_id for s in result.sources]
    assert len(ids) == len(set(ids))
    # Both items retrieve the crocodile and alligator passages; each appears once.
    assert any(i.startswith("croc#") for i in ids) and any(i.startswith("gator#") for i in ids)


async def test_experience_reranks_by_keyword_similarity(retriever):
    question = "What should I know before I start?"
    guitar_plan = {"topic": "learning guitar", "keywords": ["guitar", "practise", "chords", "beginners"]}
    bread_plan = {"topic": "baking bread", "keywords": ["bread", "dough", "yeast", "oven"]}
    results = []
    for plan in (guitar_plan, bread_plan):
        with OpenAIStubServer(scripted({"ExperiencePlan": plan})) as server:
            results.append(await pipeline_for(server, retriever).answer(question, "typed", NFQType.EXPERIENCE))
    # The question's own passages stay, and the keyword-reranked ones join them.
    assert any(s.passage_id.startswith("guitar#") for s in results[0].sources)
    assert any(s.passage_id.startswith("bread#") for s in results[1].sources)
    assert not any(s.passage_id.startswith("bread#") for s in results[0].sources)


async def test_plan_caps_and_duplicates(retriever):
    plan = {"sub_queries": ["tax", "Tax ", "", "invasions", "civil wars", "inflation", "division of empire", "plague"]}
    with OpenAIStubServer(scripted({"SubQueryPlan": plan})) as server:
        result = await pipeline_for(server, retriever).answer("Why did Rome fall?", "typed", NFQType.REASON)
    labels = [a.label for a in result.aspects]
    assert labels == ["overview", "tax", "invasions", "civil wars", "inflation", "division of empire"]
    assert any(f.step == "plan:reason" and "dropped: plague" in f.reason for f in result.fallbacks)


async def test_malformed_plan_is_repaired(retriever):
    replies = iter(["The items are crocodile and alligator.", json.dumps({"purpose": "difference", "items": ["crocodile", "alligator"]})])

    def responder(request):
        if request.schema_name == "ComparisonPlan":
            return Reply(content=next(replies))
        return Reply(content=default_content(request))

    with OpenAIStubServer(responder) as server:
        result = await pipeline_for(server, retriever).answer("Crocodile vs alligator?", "typed", NFQType.COMPARISON)
    assert result.strategy == "comparison"
    assert plan_call_of(result).structured == "repaired"
    assert [f for f in result.fallbacks if not f.step.startswith("aspect:")] == []


async def test_unrepairable_plan_falls_back_to_rag_and_says_why(retriever):
    with OpenAIStubServer(scripted({"DebatePlan": "no idea"})) as server:
        result = await pipeline_for(server, retriever).answer("Is nuclear power good?", "typed", NFQType.DEBATE)
    assert result.strategy == "rag"
    assert result.fallbacks[0].step == "debate"
    assert "PlanFailed" in result.fallbacks[0].reason
    assert plan_call_of(result).structured == "failed"
    assert result.answer.startswith("Stub answer")


async def test_failed_aspect_is_dropped_and_recorded_while_others_answer(topical):
    plan = {"sub_queries": ["economic troubles", "Germanic invasions", "political instability"]}

    def answer(request):
        if "Answer only this part of it: Germanic invasions" in request.last_user:
            return Reply(status=500, content="model crashed")
        return Reply(content=default_content(request))

    with OpenAIStubServer(scripted({"SubQueryPlan": plan}, answer)) as server:
        result = await pipeline_for(server, topical).answer("Why did Rome fall?", "typed", NFQType.REASON)
    assert result.strategy == "reason"
    failed = [a for a in result.aspects if a.error]
    assert "Germanic invasions" in [a.label for a in failed]
    assert "aspect:Germanic invasions" in [f.step for f in result.fallbacks]
    aggregate = server.requests[-1].last_user
    assert "economic troubles" in aggregate and "Germanic invasions" not in aggregate


async def test_aspects_run_concurrently(topical):
    plan = {"sub_queries": ["tax", "invasions", "civil wars", "inflation", "division of the empire"]}
    waiting_on_arrival = []  # requests at the server, this one included, as each arrived
    answer = scripted({"SubQueryPlan": plan})

    def responder(request):
        waiting_on_arrival.append((request.schema_name, server.waiting))
        return answer(request)

    with OpenAIStubServer(responder, delay=0.4) as server:
        pipeline = pipeline_for(server, topical)
        result = await pipeline.answer("Why did Rome fall?", "typed", NFQType.REASON)
    assert len(result.aspects) == 6 and all(a.error is None for a in result.aspects)  # the overview and five planned
    assert result.usage.calls == 8
    # The overview (plain RAG's step) was asked while the model planned, then the five planned aspects were
    # all in flight together; a wall-time bound said the same but failed on a loaded machine.
    # Which of the two reaches the server first is a race (the overview searches before it asks); that both
    # were in flight together is not.
    first_two = waiting_on_arrival[:2]
    assert sorted(name or "" for name, _ in first_two) == ["", "SubQueryPlan"] and first_two[1][1] == 2, waiting_on_arrival
    overview = next(r for r in server.requests[:2] if r.schema_name is None)
    assert "Answer in at most five sentences" in overview.last_user  # plain RAG's own prompt
    assert server.most_waiting == 5, server.most_waiting


async def test_a_plan_that_fails_stops_the_overview_begun_beside_it(topical):
    """The overview starts with the plan; when the plan fails, the fallback answers and nothing is left running."""
    from typedrag.engines.base import Trace
    from typedrag.errors import LLMError
    from typedrag.rerank import EmbeddingReranker
    from typedrag.strategies.base import StrategyContext
    from typedrag.strategies.decomposed import plan_beside_overview

    with OpenAIStubServer(delay=2) as server:
        ctx = StrategyContext(LLMEngine(OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0)), topical, EmbeddingReranker(), Trace())

        async def plan_that_fails():
            while server.waiting == 0:  # the overview's request has reached the server
                await asyncio.sleep(0.01)
            raise LLMError("the plan failed")

        with pytest.raises(LLMError, match="the plan failed"):
            await plan_beside_overview(plan_that_fails(), "Why did Rome fall?", "reason", ctx)
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
        assert server.waiting == 1  # its request was still being answered: stopped, not waited for
    assert [call.role for call in ctx.trace.calls] == []  # no overview answer was taken after the failure


async def test_baselines(retriever):
    with OpenAIStubServer() as server:
        pipeline = pipeline_for(server, retriever)
        llm = await pipeline.answer("Why is the sky blue?", "llm")
        rag = await pipeline.answer("How does photosynthesis work?", "rag")
    assert llm.sources == [] and llm.strategy == "llm" and llm.usage.calls == 1
    assert "Sources:" not in server.requests[0].last_user
    assert rag.sources and rag.sources[0].passage_id.startswith("photo#")
    assert "\n[1] Photosynthesis: " in server.requests[1].last_user  # one numbered line per source


OFFLINE_QUESTIONS = [
    (NFQType.EVIDENCE_BASED, "How does photosynthesis work?"),
    (NFQType.COMPARISON, "What is the difference between a crocodile and an alligator?"),
    (NFQType.EXPERIENCE, "Any tips for a beginner learning guitar?"),
    (NFQType.REASON, "Why did the Western Roman Empire fall?"),
    (NFQType.INSTRUCTION, "How do I bake bread?"),
    (NFQType.DEBATE, "Should we build more nuclear power plants?"),
]


@pytest.mark.parametrize(("nfq_type", "question"), OFFLINE_QUESTIONS)
async def test_offline_engine_answers_every_type_with_citations(retriever, nfq_type, question):
    result = await Pipeline(OfflineEngine(), retriever).answer(question, "typed", nfq_type)
    # an addition the reader found nothing for is left out, a lead with nothing answering quotes the nearest,
    # and each is recorded as such; nothing else falls back
    assert [f for f in result.fallbacks if not f.step.startswith("aspect:") and "the reader found" not in f.reason] == [], result.fallbacks
    assert result.engines.generator == "offline-extractive"
    assert result.answer.strip()
    retrieved = {s.passage_id for s in result.sources}
    assert result.citations
    for citation in result.citations:
        assert set(citation.passage_ids) <= retrieved


def test_sentence_split_keeps_trailing_citation_markers():
    # Regression: a marker after the last sentence became a sentence of its own, so the offline
    # aggregator dropped the cited sentence it belonged to.
    from typedrag.result import split_sentences

    text = "Rome was taxed heavily. [1] The empire was divided. [2]"
    assert split_sentences(text) == ["Rome was taxed heavily. [1]", "The empire was divided. [2]"]
    assert split_sentences("One. Two [3]. Three.[4][5]\nFour") == ["One.", "Two [3].", "Three.[4][5]", "Four"]


async def test_factoid_goes_to_plain_rag_visibly_unless_data_is_known_non_factoid(retriever):
    from typedrag.classify import load_default_classifier
    from typedrag.pipeline import PipelineSettings

    question = "Who wrote the play Hamlet?"
    default = await Pipeline(OfflineEngine(), retriever, load_default_classifier()).answer(question)
    assert default.type.type == "FACTOID"
    assert default.strategy == "rag" and default.fallbacks[0].step == "route"
    restricted = Pipeline(OfflineEngine(), retriever, load_default_classifier(), settings=PipelineSettings(assume_non_factoid=True))
    result = await restricted.answer(question)
    assert result.type.type in {t.value for t in NFQType} - {"FACTOID", "NOT-A-QUESTION"}
    assert result.type.source.endswith("(non-factoid only)")
    assert abs(sum(result.type.probabilities.values()) - 1) < 1e-6
    # Routed to its type, never to plain RAG for low confidence (the strategy itself may still fall back,
    # recorded, when the index has nothing on Hamlet).
    assert not [f for f in result.fallbacks if f.step == "route"]
    assert result.strategy == result.type.type.lower() or result.fallbacks[-1].step == result.type.type.lower()


class SlowFirstRetriever(RecordingRetriever):
    """The first query answers last, as a slow shard or a busy thread would make it."""

    def search(self, query, k=10):
        if not self.queries:
            time.sleep(0.3)
        return super().search(query, k)

    def search_many(self, queries, k=10):
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(queries)) as pool:
            return list(pool.map(lambda q: self.search(q, k), queries))


async def test_source_numbers_follow_aspect_order_whatever_finishes_first(retriever):
    # Regression: aspects numbered passages in the order their retrieval finished, so prompts (and the
    # response-cache keys) changed from run to run and a cached rerun still called the model.
    plan = {"sub_queries": ["economic troubles taxation", "bread dough yeast"]}
    with OpenAIStubServer(scripted({"SubQueryPlan": plan})) as server:
        result = await pipeline_for(server, SlowFirstRetriever(retriever)).answer("Why?", "typed", NFQType.REASON)
    first = result.aspects[0]
    assert first.source_numbers == list(range(1, len(first.source_numbers) + 1))


async def test_a_decided_type_is_used_without_classifying_again(retriever):
    # Regression: `answer(decision=...)` was shadowed by a local, so evaluation classified every
    # question twice (twice the LLM calls with an LLM classifier).
    from typedrag.classify import TypePrediction, load_default_classifier

    class Counting:
        name = "counting"

        def __init__(self):
            self.calls = 0

        def classify(self, question):
            self.calls += 1
            return load_default_classifier().classify(question)

    counting = Counting()
    pipeline = Pipeline(OfflineEngine(), retriever, counting)
    decided = TypePrediction(NFQType.REASON, 0.9, {NFQType.REASON: 0.9}, "classifier:elsewhere")
    result = await pipeline.answer("How does photosynthesis work?", decision=decided)
    assert counting.calls == 0
    assert result.strategy == "reason" and result.type.source == "classifier:elsewhere"
    baseline = await pipeline.answer("How does photosynthesis work?", "rag", decision=decided)
    assert baseline.type is None


async def test_offline_debate_header_does_not_quote_a_question_cut_into_a_topic(topical):
    """Regression: a question with no debate phrasing became the topic whole ("Views on What should I
    know before adopting a cat differ.")."""
    result = await Pipeline(OfflineEngine(), topical).answer("What do people think of nuclear power?", "typed", "debate")
    assert result.strategy == "debate" and "Views on What" not in result.answer
    # Issue 24: "Views differ." opens the answer only when a view on each side was found.
    sides = {line.split(":")[0] for line in result.answer.splitlines() if line.startswith("- ")}
    assert result.answer.startswith("Views differ.") == (sides == {"- For", "- Against"}), result.answer
