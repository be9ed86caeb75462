"""The LLM path's own checks, against the loopback OpenAI stub: a model's "not in the sources" for a part of
the answer is checked by the offline reader before the part is dropped; knowledge = "labelled" keeps what a
model adds of its own apart from the cited answer."""

from __future__ import annotations

import json
import re

import pytest

from typedrag.engines.llm_engine import LLMEngine
from typedrag.engines.offline import OfflineEngine
from typedrag.errors import QuestionError
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.pipeline import Pipeline, PipelineSettings
from typedrag.testing import ListRetriever
from typedrag.testing.openai_stub import Reply, default_content

from otel_fixtures import ancestors, by_name, no_provider, spans  # noqa: F401

ROME = [
    "Historians list many causes for the fall of the Western Roman Empire.",
    "Economic troubles, including heavy taxation and inflation, weakened the Western Roman Empire and led to its fall.",
    "Repeated invasions by Germanic tribes and the Huns put pressure on the frontiers of the Western Roman Empire until it fell.",
    "Political instability, with frequent civil wars and short reigns, undermined central authority in Rome.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen in the chloroplasts of plants.",
]
QUESTION = "Why did the Western Roman Empire fall?"


def pipeline(server, **settings) -> Pipeline:
    model = OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0, timeout=20)
    return Pipeline(LLMEngine(model), ListRetriever(ROME), settings=PipelineSettings(top_k=2, **settings))


def abstaining(request):
    """A small model's habit: every part of the answer is "not in the sources"; the aggregator merges what it gets."""
    if request.schema_name == "SubQueryPlan":
        return Reply(
            content=json.dumps({"sub_queries": ["invasions by Germanic tribes", "political instability civil wars"]})
        )
    if request.schema_name is not None:
        return Reply(content=default_content(request))
    if "Partial answers" in request.last_user:
        numbers = re.findall(r"\[(\d+)\]", request.last_user)
        return Reply(content=f"Rome fell for several reasons [{numbers[0] if numbers else 1}].")
    return Reply(content='{"not_in_sources": "why the empire fell"}')


async def test_a_parts_not_in_sources_is_overridden_when_the_reader_finds_an_answer_in_its_passages(stub):
    result = await pipeline(stub(abstaining)).answer(QUESTION, "typed", "reason")
    assert result.strategy == "reason" and not result.abstained
    kept = [a for a in result.aspects if a.error is None]
    assert kept, [a.error for a in result.aspects]
    overrides = [f for f in result.fallbacks if "the reader finds a sentence of them that does" in f.reason]
    assert overrides and all("why the empire fell" in f.reason for f in overrides)
    checks = [s for s in result.steps if s.role.startswith("check:")]
    assert checks and {s.engine for s in checks} == {"offline-extractive"}
    for aspect in kept:  # answered with quotes of its own passages, cited
        assert re.search(r"\[\d+\]", aspect.answer) and any(s in aspect.answer for s in ROME)


async def test_the_check_is_a_step_with_its_span_inside_the_step_it_checks(stub, spans):
    await pipeline(stub(abstaining)).answer(QUESTION, "typed", "reason")
    finished = spans.get_finished_spans()
    checks = by_name(finished)["typedrag.check"]
    assert checks and all(c.attributes["typedrag.engine"] == "offline-extractive" for c in checks)
    assert any(c.attributes["typedrag.supported"] for c in checks)
    assert {ancestors(c, finished)[0] for c in checks} <= {"typedrag.write"}  # the aspect's or the overview's


async def test_with_the_check_off_the_models_word_is_taken_and_the_typed_plan_falls_back(stub):
    result = await pipeline(stub(abstaining), check_not_in_sources=False).answer(QUESTION, "typed", "reason")
    assert result.strategy == "rag" and result.abstained
    assert not any(s.role.startswith("check:") for s in result.steps)


async def test_the_models_word_stands_where_the_reader_finds_no_answer_either(stub):
    def off_topic(request):
        if request.schema_name == "SubQueryPlan":
            return Reply(content=json.dumps({"sub_queries": ["chloroplasts sugar", "light water"]}))
        return abstaining(request)

    server = stub(off_topic)
    model = OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0, timeout=20)
    photo = Pipeline(LLMEngine(model), ListRetriever(ROME[-1:]), settings=PipelineSettings(top_k=1))
    result = await photo.answer(QUESTION, "typed", "reason")
    assert result.abstained  # the final step too: the model's word stands for a final step, never checked
    assert not any("the reader finds a sentence" in f.reason for f in result.fallbacks)
    assert any(s.role.startswith("check:") for s in result.steps)  # checked, and found nothing


def unanswered_overview(request):
    """The question's own passages do not answer it, in the model's word; each aspect is answered from its own."""
    if request.schema_name == "SubQueryPlan":
        return abstaining(request)
    if request.schema_name is not None:
        return Reply(content=default_content(request))
    if "Partial answers" in request.last_user:
        return Reply(content="The documents do not say why it fell; they name civil wars [1].")
    if "Answer only this part of it" in request.last_user:
        number = re.findall(r"^\[(\d+)\]", request.last_user, re.M)[0]
        return Reply(content=f"Civil wars weakened it [{number}].")
    return Reply(content='{"not_in_sources": "the year the empire fell"}')


async def test_the_aggregator_is_told_when_the_questions_own_passages_did_not_answer_it(stub):
    """Black's manual never covers Cython, and its overview said so; the aspects that were left answered around it
    ("widen the include pattern"), and the merged answer read as the way to format Cython files (BENCHMARKS 53f).
    The merging step is now told that the question as asked was not answered, and what its passages lack."""
    server = stub(unanswered_overview)
    result = await pipeline(server, check_not_in_sources=False).answer(QUESTION, "typed", "reason")
    [overview] = [a for a in result.aspects if a.label == "overview"]
    assert overview.error is not None and "the year the empire fell" in overview.error
    [merge] = [r for r in server.requests if "Partial answers" in r.last_user]
    assert "did not answer it (it lacks the year the empire fell)" in merge.last_user
    assert "Open with one sentence saying what the documents do not say" in merge.last_user
    answered = stub(abstaining)  # the overview answered (the reader overrides its "not in the sources")
    await pipeline(answered).answer(QUESTION, "typed", "reason")
    [merged] = [r for r in answered.requests if "Partial answers" in r.last_user]
    assert "did not answer it" not in merged.last_user


# ---------------------------------------------------------------- a debate that may conclude

FSYNC = [
    "Turning off fsync can result in unrecoverable data corruption in the event of a power failure or system crash.",
    "It is only advisable to turn off fsync if you can easily recreate your entire database from external data.",
    "Turning fsync off is often a performance benefit, since the server does not wait for writes to reach disk.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen in the chloroplasts of plants.",
]
DEBATED = "Is it a good idea to turn off fsync?"


def debating(weighing: str | None):
    """Two perspectives, each answered with its first passage; the weighing replies `weighing` (None: the stub's)."""

    def responder(request):
        if request.schema_name == "DebatePlan":
            return Reply(
                content=json.dumps(
                    {
                        "topic": "turning off fsync",
                        "perspectives": [
                            {"name": "for turning it off", "sub_query": "fsync off performance benefit"},
                            {"name": "against turning it off", "sub_query": "fsync off data corruption crash"},
                        ],
                    }
                )
            )
        if request.schema_name == "Weighing" and weighing is not None:
            return Reply(content=weighing)
        return Reply(content=default_content(request))

    return responder


def debate_pipeline(server) -> Pipeline:
    model = OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0, timeout=20)
    return Pipeline(LLMEngine(model), ListRetriever(FSYNC), settings=PipelineSettings(top_k=1))


def mediation_request(server):
    [request] = [
        r
        for r in server.requests
        if r.body.get("messages") and "The case made from each perspective" in r.last_user and r.schema_name is None
    ]
    return request


async def test_the_mediator_concludes_when_the_weighing_finds_the_sources_favour_one_side(stub):
    verdict = {
        "leaning": "one side",
        "side": "against turning it off",
        "reason": "it risks unrecoverable data corruption",
    }
    server = stub(debating(json.dumps(verdict)))
    result = await debate_pipeline(server).answer(DEBATED, "typed", "debate")
    assert result.strategy == "debate" and not result.abstained
    weighed = [c for c in result.llm_calls if c.role == "weigh:debate"]
    assert len(weighed) == 1 and weighed[0].structured == "ok"
    asked = mediation_request(server).last_user
    assert "The documents favour one side: against turning it off (it risks unrecoverable data corruption)." in asked
    assert "Generally no, because" in asked and "The documents leave this open" not in asked
    [weigh] = [r for r in server.requests if r.schema_name == "Weighing"]
    assert (
        'aspect="for turning it off"' in weigh.last_user and DEBATED in weigh.last_user
    )  # it read the perspectives' cases


async def test_the_weighing_is_parsed_into_the_decision_the_mediator_is_given(stub):
    from typedrag.driver import Driver, Run, Services
    from typedrag.engines.base import Part, Trace
    from typedrag.rerank import EmbeddingReranker
    from typedrag.strategies.debate import MEDIATION
    from typedrag.strategies.decomposed import weighed

    verdict = {"leaning": "one side", "side": "against turning it off", "reason": "data corruption"}
    server = stub(debating(json.dumps(verdict)))
    engine = LLMEngine(OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0, timeout=20))
    driver = Driver(Services(engine, ListRetriever(FSYNC), EmbeddingReranker()), Trace())
    parts = (Part("against", "Turning it off risks corruption [1]."),)
    stance = await driver.follow(weighed(DEBATED, "fsync", parts, "mediate:debate", MEDIATION.weigh), Run())
    assert stance.startswith("The documents favour one side: against turning it off (data corruption).")
    [weigh] = [r for r in server.requests if r.schema_name == "Weighing"]
    assert "Topic: fsync" in weigh.last_user and '<partial n="1" aspect="against">' in weigh.last_user
    assert [(s.step, s.role) for s in driver.trace.steps] == [
        ("plan", "weigh:debate")
    ]  # a step of its own in the trace


async def test_a_balanced_weighing_keeps_the_for_and_against_form(stub):
    server = stub(debating(None))  # the stub's weighing: balanced
    result = await debate_pipeline(server).answer(DEBATED, "typed", "debate")
    asked = mediation_request(server).last_user
    assert "The documents leave this open. State the strongest reasons for and against" in asked
    assert "favour one side" not in asked
    assert [c.role for c in result.llm_calls].count("weigh:debate") == 1


async def test_a_weighing_that_fails_is_recorded_and_the_answer_is_balanced(stub):
    server = stub(debating("this is not JSON at all"))
    result = await debate_pipeline(server).answer(DEBATED, "typed", "debate")
    assert result.strategy == "debate"
    assert "The documents leave this open" in mediation_request(server).last_user
    assert any(f.step == "mediate:debate" and "weighing the perspectives failed" in f.reason for f in result.fallbacks)


# ---------------------------------------------------------------- query expansion (issue 43 #3)

SHIP_PASSAGES = [
    "RMS Titanic was a British ocean liner that sank in the North Atlantic in April 1912.",
    "Davits are cranes that lower boats over a ship's side; Welin davits could each handle several boats.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen in the chloroplasts of plants.",
]
SHIP_QUESTION = "How did the Titanic get its lifeboats into the water?"


def expanding(expansion: str | None):
    def responder(request):
        if request.schema_name == "Expansion" and expansion is not None:
            return Reply(content=expansion)
        return Reply(content=default_content(request))

    return responder


def ship_pipeline(server, tmp_path=None, **settings) -> Pipeline:
    from typedrag.llm.cache import ResponseCache
    from typedrag.prompts import PROMPT_VERSION

    cache = ResponseCache(tmp_path, PROMPT_VERSION) if tmp_path is not None else None
    model = OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0, timeout=20, cache=cache)
    return Pipeline(LLMEngine(model), ListRetriever(SHIP_PASSAGES), settings=PipelineSettings(top_k=1, **settings))


async def test_expansion_searches_the_models_queries_beside_the_question_fused_recorded_and_cached(stub, tmp_path):
    expansion = {
        "rewrite": "Titanic lifeboats lowered davits",
        "passage": "Welin davits lowered the boats over the ship's side.",
    }
    server = stub(expanding(json.dumps(expansion)))
    first = await ship_pipeline(server, tmp_path, expand_queries=True).answer(SHIP_QUESTION, "rag")
    [call] = [c for c in first.llm_calls if c.role == "expand:query"]
    assert call.structured == "ok" and not call.cached
    assert [s.role for s in first.steps if s.step == "plan"] == ["expand:query"]
    # the question alone finds the Titanic passage (top 1); the fused ranking brings the davits passage in
    assert any("davits" in s.text for s in first.sources)
    answer_request = next(r for r in server.requests if r.schema_name is None)
    assert "Welin davits" in answer_request.last_user
    again = await ship_pipeline(server, tmp_path, expand_queries=True).answer(SHIP_QUESTION, "rag")
    assert [c.cached for c in again.llm_calls if c.role == "expand:query"] == [True]
    assert again.sources == first.sources


async def test_expansion_is_on_by_default_with_a_model_and_can_be_turned_off(stub):
    """A blind reader preferred plain RAG with the model's expansion 30 to 2 on two manuals (docs/lab/2026-12-03-demo-vectors.md, g)."""
    from typedrag.config import load_settings
    from typedrag.factory import Resources, build_pipeline

    server = stub(
        expanding(json.dumps({"rewrite": "Titanic lifeboats lowered davits", "passage": "Davits lowered the boats."}))
    )
    result = await ship_pipeline(server).answer(SHIP_QUESTION, "rag")
    assert [r.schema_name for r in server.requests].count("Expansion") == 1
    assert [c.role for c in result.llm_calls] == ["expand:query", "answer:rag"]
    server.requests.clear()
    await ship_pipeline(server, expand_queries=False).answer(SHIP_QUESTION, "rag")
    assert not any(r.schema_name == "Expansion" for r in server.requests)
    assert build_pipeline(load_settings({}), Resources(), need_index=False).settings.expand_queries is True
    assert (
        build_pipeline(
            load_settings({"expand_queries": "false"}), Resources(), need_index=False
        ).settings.expand_queries
        is False
    )


async def test_a_failed_expansion_is_recorded_and_the_question_searched_alone(stub):
    server = stub(expanding("no JSON here"))
    result = await ship_pipeline(server, expand_queries=True).answer(SHIP_QUESTION, "rag")
    assert any(f.step == "expand:query" and "searched with the question alone" in f.reason for f in result.fallbacks)
    assert [s.text for s in result.sources] == [SHIP_PASSAGES[0]] and not result.abstained


async def test_offline_expansion_asks_nothing_and_changes_nothing():
    from typedrag import OfflineEngine

    plain = Pipeline(OfflineEngine(), ListRetriever(SHIP_PASSAGES), settings=PipelineSettings(top_k=1))
    expanding_offline = Pipeline(
        OfflineEngine(), ListRetriever(SHIP_PASSAGES), settings=PipelineSettings(top_k=1, expand_queries=True)
    )
    a, b = await plain.answer(SHIP_QUESTION, "rag"), await expanding_offline.answer(SHIP_QUESTION, "rag")
    assert a.answer == b.answer and a.sources == b.sources and [s.role for s in a.steps] == [s.role for s in b.steps]
    assert not any(s.role == "expand:query" for s in b.steps)


# ---------------------------------------------------------------- knowledge beyond the documents, labelled

VACUUM = [
    "VACUUM marks the space taken by dead rows as reusable; it runs alongside reads and writes of the table.",
    "VACUUM FULL rewrites the whole table into a new file and returns the freed space to the operating system.",
    "VACUUM FULL takes an ACCESS EXCLUSIVE lock on the table while it works.",
]
DIFFERENCE = "What is the difference between VACUUM and VACUUM FULL?"
OWN = [
    "On a large table VACUUM FULL can take hours [2].",
    "The pg_repack extension rewrites a table with a shorter lock.",
]


def knowing(from_sources: str | None = None, own=OWN, covers="how long it takes"):
    """A model that keeps what it knows apart: the cited answer from the first source it is shown (or
    `from_sources`), and `own` sentences for what the sources do not cover."""

    def responder(request):
        if request.schema_name == "LabelledAnswer":
            first = re.findall(r"\[(\d+)\]", request.last_user)[0]
            cited = (
                f"VACUUM FULL returns the space to the operating system [{first}]."
                if from_sources is None
                else from_sources
            )
            return Reply(content=json.dumps({"from_sources": cited, "not_covered": covers, "from_own_knowledge": own}))
        return Reply(content=default_content(request))

    return responder


def vacuum_pipeline(server, texts=VACUUM, **settings) -> Pipeline:
    model = OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0, timeout=20)
    return Pipeline(LLMEngine(model), ListRetriever(texts), settings=PipelineSettings(top_k=3, **settings))


async def test_labelled_keeps_the_models_own_knowledge_apart_uncited_and_recorded_sentence_by_sentence(stub):
    server = stub(knowing())
    events: list[tuple[str, dict]] = []
    result = await vacuum_pipeline(server, knowledge="labelled").answer(
        DIFFERENCE, "typed", "comparison", on_event=lambda name, data: events.append((name, data))
    )
    assert result.knowledge == "labelled" and not result.abstained
    # the cited part is the answer, its citations its own; the unsourced part has no marker, one sentence an item
    assert re.fullmatch(r"VACUUM FULL returns the space to the operating system \[\d\]\.", result.answer)
    assert [c.source_numbers for c in result.citations] == [[int(re.findall(r"\d", result.answer)[0])]]
    assert result.unsourced.sentences == ["On a large table VACUUM FULL can take hours.", OWN[1]]
    assert result.unsourced.covers == "how long it takes" and result.unsourced.by == result.engines.generator
    assert result.reply == result.answer + "\n\nNot from your documents: " + " ".join(result.unsourced.sentences)
    # the final step's reply was a validated structured output; the plan's was not asked for it
    labelled = [r for r in server.requests if r.schema_name == "LabelledAnswer"]
    assert (
        len(labelled) == 1
        and "your own sentences for what the sources do not cover" in labelled[0].messages[0]["content"]
    )
    assert '"not_in_sources"' not in labelled[0].messages[0]["content"]  # the rule it replaces
    # what it would add was searched for: every passage found had been read, so nothing more was asked
    assert any("no passage not read already" in note for step in result.steps for note in step.notes)
    assert [c.structured for c in result.llm_calls if c.role == "answer:comparison"] == ["ok"]
    # streamed: the cited text as tokens, then the unsourced part as an event of its own, before the sources
    names = [name for name, _ in events]
    assert "".join(d["text"] for n, d in events if n == "token") == result.answer
    assert names.index("unsourced") > max(i for i, n in enumerate(names) if n == "token") and names[-1] == "sources"
    unsourced = dict(events)["unsourced"]
    assert unsourced["sentences"] == result.unsourced.sentences and unsourced["text"].startswith(
        "Not from your documents: "
    )


REPACK = "pg_repack rebuilds a bloated table online, holding an exclusive lock only briefly at the end."
GAP_ASKED = "left this part of the question uncovered"


def knowing_then(gap_reply, covers: str = "how to shrink a table with a shorter lock", own=OWN):
    """`knowing()` with the gap step's reply (its request names the part the first answer left uncovered):
    `gap_reply(request)`, or a dict sent as the JSON reply."""
    first = knowing(covers=covers, own=own)

    def responder(request):
        if request.schema_name == "LabelledAnswer" and GAP_ASKED in request.last_user:
            return gap_reply(request) if callable(gap_reply) else Reply(content=json.dumps(gap_reply))
        return first(request)

    return responder


def gap_pipeline(server) -> Pipeline:
    """`vacuum_pipeline` labelled, over VACUUM and REPACK, the question searched alone."""
    return vacuum_pipeline(server, texts=[*VACUUM, REPACK], knowledge="labelled", expand_queries=False)


async def test_labelled_searches_the_documents_for_what_the_model_would_add_and_answers_from_them(stub):
    """Issue 53: with knowledge = labelled, 13 of 44 answerable held-out questions got a part "not from your
    documents" that the documents held on a page their search had missed. What the model would add is searched
    for first; passages no step read are given to it for that part alone."""
    server = stub(
        knowing_then(
            {
                "from_sources": "pg_repack rebuilds a table online with a brief lock [4].",
                "not_covered": "",
                "from_own_knowledge": [],
            }
        )
    )
    pipeline = gap_pipeline(server)
    events: list[tuple[str, dict]] = []
    result = await pipeline.answer(DIFFERENCE, "rag", on_event=lambda name, data: events.append((name, data)))
    assert result.unsourced is None and not result.abstained
    [repack] = [s for s in result.sources if s.text == REPACK]
    assert result.answer.startswith("VACUUM FULL returns the space to the operating system [")
    assert result.answer.endswith(f"pg_repack rebuilds a table online with a brief lock [{repack.number}].")
    assert any(repack.number in c.source_numbers for c in result.citations)
    asked = [r for r in server.requests if r.schema_name == "LabelledAnswer"]
    assert len(asked) == 2 and GAP_ASKED in asked[1].last_user and "how to shrink a table" in asked[1].last_user
    assert REPACK in asked[1].last_user and VACUUM[0] not in asked[1].last_user  # only what no step had read
    assert [c.role for c in result.llm_calls][-1] == "answer:gap"
    [gap_step] = [s for s in result.steps if s.role == "answer:gap"]
    assert any("2 sentences of its own -> 0" in note for note in gap_step.notes)
    assert "".join(d["text"] for n, d in events if n == "token") == result.answer  # the stream went on


async def test_the_gap_is_searched_with_the_models_own_sentences_too(stub):
    """What the model says is uncovered can be too vague to find anything ("other tools"); the name its sentence
    gives (pg_repack) finds the page that has it."""

    def cite_repack(request):
        number = re.findall(r"\[(\d+)\] pg_repack", request.last_user)[0]
        cited = f"pg_repack rebuilds a table online with a brief lock [{number}]."
        return Reply(content=json.dumps({"from_sources": cited, "not_covered": "", "from_own_knowledge": []}))

    own = ["The pg_repack extension rewrites a table with a shorter lock."]
    server = stub(knowing_then(cite_repack, covers="other tools", own=own))
    pipeline = gap_pipeline(server)
    result = await pipeline.answer(DIFFERENCE, "rag")
    assert result.unsourced is None and result.answer.endswith("with a brief lock [4].")
    assert ListRetriever([*VACUUM, REPACK]).search("other tools", 5) == []  # the vague words alone find nothing


async def test_a_gap_step_that_fails_leaves_the_answer_and_the_models_part_as_written(stub):
    server = stub(knowing_then(lambda request: Reply(content="overloaded", status=503)))
    pipeline = gap_pipeline(server)
    result = await pipeline.answer(DIFFERENCE, "typed", "comparison")
    assert result.strategy == "comparison" and not result.abstained
    assert re.fullmatch(r"VACUUM FULL returns the space to the operating system \[\d\]\.", result.answer)
    assert result.unsourced.sentences == ["On a large table VACUUM FULL can take hours.", OWN[1]]
    assert any(f.step == "answer:gap" and "the gap's step failed" in f.reason for f in result.fallbacks)


async def test_labelled_keeps_the_models_part_where_the_passages_found_for_it_do_not_cover_it(stub):
    server = stub(
        knowing_then(
            {"from_sources": "", "not_covered": "how to shrink a table", "from_own_knowledge": ["Something else."]}
        )
    )
    pipeline = gap_pipeline(server)
    result = await pipeline.answer(DIFFERENCE, "rag")
    assert result.unsourced.sentences == ["On a large table VACUUM FULL can take hours.", OWN[1]]  # as first written
    assert re.fullmatch(r"VACUUM FULL returns the space to the operating system \[\d\]\.", result.answer)
    [gap_step] = [s for s in result.steps if s.role == "answer:gap"]
    assert any("do not cover it" in note for note in gap_step.notes)


async def test_documents_the_default_asks_for_no_knowledge_of_the_models_own(stub):
    server = stub(knowing())
    result = await vacuum_pipeline(server).answer(DIFFERENCE, "rag")
    assert result.knowledge == "documents" and result.unsourced is None and result.reply == result.answer
    assert not any(r.schema_name == "LabelledAnswer" for r in server.requests)
    final = [r for r in server.requests if r.schema_name is None][-1]
    assert "your own" not in final.messages[0]["content"] and '"not_in_sources"' in final.messages[0]["content"]
    # the rule on gaps: a sentence on what the sources lack only for a part the question asks about
    assert "only when it is a part the question itself asks about" in final.messages[0]["content"]


async def test_where_the_documents_do_not_answer_the_abstention_stands_and_the_labelled_part_beside_it(stub):
    server = stub(knowing(from_sources="", covers="what VACUUM FULL costs"))
    result = await vacuum_pipeline(server, knowledge="labelled").answer(DIFFERENCE, "rag")
    assert result.abstained and result.abstention.by.startswith("openai-compatible:stub")
    assert (
        result.abstention.reason.endswith("what VACUUM FULL costs")
        or "what VACUUM FULL costs" in result.abstention.reason
    )
    assert result.answer.startswith("The documents do not answer this") and result.citations == []
    assert result.unsourced.sentences[1] == OWN[1] and result.reply.endswith(" ".join(result.unsourced.sentences))


async def test_a_labelled_reply_that_never_validates_is_recorded_and_answered_from_the_documents(stub):
    def broken(request):
        if request.schema_name == "LabelledAnswer":
            return Reply(content="Sure! VACUUM FULL is slower.")  # no JSON: the repair gets the same
        return Reply(content=default_content(request))

    server = stub(broken)
    result = await vacuum_pipeline(server, knowledge="labelled").answer(DIFFERENCE, "rag")
    assert result.unsourced is None and not result.abstained and result.answer.startswith("Stub answer to")
    calls = [c for c in result.llm_calls if c.role == "answer:rag"]
    assert [c.structured for c in calls] == ["failed", None] and calls[0].requests == 2  # one repair, then plain
    assert any(
        f.step == "answer:rag"
        and f.reason.startswith("knowledge = labelled: invalid structured output after one repair")
        and f.reason.endswith("answered from the documents alone")
        for f in result.fallbacks
    )


async def test_only_the_final_step_of_a_decomposed_answer_may_add_knowledge(stub):
    server = stub(knowing())
    result = await pipeline(server, knowledge="labelled").answer(QUESTION, "typed", "reason")
    assert result.strategy == "reason" and result.unsourced is not None
    kinds = {
        (r.schema_name, r.messages[0]["content"].count("your own sentences")) for r in server.requests if r.messages
    }
    aspects = [r for r in server.requests if "Answer only this part of it" in r.last_user]
    assert aspects and all(r.schema_name is None and "your own" not in r.messages[0]["content"] for r in aspects)
    assert ("LabelledAnswer", 1) in kinds and sum(r.schema_name == "LabelledAnswer" for r in server.requests) == 1


async def test_offline_labelled_adds_nothing_and_says_so_in_the_trace():
    offline = Pipeline(OfflineEngine(), ListRetriever(VACUUM), settings=PipelineSettings(top_k=3, knowledge="labelled"))
    documents = Pipeline(OfflineEngine(), ListRetriever(VACUUM), settings=PipelineSettings(top_k=3))
    labelled, plain = await offline.answer(DIFFERENCE, "rag"), await documents.answer(DIFFERENCE, "rag")
    assert labelled.answer == plain.answer and labelled.unsourced is None and labelled.knowledge == "labelled"
    [note] = [f for f in labelled.fallbacks if f.step == "knowledge"]
    assert "the offline engine" in note.reason and "no knowledge of its own" in note.reason
    assert not any(f.step == "knowledge" for f in plain.fallbacks)


async def test_knowledge_is_chosen_per_answer_and_an_unknown_setting_is_refused(stub):
    server = stub(knowing())
    documents = vacuum_pipeline(server)
    assert (await documents.answer(DIFFERENCE, "rag", knowledge="labelled")).unsourced is not None
    with pytest.raises(QuestionError, match="unknown knowledge setting 'everything'"):
        await documents.answer(DIFFERENCE, "rag", knowledge="everything")
