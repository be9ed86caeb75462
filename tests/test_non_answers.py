"""Issue 42: a model's reply that only says its sources do not answer is an abstention, never a cited answer,
whatever form it takes; and an offline answer counts no model call it never made."""

from __future__ import annotations

import pytest

from typedrag import ListRetriever, OfflineEngine, Pipeline
from typedrag.abstain import said_not_in_sources
from typedrag.attribution import settle
from typedrag.engines.llm_engine import LLMEngine
from typedrag.result import Source
from typedrag.testing import ScriptedChatModel

COMETS = [
    "Comets glow because sunlight heats their ice, which releases gas and dust that scatter light and fluoresce.",
    "A comet's tail always points away from the Sun, pushed by the solar wind and radiation pressure.",
]
QUESTION = "Why do comets glow?"


def answering(reply: str) -> Pipeline:
    return Pipeline(LLMEngine(ScriptedChatModel(lambda call: reply)), ListRetriever(COMETS))


@pytest.mark.parametrize(
    "reply",
    [
        "The sources do not say why comets glow.",
        '{"not_in_sources": null}',
        '{"not_in_sources": ""}',
        "I cannot answer this from the provided sources.",
        "The provided passages don't mention why comets glow. None of the sources explain it.",
    ],
)
async def test_a_reply_that_only_says_the_sources_do_not_answer_is_an_abstention_with_no_citation(reply):
    events: list = []
    result = await answering(reply).answer(QUESTION, "rag", on_event=lambda name, data: events.append((name, data)))
    assert result.abstained and result.citations == [] and result.abstention.by == "scripted"
    assert result.answer.startswith("The documents do not answer this.") and "not_in_sources" not in result.answer
    assert result.sources  # kept: the nearest passages
    names = [name for name, _ in events]
    # a client that heard the reply as it came is told to start over before it hears the abstention
    assert names.index("abstained") < names.index("token", names.index("abstained"))
    if names.index("token") < names.index("abstained"):
        assert "restart" in names[names.index("token") : names.index("abstained") + 2]


@pytest.mark.parametrize(
    "reply",
    [
        "The sources do not name the band; they only say she carried twenty lifeboats [2].",
        "Comets glow because sunlight heats their ice [1]. The sources do not say how bright they get.",
        "Nuclear power is not among the cheapest energy sources.",
    ],
)
def test_a_reply_that_answers_is_no_signal_even_where_it_says_a_source_lacks_something(reply):
    assert said_not_in_sources(reply) is None


def test_a_sentence_that_says_the_sources_lack_something_is_never_attributed_a_citation():
    sources = [Source(number=n, passage_id=f"c#{n}", title="Comet", text=text, score=1.0) for n, text in enumerate(COMETS, 1)]
    settled = settle("Comets release gas and dust that scatter sunlight. The sources do not say why comets glow in colour.", sources)
    assert settled.text.startswith("Comets release gas and dust that scatter sunlight. [1]")
    assert settled.text.endswith("The sources do not say why comets glow in colour.")


async def test_an_offline_answer_counts_no_model_call_and_shows_its_steps():
    result = await Pipeline(OfflineEngine(), ListRetriever(COMETS)).answer(QUESTION, "typed", "reason")
    assert result.llm_calls == [] and result.usage.calls == 0 and result.usage.requests == 0
    assert [step.role for step in result.steps if step.step == "plan"] == ["plan:reason"]
    assert result.steps[-1].role == "aggregate:reason" and all(s.engine == "offline-extractive" for s in result.steps)
