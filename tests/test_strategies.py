"""Typed-RAG's strategies: each type's flow, tested by sending results into it (no engine, retriever or
server), then the same strategies through a pipeline with a scripted model in process, and through real
HTTP only where the transport is the point (the plan's schema on the wire, requests in flight together)."""

from __future__ import annotations

import json
import re
import time

import pytest

from typedrag.engines.base import (
    Advised,
    AspectAnswer,
    ClosedBook,
    Combined,
    Compared,
    Facet,
    Grounded,
    Weighing,
    Written,
)
from typedrag.engines.llm_engine import LLMEngine
from typedrag.engines.offline import OfflineEngine
from typedrag.errors import AspectsFailed, LLMError, PlanFailed
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.nfq import NFQType
from typedrag.pipeline import PipelineSettings
from typedrag.pipeline import Pipeline
from typedrag.records import Passage, ScoredPassage
from typedrag.steps import Depths, Expand, Number, Plan, Planned, Rank, Search, Together, Weigh, Write
from typedrag.strategies import (
    INSTRUCTION,
    REASON,
    ClosedBookStrategy,
    ComparisonStrategy,
    DebateStrategy,
    EvidenceStrategy,
    ExperienceStrategy,
)
from typedrag.strategies.comparison import ComparisonPlan
from typedrag.strategies.debate import BALANCE, CONCLUDE, DebatePlan
from typedrag.strategies.decomposed import SubQueryPlan
from typedrag.strategies.experience import ExperiencePlan
from typedrag.testing import ScriptedChatModel
from typedrag.testing.flows import play
from typedrag.testing.openai_stub import Reply, default_content

from conftest import plan_call_of

DEPTHS = Depths()

UNEXPANDED = PipelineSettings(expand_queries=False)  # the calls a test counts, without the expansion call


def hit(name: str, score: float = 1.0) -> ScoredPassage:
    return ScoredPassage(Passage(passage_id=f"{name}#0", doc_id=name, title=name, text=f"What {name} says."), score)


def ids(hits) -> list[str]:
    return [h.passage_id.split("#")[0] for h in hits]


# --- each type's flow, its steps answered by the test ------------------------------------------------


def test_plain_rag_searches_the_question_numbers_its_passages_and_writes_the_answer():
    played = play(
        EvidenceStrategy("rag").flow("Why is the sky blue?", DEPTHS),
        lambda step: [[hit("sky"), hit("light")]] if isinstance(step, Search) else Written("Blue light scatters [1]."),
    )
    search, write = played.of(Search)[0], played.of(Write)[0]
    assert search.queries == ("Why is the sky blue?",) and search.k == DEPTHS.top_k
    assert isinstance(write.task, Grounded) and write.final and write.task.role == "answer:rag"
    assert [s.number for s in write.task.sources] == [1, 2] and played.outcome.answer == "Blue light scatters [1]."


def test_the_llm_only_baseline_writes_closed_book_and_searches_nothing():
    played = play(
        ClosedBookStrategy().flow("Why is the sky blue?", DEPTHS), lambda step: Written("Rayleigh scattering.")
    )
    assert [type(s) for s in played.steps] == [Write] and isinstance(played.steps[0].task, ClosedBook)


def test_comparison_searches_each_item_with_the_questions_other_words_and_writes_by_purpose():
    question = "Crocodile or alligator: how to tell?"
    plan = ComparisonPlan(purpose="difference", items=["crocodile snout", "alligator snout"])
    by_question, per_item = (
        [hit("croc", 0.9), hit("gator", 0.8)],
        [[hit("croc"), hit("nile")], [hit("gator"), hit("croc")]],
    )

    def answer(step):
        match step:
            case Plan():
                return plan
            case Search() if step.queries == (question,):
                return [by_question]
            case Search():
                return per_item
            case Rank():
                return [[hit("nile", 0.7)]]
            case Write():
                return Written("Crocodiles have a V-shaped snout [1].")

    played = play(ComparisonStrategy().flow(question, DEPTHS), answer)
    # the question's own search widened as plain RAG's is (Expand: nothing offline), then the items'
    assert [type(s) for s in played.steps] == [Plan, Planned, Expand, Search, Search, Rank, Number, Write]
    (own, items), rank, write = played.of(Search), played.of(Rank)[0], played.of(Write)[0]
    assert own.queries == (question,) and own.k == DEPTHS.item_search
    # each item searched with the question's other words, never the other item's nor the comparing ones
    assert items.queries == ("crocodile snout tell", "alligator snout tell") and items.k == DEPTHS.item_search
    assert rank.queries == (question,) and ids(rank.hits) == ["croc", "nile", "gator"] and rank.k == 2
    task = write.task
    assert isinstance(task, Compared) and write.final and task.items == ("crocodile snout", "alligator snout")
    assert task.purpose == "difference" and task.instruction.startswith("Open with the decisive difference")
    # the question's own passages first (plain RAG's lead), each item's best, the reranked best; each once
    assert ids(played.sources) == ["croc", "gator", "nile"] and task.lead == 2
    assert [(a.label, a.source_numbers) for a in played.outcome.aspects] == [
        ("crocodile snout", [1, 3]),
        ("alligator snout", [2, 1]),
    ]
    # the prompt names each item's own passages, so each is described from them
    assert task.item_sources == ((1, 3), (2, 1))
    assert (
        task.values()["item_passages"] == " Passages found for each: crocodile snout [1] [3]; alligator snout [2] [1]."
    )
    assert played.events[0] == ("plan", {"plan": plan.model_dump()})


def test_a_comparison_that_asks_which_is_better_opens_with_its_conclusion():
    plan = ComparisonPlan(purpose="superiority", items=["json", "jsonb"])
    answers = {Plan: plan, Rank: [[hit("a")]], Write: Written("jsonb [1].")}
    played = play(
        ComparisonStrategy().flow("json or jsonb: which should I use?", DEPTHS),
        lambda step: [[hit(q)] for q in step.queries] if isinstance(step, Search) else answers[type(step)],
    )
    prompt = played.of(Write)[0].task.prompt.messages(**played.of(Write)[0].task.values(), sources="(s)")[1]["content"]
    assert "Open with the conclusion: which is better" in prompt and prompt.index("Open with") < prompt.index(
        "other points"
    )


def test_a_comparison_of_more_items_than_its_cap_keeps_the_first_and_records_the_rest():
    plan = ComparisonPlan(purpose="superiority", items=["tea", "coffee", "cocoa", "mate", "chai", "kvass"])
    answers = {Plan: plan, Rank: [[hit("a")]], Write: Written("Tea [1].")}
    played = play(
        ComparisonStrategy().flow("Which drink is best?", DEPTHS),
        lambda step: [[hit("a")] for _ in step.queries] if isinstance(step, Search) else answers[type(step)],
    )
    assert played.of(Write)[0].task.items == ("tea", "coffee", "cocoa", "mate", "chai")
    assert [(n.step, n.reason) for n in played.notes] == [
        ("plan:comparison", "6 items planned, the first 5 kept; dropped: kvass")
    ]


def test_experience_reranks_the_pool_by_its_keywords_and_keeps_the_questions_own_passages():
    plan = ExperiencePlan(topic="learning guitar", keywords=["guitar", "chords", "practise"])
    found = {
        ("Any tips for a beginner?",): [[hit("q1"), hit("q2")]],
        ("guitar chords practise",): [[hit("k1"), hit("q1")]],
    }
    answers = {Plan: plan, Rank: [[hit("k1", 0.9)]], Write: Written("Practise daily [3].")}
    played = play(
        ExperienceStrategy().flow("Any tips for a beginner?", DEPTHS),
        lambda step: found[step.queries] if isinstance(step, Search) else answers[type(step)],
    )
    assert [type(s) for s in played.steps] == [
        Plan,
        Planned,
        Expand,
        Search,
        Search,
        Rank,
        Number,
        Write,
    ]  # no facets: no more
    (own, keywords), rank, write = played.of(Search), played.of(Rank)[0], played.of(Write)[0]
    assert own.k == keywords.k == DEPTHS.candidates_k
    assert (
        rank.queries == ("guitar chords practise",) and ids(rank.hits) == ["q1", "q2", "k1"] and rank.k == DEPTHS.top_k
    )
    assert isinstance(write.task, Advised) and write.task.topic == "learning guitar" and write.task.lead == 2
    assert ids(played.sources) == ["q1", "q2", "k1"] and write.task.values()["facets"] == ""


def test_experience_searches_each_facet_of_the_advice_and_adds_its_best_passages_on_topic():
    plan = ExperiencePlan(
        topic="bulk loading",
        keywords=["COPY", "indexes"],
        facets=["COPY command bulk load", "drop indexes before loading", "maintenance_work_mem setting"],
    )
    question = "Any tips for loading a few million rows quickly?"

    def answer(step):
        match step:
            case Plan():
                return plan
            case Search() if len(step.queries) == 1:
                return [[hit("q1"), hit("q2")]]
            case Search():  # the facets' searches
                return [[hit("copy"), hit("q1")], [hit("index"), hit("noise")], [hit("mem")]]
            case Rank() if step.queries == ("COPY indexes",):
                return [[hit("q1")]]
            case Rank() if len(step.queries) == 1:  # the facets' pool against the question: "noise" is off topic
                return [[hit(i, 0.9) for i in ids(step.hits) if i != "noise"] + [hit("noise", 0.1)]]
            case Rank():
                return [list(step.hits) for _ in step.queries]
            case Write():
                return Written("Use COPY [3].")

    played = play(ExperienceStrategy().flow(question, DEPTHS), answer)
    facets = played.of(Search)[2]
    assert facets.queries[0].startswith("COPY command bulk load ") and "million rows" in facets.queries[0]
    assert facets.k == DEPTHS.aspect_search
    # each facet's own on-topic passages, after the question's and the keywords' best; the off-topic one left out
    assert ids(played.sources) == ["q1", "q2", "copy", "index", "mem"]
    task = played.of(Write)[0].task
    assert task.facets == tuple(plan.facets) and "drop indexes before loading" in task.values()["facets"]


ROME_PLAN = SubQueryPlan(
    sub_queries=["economic troubles taxation", "Germanic invasions frontiers", "political instability"]
)
OWN = {"economic troubles taxation": "tax", "Germanic invasions frontiers": "goths", "political instability": "wars"}


class Reasoning:
    """Answers a decomposed flow's steps: the question's passages, a passage of its own for each aspect
    (all on topic), and each aspect's answer from `write(step)`."""

    def __init__(self, plan=ROME_PLAN, write=None, on_topic=None):
        self.plan, self.on_topic = plan, on_topic
        self.write = write or (
            lambda step: Written(
                f"About {step.task.focus} [{step.task.sources[0].number}]."
                if isinstance(step.task, AspectAnswer)
                else f"{step.task.role} [1]."
            )
        )

    def __call__(self, step):
        match step:
            case Plan():
                if isinstance(self.plan, Exception):
                    raise self.plan
                return self.plan
            case Search() if len(step.queries) == 1 and step.k == DEPTHS.top_k:
                return [[hit("rome", 0.9)]]
            case Search():
                return [[hit(OWN.get(q.removesuffix(" Rome fall"), "other"))] for q in step.queries]
            case Rank() if len(step.queries) == 1:  # the pool scored against the question
                return [[h for h in step.hits if self.on_topic is None or h.passage_id.split("#")[0] in self.on_topic]]
            case Rank():
                return [list(step.hits) for _ in step.queries]
            case Write():
                return self.write(step)


def test_reason_answers_the_overview_beside_the_plan_then_each_aspect_together_and_aggregates():
    played = play(REASON.flow("Why did Rome fall?", DEPTHS), Reasoning())
    expand, first, together = played.steps[0], played.steps[1:4], played.of(Together)
    assert (
        isinstance(expand, Expand) and expand.question == "Why did Rome fall?"
    )  # more queries only with an LLM that expands
    # the overview's passages first; its answer is written beside the plan and the planned aspects
    assert isinstance(first[0], Search) and first[0].queries == ("Why did Rome fall?",) and isinstance(first[1], Number)
    assert isinstance(first[2], Together) and len(together[0].flows) == 2
    overview_write = played.of(Write)[0]
    assert (
        isinstance(overview_write.task, Grounded)
        and overview_write.task.role == "overview:reason"
        and not overview_write.final
    )
    # each sub-query searched with the question's subject, then answered together (a second Together)
    aspect_search = played.of(Search)[1]
    assert (
        aspect_search.queries == tuple(f"{q} Rome fall" for q in ROME_PLAN.sub_queries)
        and aspect_search.k == DEPTHS.aspect_search
    )
    assert len(together[1].flows) == 3
    writes = played.of(Write)
    assert [w.task.focus for w in writes[1:4]] == ROME_PLAN.sub_queries and all(
        isinstance(w.task, AspectAnswer) for w in writes[1:4]
    )
    combined = writes[-1]
    assert combined.final and isinstance(combined.task, Combined) and combined.task.combine == "aggregate"
    assert combined.task.role == "aggregate:reason" and combined.task.facet is Facet.CAUSES
    assert [p.label for p in combined.task.parts] == ["overview", *ROME_PLAN.sub_queries] and combined.task.parts[
        0
    ].lead
    # numbered in aspect order, the overview's first; the combining step is given every one of them
    assert ids(played.sources) == ["rome", "tax", "goths", "wars"] == ids(combined.task.sources)
    assert [(a.label, a.source_numbers) for a in played.outcome.aspects] == [
        ("overview", [1]),
        ("economic troubles taxation", [2]),
        ("Germanic invasions frontiers", [3]),
        ("political instability", [4]),
    ]
    # the plan is told before any aspect; the overview, put first, is told once the plan is known
    assert [name for name, _ in played.events] == ["plan", "aspect", "aspect", "aspect", "aspect"]
    assert played.events[-1][1]["aspect"]["label"] == "overview" and played.notes == []


def test_instruction_is_reason_with_its_own_prompts_and_facet():
    played = play(
        INSTRUCTION.flow("How do I bake bread?", DEPTHS),
        Reasoning(SubQueryPlan(sub_queries=["bread dough", "bread oven"])),
    )
    assert played.of(Plan)[0].task.role == "plan:instruction"
    assert played.of(Write)[-1].task.facet is Facet.STEPS and played.of(Write)[-1].task.role == "aggregate:instruction"


def test_debate_answers_each_perspective_and_a_mediator_names_the_topic():
    plan = DebatePlan(
        topic="nuclear power",
        perspectives=[
            {"name": "advocates", "sub_query": "nuclear low carbon"},
            {"name": "opponents", "sub_query": "nuclear waste"},
        ],
    )
    played = play(DebateStrategy().flow("Is nuclear power good?", DEPTHS), Reasoning(plan))
    assert played.of(Search)[1].queries == ("nuclear low carbon nuclear power", "nuclear waste nuclear power")
    mediate = played.of(Write)[-1]
    assert (
        mediate.task.combine == "mediate"
        and mediate.task.role == "mediate:debate"
        and mediate.task.topic == "nuclear power"
    )
    assert [a.label for a in played.outcome.aspects] == ["overview", "advocates", "opponents"]


NUCLEAR = DebatePlan(
    topic="nuclear power",
    perspectives=[
        {"name": "advocates", "sub_query": "nuclear low carbon"},
        {"name": "opponents", "sub_query": "nuclear waste"},
    ],
)


def test_offline_a_debate_weighs_nothing_and_is_mediated_as_balanced():
    played = play(DebateStrategy().flow("Is nuclear power good?", DEPTHS), Reasoning(NUCLEAR))
    [weigh] = played.of(Weigh)  # asked for, sent None: nothing weighs offline
    assert weigh.task.role == "weigh:debate" and weigh.question == "Is nuclear power good?"
    assert (
        "Topic: nuclear power" in weigh.task.prompt.user and 'aspect="advocates"' in weigh.task.prompt.user
    )  # the cases, in the prompt
    assert played.steps.index(weigh) == len(played.steps) - 2  # between the aspects and the mediator
    assert played.of(Write)[-1].task.stance == BALANCE and not [n for n in played.notes if n.step == "mediate:debate"]


def test_a_debate_the_weighing_finds_one_sided_is_mediated_with_that_conclusion():
    def weighing(step):
        if isinstance(step, Weigh):
            return Weighing(leaning="one side", side="  advocates ", reason="low  carbon")
        return Reasoning(NUCLEAR)(step)

    played = play(DebateStrategy().flow("Is nuclear power good?", DEPTHS), weighing, model=True)
    assert played.of(Write)[-1].task.stance == CONCLUDE.format(side="advocates", reason="low carbon")
    assert "{stance}" in played.of(Write)[-1].task.prompt.user and played.of(Write)[-1].task.values()[
        "stance"
    ].startswith("The documents favour")


def test_a_weighing_that_fails_is_noted_on_the_mediator_and_the_debate_balanced():
    def failing(step):
        if isinstance(step, Weigh):
            raise PlanFailed("no valid weighing")
        return Reasoning(NUCLEAR)(step)

    played = play(DebateStrategy().flow("Is nuclear power good?", DEPTHS), failing, model=True)
    assert played.of(Write)[-1].task.stance == BALANCE and played.outcome.answer == "mediate:debate [1]."
    assert [(n.step, n.reason) for n in played.notes if n.step == "mediate:debate"] == [
        ("mediate:debate", "weighing the perspectives failed (PlanFailed: no valid weighing); mediated as balanced")
    ]


def test_a_plan_over_its_cap_keeps_the_first_five_aspects_and_records_the_drop():
    plan = SubQueryPlan(
        sub_queries=["tax", "Tax ", "", "invasions", "civil wars", "inflation", "division of empire", "plague"]
    )
    played = play(REASON.flow("Why did Rome fall?", DEPTHS), Reasoning(plan))
    assert [a.label for a in played.outcome.aspects] == [
        "overview",
        "tax",
        "invasions",
        "civil wars",
        "inflation",
        "division of empire",
    ]
    assert [(n.step, n.reason) for n in played.notes if n.step == "plan:reason"] == [
        ("plan:reason", "6 sub-queries planned, the first 5 kept; dropped: plague")
    ]


def test_an_aspect_whose_generation_fails_is_dropped_and_recorded_while_the_others_answer():
    broken = "Germanic invasions frontiers"

    def write(step):
        if isinstance(step.task, AspectAnswer) and step.task.focus == broken:
            raise LLMError("model crashed")
        return Written(
            f"About {getattr(step.task, 'focus', 'the question')} [{step.task.sources[0].number if step.task.sources else 1}]."
        )

    played = play(REASON.flow("Why did Rome fall?", DEPTHS), Reasoning(write=write))
    assert [(n.step, n.reason) for n in played.notes] == [
        (f"aspect:{broken}", "dropped, generation failed: model crashed")
    ]
    assert [p.label for p in played.of(Write)[-1].task.parts] == [
        "overview",
        "economic troubles taxation",
        "political instability",
    ]
    dropped = next(a for a in played.outcome.aspects if a.label == broken)
    assert dropped.error == "generation failed: model crashed" and dropped.answer == ""


def test_an_aspect_the_driver_declines_or_an_extractive_engine_finds_nothing_for_is_dropped_with_the_reason():
    def write(step):
        focus = getattr(step.task, "focus", None)
        if focus == "economic troubles taxation":
            return Written("", supported=False, declined="its passages do not answer it: nothing on taxes")
        if focus == "political instability":
            return Written("The nearest sentence. [4]", supported=False)  # an extractive engine: nothing of its kind
        if focus is None:
            return Written(
                "The nearest sentence to the question. [1]", supported=False
            )  # the overview: kept as plain RAG's
        return Written(f"About {focus} [3].")

    played = play(REASON.flow("Why did Rome fall?", DEPTHS), Reasoning(write=write))
    assert [(n.step, n.reason) for n in played.notes] == [
        ("aspect:economic troubles taxation", "dropped, its passages do not answer it: nothing on taxes"),
        ("aspect:political instability", "dropped, no sentence of its kind in its passages answers the question"),
    ]
    assert [p.label for p in played.of(Write)[-1].task.parts] == ["overview", "Germanic invasions frontiers"]


def test_an_aspect_that_repeats_another_is_dropped():
    played = play(
        REASON.flow("Why did Rome fall?", DEPTHS),
        Reasoning(write=lambda step: Written("Rome fell because of heavy taxes and many invasions [1].")),
    )
    assert [p.label for p in played.of(Write)[-1].task.parts] == ["overview"]
    assert [n.reason for n in played.notes] == ["dropped, its answer repeats another aspect's"] * 3


def test_an_aspect_with_no_on_topic_passage_of_its_own_is_dropped_and_told_before_any_is_answered():
    played = play(REASON.flow("Why did Rome fall?", DEPTHS), Reasoning(on_topic={"rome", "tax", "goths"}))
    assert [(n.step, n.reason) for n in played.notes] == [
        (
            "aspect:political instability",
            "dropped, no on-topic passage beyond the question's own and the other aspects'",
        )
    ]
    announced = played.events[1][1]["aspect"]  # right after the plan, before any aspect is answered
    assert announced["label"] == "political instability" and announced["error"].startswith("no on-topic passage")
    assert [w.task.focus for w in played.of(Write) if isinstance(w.task, AspectAnswer)] == [
        "economic troubles taxation",
        "Germanic invasions frontiers",
    ]


def down(step):
    raise LLMError("down")


def test_when_every_aspect_is_dropped_the_flow_fails_saying_why_with_the_counts():
    with pytest.raises(
        AspectsFailed, match=r"all 4 aspects \(the overview and 3 planned\) were dropped: 4 generation failed: down"
    ):
        play(REASON.flow("Why did Rome fall?", DEPTHS), Reasoning(write=down))


def test_a_failed_plan_ends_the_flow_for_the_pipeline_to_fall_back():
    with pytest.raises(PlanFailed, match="no valid plan"):
        play(DebateStrategy().flow("Is nuclear power good?", DEPTHS), Reasoning(PlanFailed("no valid plan")))


def test_a_question_that_finds_no_passage_has_no_overview():
    def answer(step):
        if isinstance(step, Search) and len(step.queries) == 1 and step.k == DEPTHS.top_k:
            return [[]]
        return Reasoning()(step)

    played = play(REASON.flow("Why did Rome fall?", DEPTHS), answer)
    assert [a.label for a in played.outcome.aspects] == ROME_PLAN.sub_queries and len(played.of(Together)[0].flows) == 1


# --- the strategies in a pipeline, a scripted model in process ------------------------------------------

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


class RecordingRetriever:
    """Wraps a retriever to see which queries a strategy sends."""

    def __init__(self, inner):
        self.inner, self.name, self.queries = inner, inner.name, []

    def search(self, query, k=10):
        self.queries.append(query)
        return self.inner.search(query, k)

    def search_many(self, queries, k=10):
        self.queries.extend(queries)
        return self.inner.search_many(queries, k)


@pytest.fixture(scope="module")
def topical():
    """A retriever with one passage per facet, so every aspect finds passages of its own."""
    from typedrag.testing import ListRetriever

    return ListRetriever(ROME)


def scripted(plans: dict[str, object] | None = None, answer=None) -> ScriptedChatModel:
    """A model that plans with `plans[schema name]` (else a valid default) and writes `answer(call)` (else a
    cited default, as the stub server's)."""

    def script(call):
        if call.schema is not None and call.schema.__name__ in (plans or {}):
            plan = plans[call.schema.__name__]
            return plan if isinstance(plan, str) else json.dumps(plan)
        if call.schema is None and answer is not None:
            return answer(call)
        return default_content(call.as_request())

    return ScriptedChatModel(script)


async def test_reason_retrieves_once_per_sub_query_and_aggregates_every_aspect(topical):
    plan = {
        "sub_queries": [
            "economic troubles taxation",
            "Germanic invasions frontiers",
            "political instability civil wars",
        ]
    }

    def answer(call):
        if "Partial answers" in call.user:
            return "Aggregated explanation [1]."
        number = re.search(r"^\[(\d+)\] ", call.user, re.M).group(1)
        if "Answer only this part of it: " not in call.user:  # the overview: plain RAG's own prompt
            return f"Overview of why Rome fell [{number}]."
        return f"Aspect answer about {call.user.split('Answer only this part of it: ')[1].splitlines()[0]} [{number}]."

    recording, model = RecordingRetriever(topical), scripted({"SubQueryPlan": plan}, answer)
    result = await Pipeline(LLMEngine(model), recording).answer("Why did Rome fall?", "typed", NFQType.REASON)
    # The question itself (never less evidence than plain RAG), and each sub-query with the question's subject.
    assert recording.queries == ["Why did Rome fall?", *(f"{q} Rome fall" for q in plan["sub_queries"])]
    [aggregate] = [c for c in model.calls if "Partial answers" in c.user]
    assert all(f"Aspect answer about {q}" in aggregate.user for q in plan["sub_queries"])
    assert [a.label for a in result.aspects] == ["overview", *plan["sub_queries"]] and all(
        a.error is None for a in result.aspects
    )
    assert result.answer == "Aggregated explanation [1]." and result.strategy == "reason"
    roles = [c.role for c in result.llm_calls]
    assert roles.count("aspect:reason") == 3 and roles.count("overview:reason") == 1 and roles[-1] == "aggregate:reason"


async def test_the_models_prompts_carry_a_comparisons_items_and_purpose_and_a_debates_topic_and_cases(
    retriever, topical
):
    model = scripted({"ComparisonPlan": {"purpose": "difference", "items": ["crocodile snout", "alligator snout"]}})
    result = await Pipeline(LLMEngine(model), retriever).answer(
        "Crocodile or alligator: how to tell?", "typed", NFQType.COMPARISON
    )
    prompt = model.calls[-1].user
    assert "crocodile snout; alligator snout" in prompt and "difference" in prompt and result.strategy == "comparison"
    assert any(s.passage_id.startswith("croc#") for s in result.sources) and any(
        s.passage_id.startswith("gator#") for s in result.sources
    )

    plan = {
        "topic": "nuclear power",
        "perspectives": [
            {"name": "advocates", "sub_query": "nuclear low carbon reliable"},
            {"name": "opponents", "sub_query": "nuclear accidents waste costs"},
        ],
    }

    def answer(call):
        if "Topic:" in call.user:
            return "Balanced view [1]."
        number = re.search(r"^\[(\d+)\] ", call.user, re.M).group(1)
        return f"Case for {'advocates' if 'advocates' in call.user else 'opponents' if 'opponents' in call.user else 'the question'} [{number}]."

    model = scripted({"DebatePlan": plan}, answer)
    result = await Pipeline(LLMEngine(model), topical).answer("Is nuclear power good?", "typed", NFQType.DEBATE)
    mediation = model.calls[-1].user
    assert (
        "Topic: nuclear power" in mediation and "Case for advocates" in mediation and "Case for opponents" in mediation
    )
    assert result.llm_calls[-1].role == "mediate:debate" and [a.label for a in result.aspects] == [
        "overview",
        "advocates",
        "opponents",
    ]


async def test_an_unrepairable_plan_falls_back_to_plain_rag_and_says_why(retriever):
    model = scripted({"DebatePlan": "no idea"})
    result = await Pipeline(LLMEngine(model), retriever).answer("Is nuclear power good?", "typed", NFQType.DEBATE)
    assert result.strategy == "rag" and result.plan is None
    assert result.fallbacks[0].step == "debate" and "PlanFailed" in result.fallbacks[0].reason
    assert plan_call_of(result).structured == "failed" and result.answer.startswith("Stub answer")


async def test_a_typed_answer_that_falls_back_keeps_the_aspects_it_wrote_unused(topical):
    """The aggregator fails: plain RAG answers from its own passages, the plan and aspects stay in the trace."""

    def answer(call):
        if "Partial answers" in call.user:
            raise LLMError("the aggregator is down")
        return default_content(call.as_request())

    pipeline = Pipeline(LLMEngine(scripted(answer=answer)), topical)
    result = await pipeline.answer("Why did Rome fall?", "typed", NFQType.REASON)
    assert result.strategy == "rag" and not result.plan_used and result.plan is not None
    [fell] = [f for f in result.fallbacks if not f.step.startswith("aspect:")]
    assert fell.step == "reason" and "the aggregator is down" in fell.reason
    assert result.aspects[0].label == "overview" and result.aspects[0].answer.startswith("Stub answer")
    assert all(not a.used and a.source_numbers == [] for a in result.aspects)
    assert (
        result.sources == (await pipeline.answer("Why did Rome fall?", "rag")).sources
    )  # a fresh run's own, numbered afresh


async def test_the_baselines(retriever):
    model = scripted()
    pipeline = Pipeline(LLMEngine(model), retriever, settings=UNEXPANDED)  # the calls are counted
    llm = await pipeline.answer("Why is the sky blue?", "llm")
    rag = await pipeline.answer("How does photosynthesis work?", "rag")
    assert (
        llm.sources == [] and llm.strategy == "llm" and llm.usage.calls == 1 and "Sources:" not in model.calls[0].user
    )
    assert rag.sources and rag.sources[0].passage_id.startswith("photo#")
    assert "\n[1] Photosynthesis: " in model.calls[1].user  # one numbered line per source


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
    model = scripted({"SubQueryPlan": {"sub_queries": ["economic troubles taxation", "bread dough yeast"]}})
    result = await Pipeline(LLMEngine(model), SlowFirstRetriever(retriever)).answer("Why?", "typed", NFQType.REASON)
    first = result.aspects[0]
    assert first.source_numbers == list(range(1, len(first.source_numbers) + 1))


# --- through HTTP: what only the wire shows ------------------------------------------------------------


def pipeline_for(server, retriever) -> Pipeline:
    """Without query expansion (tests/test_llm_path.py has it): these tests read the plans' requests."""
    model = OpenAIChatModel(model="stub", base_url=server.base_url, timeout=10, max_retries=0)
    return Pipeline(LLMEngine(model), retriever, settings=UNEXPANDED)


@pytest.mark.parametrize(
    ("nfq_type", "schema", "question"),
    [
        (NFQType.COMPARISON, "ComparisonPlan", "What is the difference between a crocodile and an alligator?"),
        (NFQType.EXPERIENCE, "ExperiencePlan", "Any advice for a beginner learning guitar?"),
        (NFQType.REASON, "SubQueryPlan", "Why did the Western Roman Empire fall?"),
        (NFQType.INSTRUCTION, "SubQueryPlan", "How do I bake bread at home?"),
        (NFQType.DEBATE, "DebatePlan,Weighing", "Should countries build more nuclear power plants?"),
    ],
)
async def test_each_type_requests_its_plan_schema_and_answers(stub, retriever, nfq_type, schema, question):
    server = stub()
    result = await pipeline_for(server, retriever).answer(question, "typed", nfq_type)
    # the type's plan is its one structured request (the overview, begun beside it, may reach the server first),
    # but for a debate's weighing of its perspectives before they are mediated
    assert [r.schema_name for r in server.requests if r.schema_name] == schema.split(",")
    assert result.strategy == nfq_type.value.lower()
    assert [f for f in result.fallbacks if not f.step.startswith("aspect:")] == []
    assert result.plan is not None and result.answer.startswith("Stub answer")
    assert result.citations and all(c.passage_ids for c in result.citations)
    assert result.engines.generator.startswith("openai-compatible:stub@127.0.0.1")


async def test_a_malformed_plan_is_repaired_over_the_wire(stub, retriever):
    replies = iter(
        [
            "The items are crocodile and alligator.",
            json.dumps({"purpose": "difference", "items": ["crocodile", "alligator"]}),
        ]
    )
    server = stub(
        lambda request: (
            Reply(content=next(replies))
            if request.schema_name == "ComparisonPlan"
            else Reply(content=default_content(request))
        )
    )
    result = await pipeline_for(server, retriever).answer("Crocodile vs alligator?", "typed", NFQType.COMPARISON)
    assert result.strategy == "comparison" and plan_call_of(result).structured == "repaired"
    assert [f for f in result.fallbacks if not f.step.startswith("aspect:")] == []


async def test_the_overview_is_asked_beside_the_plan_and_the_aspects_all_at_once(stub, topical):
    plan = {"sub_queries": ["tax", "invasions", "civil wars", "inflation", "division of the empire"]}
    waiting_on_arrival = []  # requests at the server, this one included, as each arrived

    def responder(request):
        waiting_on_arrival.append((request.schema_name, server.waiting))
        if request.schema_name == "SubQueryPlan":
            return Reply(content=json.dumps(plan))
        return Reply(content=default_content(request))

    server = stub(responder, delay=0.4)
    result = await pipeline_for(server, topical).answer("Why did Rome fall?", "typed", NFQType.REASON)
    assert len(result.aspects) == 6 and all(a.error is None for a in result.aspects)  # the overview and five planned
    assert result.usage.calls == 8
    # The overview (plain RAG's step) was asked while the model planned, then the five planned aspects were
    # all in flight together; which of the first two reaches the server first is a race, that both were
    # in flight together is not.
    first_two = waiting_on_arrival[:2]
    assert sorted(name or "" for name, _ in first_two) == ["", "SubQueryPlan"] and first_two[1][1] == 2, (
        waiting_on_arrival
    )
    overview = next(r for r in server.requests[:2] if r.schema_name is None)
    assert "Answer in at most five sentences" in overview.last_user  # plain RAG's own prompt
    assert server.most_waiting == 5, server.most_waiting


# --- offline: every type end to end -----------------------------------------------------------------------

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
    # additions by role are off (OfflineSettings.role_additions), and each is recorded as such; nothing else falls back
    expected = ("the reader found", "role_additions")
    assert [
        f for f in result.fallbacks if not f.step.startswith("aspect:") and not any(e in f.reason for e in expected)
    ] == [], result.fallbacks
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
    restricted = Pipeline(
        OfflineEngine(), retriever, load_default_classifier(), settings=PipelineSettings(assume_non_factoid=True)
    )
    result = await restricted.answer(question)
    assert result.type.type in {t.value for t in NFQType} - {"FACTOID", "NOT-A-QUESTION"}
    assert result.type.source.endswith("(non-factoid only)")
    assert abs(sum(result.type.probabilities.values()) - 1) < 1e-6
    # Routed to its type, never to plain RAG for low confidence (the strategy itself may still fall back,
    # recorded, when the index has nothing on Hamlet).
    assert not [f for f in result.fallbacks if f.step == "route"]
    assert result.strategy == result.type.type.lower() or result.fallbacks[-1].step == result.type.type.lower()


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
    result = await Pipeline(OfflineEngine(), topical).answer(
        "What do people think of nuclear power?", "typed", "debate"
    )
    assert result.strategy == "debate" and "Views on What" not in result.answer
    # Issue 24: "Views differ." opens the answer only when a view on each side was found.
    sides = {line.split(":")[0] for line in result.answer.splitlines() if line.startswith("- ")}
    assert result.answer.startswith("Views differ.") == (sides == {"- For", "- Against"}), result.answer


def test_a_route_that_is_not_a_flow_is_refused_when_the_pipeline_is_built(retriever):
    class Old:
        name = "old"

        async def run(self, question, ctx):  # the interface before strategies were flows
            return None

    with pytest.raises(TypeError, match=r"route 'OLD': a strategy is a `name` and a `flow\(question, depths\)`"):
        Pipeline(OfflineEngine(), retriever, routes={"OLD": Old()})


def test_the_architecture_docs_example_runs_as_printed(capsys):
    """docs/architecture.md's new strategy, routed offline, and its test by sending results into its flow."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    exec("\n".join(re.findall(r"```python\n(.*?)```", doc, re.S)), {"__name__": "architecture_example"})
    assert capsys.readouterr().out.startswith(
        "haiku {'images': ['autumn', 'leaves', 'pond']} Autumn leaves fall slowly over the quiet pond. [1]"
    )
