"""The driver, the one place steps are performed: concurrency and cancellation, fallbacks as fresh runs, the
abstention policy, instructions, streaming, citations of partial answers, and spans named by step type.
Engines here are in-process fakes: what is tested is what the driver does with what they return."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from typedrag.abstain import READER_BAR, Policy
from typedrag.driver import Driver, Run, Services
from typedrag.engines.base import AspectAnswer, Combined, Facet, Grounded, Part, PlanTask, Trace, Written
from typedrag.errors import AspectsFailed, LLMError
from typedrag.prompts import Prompt
from typedrag.rerank import EmbeddingReranker
from typedrag.steps import Depths, Note, Number, Plan, Planned, Search, StrategyOutput, Together, Write
from typedrag.strategies import EvidenceStrategy
from typedrag.strategies.decomposed import SubQueryPlan
from typedrag.testing import ListRetriever

from otel_fixtures import by_name, no_provider, spans  # noqa: F401

PROMPT = Prompt("test", "system", "Sources:\n{sources}\nQuestion: {question}")
PLAN = PlanTask("plan:test", PROMPT, SubQueryPlan)
TEXTS = [
    "The Titanic sank in 1912 after it struck an iceberg in the North Atlantic.",
    "Too few lifeboats meant most passengers could not escape the sinking ship.",
]
GUARD = 60  # seconds: a flow that waits forever fails the test instead of hanging it; no measure of speed


@dataclass
class Engine:
    """An engine that writes what `texts` says for each role (or raises it), and records what it was asked."""

    generative: bool = True
    name: str = "fake"
    texts: dict[str, object] = field(default_factory=dict)
    asked: list = field(default_factory=list)
    plan_error: Exception | None = None
    gate: asyncio.Event | None = None  # writes wait for it
    cancelled: list = field(default_factory=list)

    async def plan(self, task, question, trace):
        if self.plan_error is not None:
            raise self.plan_error
        return SubQueryPlan(sub_queries=["iceberg", "lifeboats"])

    def quotes_from(self, task):
        return task.sources

    async def write(self, task, trace, on_text=None):
        self.asked.append(task)
        try:
            if self.gate is not None:
                await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled.append(task.role)
            raise
        reply = self.texts.get(task.role, Written(f"Answer to {task.question} [1]."))
        if isinstance(reply, Exception):
            raise reply
        if on_text is not None:
            for piece in reply.text.split(" "):
                on_text(piece + " ")
        return reply


def driver(engine=None, policy=None, events=None, instructions="") -> Driver:
    services = Services(engine or Engine(), ListRetriever(TEXTS), EmbeddingReranker())
    listener = (lambda name, data: events.append((name, data))) if events is not None else None
    return Driver(services, Trace(), policy=policy, instructions=instructions, on_event=listener)


def grounded(role: str, sources) -> Grounded:
    return Grounded(role=role, prompt=PROMPT, question="Why did the Titanic sink?", sources=sources)


def asked_and_numbered(role="answer:test", final=True):
    """A flow: search the question, number its passages, write."""
    [hits] = yield Search(["Why did the Titanic sink?"], 2)
    sources = yield Number(hits)
    written = yield Write(grounded(role, sources), final=final)
    return written


async def guarded(coroutine):
    return await asyncio.wait_for(coroutine, GUARD)


async def test_together_runs_its_flows_at_once_and_gives_their_outcomes_in_order():
    both = asyncio.Barrier(2)

    class Waiting(Engine):
        async def write(self, task, trace, on_text=None):
            await both.wait()  # only passes when the other write is in flight too
            return Written(task.role)

    def flow():
        first, second = yield Together(asked_and_numbered("one", final=False), asked_and_numbered("two", final=False))
        return first.text, second.text

    assert await guarded(driver(Waiting()).follow(flow(), Run())) == ("one", "two")


async def test_the_trace_lists_what_flows_run_together_recorded_in_their_order_not_in_the_order_they_ended():
    second_done = asyncio.Event()

    class SecondFirst(Engine):
        async def write(self, task, trace, on_text=None):
            if task.role == "first":
                await second_done.wait()
            else:
                second_done.set()
            return Written(task.role, notes=(f"{task.role} left something out",))

    def noted(role):
        [hits] = yield Search(["Why did the Titanic sink?"], 2)
        sources = yield Number(hits)
        yield Write(grounded(role, sources))
        yield Note(f"aspect:{role}", "dropped, for the test")

    the_driver = driver(SecondFirst())
    await guarded(the_driver.follow((lambda: (yield Together(noted("first"), noted("second"))))(), Run()))
    assert [(f.step, f.reason) for f in the_driver.trace.fallbacks] == [
        ("first", "first left something out"),
        ("aspect:first", "dropped, for the test"),
        ("second", "second left something out"),
        ("aspect:second", "dropped, for the test"),
    ]
    assert [s.role for s in the_driver.trace.steps] == ["first", "second"]


async def test_when_one_flow_of_together_fails_the_others_are_cancelled_and_nothing_is_left_running():
    """The overview begun beside the plan: a plan that fails stops it, and no answer of it is taken."""
    engine = Engine(plan_error=LLMError("the plan failed"), gate=asyncio.Event())

    def planning():
        while not engine.asked:  # until the overview's request is on its way (a search gives it a turn)
            yield Search(["x"], 1)
        yield Plan(PLAN, "Why did the Titanic sink?")

    def flow():
        yield Together(asked_and_numbered("overview:test", final=False), planning())

    the_driver = driver(engine)
    with pytest.raises(LLMError, match="the plan failed"):
        await guarded(the_driver.follow(flow(), Run()))
    assert engine.cancelled == ["overview:test"]  # stopped in flight, not waited for
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    assert the_driver.trace.calls == [] and the_driver.trace.fallbacks == []
    assert [(s.role, s.error.split(":")[0]) for s in the_driver.trace.steps] == [
        ("overview:test", "cancelled"),
        ("plan:test", "LLMError"),
    ]


class Typed:
    """A typed strategy that numbers passages, tells its plan, then fails."""

    name = "typed"

    def flow(self, question, depths):
        hits, _ = yield Search([question, "lifeboats"], 2)
        yield Number(hits[::-1])
        plan = yield Plan(PLAN, question)
        yield Planned(plan, [])
        yield Note("aspect:iceberg", "dropped, for the test")
        raise AspectsFailed("all 1 aspects dropped")


async def test_a_failing_run_is_recorded_and_plain_rag_answers_in_a_fresh_run():
    events: list = []
    the_driver = driver(events=events)
    drove = await the_driver.drive(Typed(), "Why did the Titanic sink?", Depths(top_k=2), EvidenceStrategy("rag"))
    assert (
        drove.strategy == "rag"
        and not drove.plan_used
        and drove.plan == SubQueryPlan(sub_queries=["iceberg", "lifeboats"])
    )
    assert [f.step for f in the_driver.trace.fallbacks] == ["aspect:iceberg", "typed"]
    assert the_driver.trace.fallbacks[1].reason == "AspectsFailed: all 1 aspects dropped; answered with plain RAG"
    # the fallback's sources as plain RAG numbers them alone, not in the failed run's (reversed) order
    alone = await driver().drive(EvidenceStrategy("rag"), "Why did the Titanic sink?", Depths(top_k=2))
    assert drove.sources == alone.sources and [s.number for s in drove.sources] == [1, 2]
    assert [name for name, _ in events if name in ("plan", "restart")] == ["plan"]  # nothing streamed before it failed


async def test_a_run_that_streamed_before_failing_tells_the_client_to_start_over():
    class StreamsThenFails:
        name = "typed"

        def flow(self, question, depths):
            yield from asked_and_numbered()
            raise AspectsFailed("after the answer")

    events: list = []
    the_driver = driver(events=events)
    drove = await the_driver.drive(
        StreamsThenFails(), "Why did the Titanic sink?", Depths(top_k=2), EvidenceStrategy("rag")
    )
    names = [name for name, _ in events]
    assert "token" in names[: names.index("restart")] and "token" in names[names.index("restart") :]
    assert [(f.step, f.reason) for f in the_driver.trace.fallbacks] == [
        ("typed", "AspectsFailed: after the answer; answered with plain RAG")
    ]
    assert drove.streamed == len(drove.answer) + 1  # the fallback's own text (pieces end with a space)


async def test_without_a_fallback_a_failing_run_fails():
    with pytest.raises(AspectsFailed):
        await driver().drive(Typed(), "Why did the Titanic sink?", Depths(top_k=2))


async def test_every_writing_step_is_given_the_readers_instructions():
    engine = Engine()

    def flow():
        yield Together(asked_and_numbered("a", final=False), asked_and_numbered("b"))

    await driver(engine, instructions="Answer in French.").follow(flow(), Run())
    assert sorted(task.role for task in engine.asked) == ["a", "b"] and all(
        t.instructions == "Answer in French." for t in engine.asked
    )


async def test_below_the_relevance_bar_a_final_step_abstains_and_another_is_declined_both_unwritten():
    engine = Engine(generative=False)
    policy = Policy("Why did the Titanic sink?", relevance_bar=0.99, reader_bar=None)
    drove = await driver(engine, policy).drive(EvidenceStrategy("rag"), "Why did the Titanic sink?", Depths(top_k=2))
    assert (
        engine.asked == []
        and drove.answer == ""
        and drove.abstention.by == "relevance bar"
        and drove.abstention.bar == 0.99
    )
    assert drove.abstention.reason == "no sentence of the passages comes close enough to the question to answer it"
    assert len(drove.sources) == 2  # kept: the nearest passages

    written = await driver(engine, policy).follow(asked_and_numbered(final=False), Run())
    assert written.declined.startswith("its passages do not answer it (relevance ") and written.declined.endswith(
        " below 0.89)"
    )


async def test_a_models_not_in_sources_reply_is_an_abstention_for_the_answer_and_a_reason_to_drop_for_a_part():
    engine = Engine(texts={"answer:test": Written("", supported=False, not_in_sources="why it sank")})
    run = Run()
    written = await driver(engine, Policy("Why?")).follow(asked_and_numbered(), run)
    assert (
        written.text == ""
        and run.abstention.by == "fake"
        and run.abstention.reason == "the model said its sources do not answer: why it sank"
    )
    part = await driver(engine, Policy("Why?")).follow(asked_and_numbered(final=False), Run())
    assert part.declined == "its passages do not answer it: why it sank"


def offline(best: float, notes=()) -> Engine:
    return Engine(
        generative=False, texts={"answer:test": Written("The Titanic struck an iceberg. [1]", best=best, notes=notes)}
    )


async def test_offline_the_reader_bar_withholds_an_answer_before_a_client_hears_it_and_its_notes_with_it():
    events: list = []
    the_driver = driver(
        offline(READER_BAR - 0.01, ("left out: no cause",)), Policy("Why?", reader_bar=READER_BAR), events
    )
    run = Run()
    await the_driver.follow(asked_and_numbered(), run)
    assert run.abstention.by == "reader" and run.abstention.score == round(READER_BAR - 0.01, 4)
    assert [name for name, _ in events] == [] and run.streamed == 0 and the_driver.trace.fallbacks == []

    events.clear()
    passed = driver(offline(READER_BAR, ("left out: no cause",)), Policy("Why?", reader_bar=READER_BAR), events)
    run = Run()
    await passed.follow(asked_and_numbered(), run)
    assert (
        run.abstention is None
        and "".join(d["text"] for n, d in events if n == "token").strip() == "The Titanic struck an iceberg. [1]"
    )
    assert [n for n, _ in events if n == "citation"] == ["citation"]
    assert [(f.step, f.reason) for f in passed.trace.fallbacks] == [("answer:test", "left out: no cause")]


async def test_a_models_partial_answer_keeps_only_markers_of_its_passages_and_is_declined_when_none_supports_it():
    engine = Engine(
        texts={
            "aspect:one": Written("The Titanic struck an iceberg in 1912 [1] [7]."),
            "aspect:two": Written("Bananas are rich in potassium and grow in the tropics."),
        }
    )
    the_driver = driver(engine)

    def flow(role):
        [hits] = yield Search(["Why did the Titanic sink?"], 2)
        sources = yield Number(hits)
        task = AspectAnswer(
            role=role,
            prompt=PROMPT,
            question="Why did the Titanic sink?",
            focus=role,
            facet=Facet.CAUSES,
            sources=sources,
        )
        return (yield Write(task, aspect=role.split(":")[1]))

    kept = await the_driver.follow(flow("aspect:one"), Run())
    assert kept.text == "The Titanic struck an iceberg in 1912 [1]." and kept.declined is None
    unsupported = await the_driver.follow(flow("aspect:two"), Run())
    assert unsupported.declined == "no sentence of its answer is supported by its passages"
    assert [f.step for f in the_driver.trace.fallbacks] == [
        "aspect:one"
    ] and "removed 1 citation markers" in the_driver.trace.fallbacks[0].reason


async def test_a_step_that_is_not_a_step_is_refused():
    def flow():
        yield "search for it"

    with pytest.raises(TypeError, match="not a step"):
        await driver().follow(flow(), Run())


async def test_spans_are_named_by_the_steps_type(spans):
    engine = Engine()

    def flow():
        plan = yield Plan(PLAN, "Why did the Titanic sink?")
        written = yield from asked_and_numbered(final=False)
        parts = (Part(label="overview", text=written.text, lead=True),)
        for combine in ("aggregate", "mediate"):
            yield Write(
                Combined(
                    role="whatever:role",
                    prompt=PROMPT,
                    question="Why?",
                    parts=parts,
                    facet=Facet.VIEWS,
                    combine=combine,
                ),
                final=True,
            )
        return StrategyOutput("", plan)

    await driver(engine).follow(flow(), Run())
    named = by_name(spans.get_finished_spans())
    assert set(named) == {
        "typedrag.plan",
        "typedrag.retrieve",
        "typedrag.write",
        "typedrag.aggregate",
        "typedrag.mediate",
    }
    assert named["typedrag.plan"][0].attributes["typedrag.role"] == "plan:test"


async def test_a_step_names_its_span_and_its_outcome_describes_it(spans):
    """One span per step that does work, opened by the driver around the whole step: a partial answer its
    passages turn out not to support still has its span, saying so; bookkeeping steps (numbering, notes) have none."""
    engine = Engine(texts={"aspect:test": Written("It was the weather.")})  # cites nothing its passages support

    def flow():
        [hits] = yield Search(["Why did the Titanic sink?"], 2)
        sources = yield Number(hits)
        yield Note("aspect:one", "dropped")
        task = Grounded(role="aspect:test", prompt=PROMPT, question="Why?", sources=sources)
        written = yield Write(task, aspect="one")
        return written

    await driver(engine).follow(flow(), Run())
    finished = spans.get_finished_spans()
    assert sorted(span.name for span in finished) == ["typedrag.retrieve", "typedrag.write"]
    (retrieve,) = by_name(finished)["typedrag.retrieve"]
    assert retrieve.attributes["typedrag.hits"] == (2,) and "gen_ai.retrieval.documents" not in retrieve.attributes
    (write,) = by_name(finished)["typedrag.write"]
    assert write.attributes["typedrag.declined"] is True
    assert write.attributes["typedrag.engine"] == "fake" and "typedrag.aspect" not in write.attributes


async def test_a_drive_ends_with_its_answer_cited_inside_a_cite_span(spans):
    drove = await driver(Engine()).drive(EvidenceStrategy("rag"), "Why did the Titanic sink?", Depths(top_k=2))
    assert drove.answer == "Answer to Why did the Titanic sink? [1]." and [c.passage_ids for c in drove.citations] == [
        [drove.sources[0].passage_id]
    ]
    (cite,) = by_name(spans.get_finished_spans())["typedrag.cite"]
    assert cite.attributes["typedrag.citations"] == 1 and cite.attributes["typedrag.repairs"] == 0


def test_the_gate_is_read_by_calling_it():
    """The abstention gate is two pure functions (typedrag.gate): no driver, engine or passages needed."""
    from typedrag.abstain import Policy, Support, Verdict
    from typedrag.gate import Cleared, after, before

    policy = Policy.offline("How many books can I borrow?")
    below = Support(answered=False, score=0.3, bar=0.5)
    assert isinstance(before(policy, below, numbered=True), Verdict)
    entry = Support(answered=False, score=0.3, bar=0.5, heading="How many books can I borrow at once?")
    cleared = before(policy, entry, numbered=True)
    assert cleared == Cleared(entry, "How many books can I borrow at once?")
    assert before(policy, entry, numbered=True, combined=True) == Cleared(entry, None)  # a combination files nothing
    # once written: an entry the engine read as answering stands on it; otherwise the bar it was let past holds
    assert (
        after(
            policy,
            cleared,
            Written("Up to 30 items.", filed_under="How many books"),
            engine="offline",
            final=True,
            numbered=True,
        )
        is None
    )
    assert (
        after(policy, cleared, Written("Up to 30 items.", best=0.9), engine="offline", final=True, numbered=True)
        is not None
    )
    assert after(
        Policy("Why?"), Cleared(), Written("", not_in_sources="no dates"), engine="m", final=False, numbered=True
    ).dropped.endswith("no dates")
    # a name no passage holds: the answer stands only when the reader is sure of it; where no reader reads the
    # question (another script), the name turns it down before anything is written
    named = Policy.offline("Does Proxmox back up?", ["Proxmox"])
    cleared = before(named, Support(answered=True, score=0.6, bar=0.5), numbered=True)
    assert isinstance(cleared, Cleared)
    unsure = after(
        named, cleared, Written("Backups.", best=named.named_bar - 0.01), engine="o", final=True, numbered=True
    )
    assert unsure.abstention.by == "unmentioned name" and unsure.abstention.score == round(named.named_bar - 0.01, 4)
    assert (
        after(named, cleared, Written("Backups.", best=named.named_bar), engine="o", final=True, numbered=True) is None
    )
    assert named.stood_despite_names(0.8).startswith("no passage of the documents mentions \u201cProxmox\u201d")
    unread = Policy.offline(
        "Proxmox \uc5d0\uc11c \ubc31\uc5c5\uc740 \uc5b4\ub5bb\uac8c \ud558\ub098\uc694?", ["Proxmox"]
    )
    assert before(unread, None, numbered=True).abstention.by == "unmentioned name"


async def test_a_follow_ups_searches_are_searched_wherever_its_question_is_and_fused():
    """What a follow-up read to stand alone is searched as (`drive(searches=...)`): each search's ranking, fused
    by reciprocal rank, where a flow searches its question; any other query is searched as it is."""
    from typedrag.index.fusion import fuse_searches as fuse
    from typedrag.testing import FunctionRetriever

    from typedrag.records import Passage

    iceberg, lifeboats = (Passage(f"{doc}#0", doc, doc, text) for doc, text in zip(("iceberg", "lifeboats"), TEXTS))
    asked = []
    found = {"why sink titanic": [lifeboats], "why sink": [iceberg, lifeboats]}

    def search(query, k):
        asked.append(query)
        return found.get(query, [])[:k]

    the_driver = Driver(Services(Engine(generative=False), FunctionRetriever(search), EmbeddingReranker()), Trace())

    def flow():
        hits = yield Search(["why sink", "other"], 2)
        return hits

    the_driver.searched_as = {"why sink": ("why sink titanic", "why sink")}
    [fused, other] = await the_driver.follow(flow(), Run())
    assert asked == ["why sink titanic", "why sink", "other"] and other == []
    rankings = [FunctionRetriever(search).search(q, 2) for q in ("why sink titanic", "why sink")]
    assert [h.passage_id for h in fused] == [h.passage_id for h in fuse(rankings, 2)] == ["lifeboats#0", "iceberg#0"]
    drove = await the_driver.drive(EvidenceStrategy("rag"), "why sink", Depths(top_k=2), searches=("why sink",))
    assert the_driver.searched_as == {} and drove.strategy == "rag"  # one search: the question alone


async def test_the_unknown_name_check_is_a_step_the_retriever_answers_in_its_span(spans):
    from typedrag.steps import Mentioned

    unmentioned = await driver().perform(Mentioned("Did the Titanic carry Marconi radios?"))
    assert unmentioned == ["Marconi"]
    (names,) = by_name(spans.get_finished_spans())["typedrag.names"]
    assert names.attributes["typedrag.retriever"] == "list-bm25" and names.attributes["typedrag.unmentioned_count"] == 1
    assert "typedrag.unmentioned" not in names.attributes  # the names are the question's words: text, on opt-in only
