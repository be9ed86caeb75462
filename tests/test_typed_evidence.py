"""How typed strategies gather evidence (issue 12): never less than plain RAG, the subject over cue words,
aspects that add something new, visible caps, and citations without layout."""

from __future__ import annotations

import asyncio


from typedrag import ListRetriever, OfflineEngine, Pipeline
from typedrag.engines.offline import OfflineSettings
from typedrag.pipeline import PipelineSettings
from typedrag.engines.llm_engine import LLMEngine
from typedrag.records import Passage
from typedrag.result import Source, extract_citations
from typedrag.strategies.decomposed import repeats
from typedrag.reader import Reading, Role
from typedrag.testing import ScriptedChatModel, ScriptedReader

TITANIC = [
    "RMS Titanic sank in the North Atlantic in April 1912 after she struck an iceberg on her maiden voyage.",
    "A sink is a bowl-shaped plumbing fixture for washing hands and dishes; its causes of blockage include grease.",
    "The Titanic carried lifeboats for only about half of those on board, which made the disaster far deadlier.",
    "Titanic's hull plates and rivets became brittle in the icy water, and the collision opened six compartments.",
    "Warnings of ice from other ships went unheeded, and the Titanic kept close to full speed through the ice field.",
    "In Greek mythology the Titans were the elder gods who ruled before the Olympians; their background is ancient.",
    "Consequences of the sinking included the International Convention for the Safety of Life at Sea in 1914.",
]


def run(coroutine):
    return asyncio.run(coroutine)


def article(title: str, text: str) -> Passage:
    """A one-passage article, as the demo corpus holds most."""
    return Passage(f"{title}#0", title, title, text)


# The aspects' evidence is under test here, not how sure the reader must be to add a sentence: an aspect adds the
# sentence the reader reads as answering at its own bar (the shipped `aspect_bar`, 0.50, leaves these short passages'
# causes out), whatever its role (the retrained reader of issue 55 reads none of them as a cause).
EVIDENCE = OfflineSettings(added_bar=0.0, aspect_bar=0.0, aspect_sentences=1)


def evidence_engine() -> OfflineEngine:
    """The offline engine with a reader that reads every sentence naming the Titanic as answering (the retrained
    reader of issue 55 reads these short causes at 0.10-0.16, under its bar of 0.22): the evidence is under test."""
    return OfflineEngine(
        ScriptedReader(
            lambda q, title, s: Reading(0.6, 0.8, Role.CAUSE) if "Titanic" in s else Reading(0.01, 0.05, Role.NONE)
        ),
        settings=EVIDENCE,
    )


def test_cue_words_do_not_pull_in_passages_off_the_question():
    result = run(
        Pipeline(evidence_engine(), ListRetriever(TITANIC)).answer("Why did the Titanic sink?", "typed", "reason")
    )
    assert result.strategy == "reason"
    by_number = {s.number: s.text for s in result.sources}
    planned = [a for a in result.aspects if a.label != "overview"]
    assert any(a.error is None for a in planned)
    for aspect in planned:  # "causes", "background" must not fetch plumbing or mythology for the aspects
        assert not any("plumbing" in by_number[n] or "Greek mythology" in by_number[n] for n in aspect.source_numbers)
    assert "Titanic" in result.answer and "plumbing" not in result.answer and "Titans" not in result.answer, (
        result.answer
    )


def test_typed_evidence_includes_plain_rag_evidence_and_aspects_add_their_own():
    pipeline = Pipeline(evidence_engine(), ListRetriever(TITANIC))
    rag = run(pipeline.answer("Why did the Titanic sink?", "rag"))
    typed = run(pipeline.answer("Why did the Titanic sink?", "typed", "reason"))
    rag_ids = {s.passage_id for s in rag.sources}
    typed_ids = {s.passage_id for s in typed.sources}
    assert rag_ids <= typed_ids  # never less evidence than plain RAG
    overview, *planned = typed.aspects
    assert overview.label == "overview"
    live = [a for a in planned if a.error is None]
    assert live, typed.fallbacks
    sets = [set(a.source_numbers) for a in [overview, *live]]
    assert all(not (a & b) for i, a in enumerate(sets) for b in sets[i + 1 :])  # no passage serves two aspects
    assert not any(repeats(a.answer, b.answer) for i, a in enumerate(live) for b in live[i + 1 :])


def test_aspects_without_passages_of_their_own_are_dropped_and_recorded():
    texts = ["Photosynthesis turns light, water and carbon dioxide into sugar and oxygen in chloroplasts."]
    result = run(Pipeline(OfflineEngine(), ListRetriever(texts)).answer("Why do plants need light?", "typed", "reason"))
    dropped = [f for f in result.fallbacks if f.step.startswith("aspect:")]
    assert dropped and all("dropped" in f.reason for f in dropped)
    assert result.strategy == "reason" and result.answer.strip()


def test_more_than_five_planned_items_are_cut_visibly():
    # Regression (issue 12): items beyond the fifth were dropped silently.
    items = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
    plan = '{"purpose": "difference", "items": %s}' % str(items).replace("'", '"')
    model = ScriptedChatModel(lambda call: plan if call.schema else "They differ [1].")
    texts = [f"{name} is a letter of the Greek alphabet." for name in items]
    result = run(
        Pipeline(LLMEngine(model), ListRetriever(texts)).answer("How do these letters differ?", "typed", "comparison")
    )
    assert result.strategy == "comparison" and [a.label for a in result.aspects] == items[:5]
    note = [f for f in result.fallbacks if f.step == "plan:comparison"]
    assert note and "dropped: zeta, eta" in note[0].reason


def test_citation_text_leaves_out_bullets_labels_and_step_numbers():
    # Regression (issue 12): offline citations began with "- comet: ".
    source = Source(number=1, passage_id="p#0", title="t", text="x", score=1.0)
    answer = "Comparing comet, asteroid:\n- comet: A comet is icy. [1]\n2. Mix the flour. [1]"
    assert [c.text for c in extract_citations(answer, [source])] == ["A comet is icy.", "Mix the flour."]


def test_every_typed_answer_holds_plain_rags_answer_whole():
    """Issue 24: never worse than plain RAG, by construction: the overview (or a comparison's and an
    experience answer's lead) is plain RAG's own step over plain RAG's passages, quoted whole (without the
    relevance bar: two of these questions are not answered by the passages, and plain RAG would abstain)."""
    pipeline = Pipeline(OfflineEngine(), ListRetriever(TITANIC), settings=PipelineSettings(abstain_offline=False))
    questions = {
        "reason": "Why did the Titanic sink?",
        "instruction": "How did the Titanic sink?",
        "debate": "Should the Titanic have carried more lifeboats?",
        "comparison": "What is the difference between the Titanic and a sink?",
        "experience": "Any tips for reading about the Titanic sinking?",
    }
    for kind, question in questions.items():
        rag_sentences = {c.text for c in run(pipeline.answer(question, "rag")).citations}
        typed = run(pipeline.answer(question, "typed", kind))
        assert typed.strategy == kind, typed.fallbacks
        assert rag_sentences <= {c.text for c in typed.citations}, (kind, typed.answer)
    rag = run(pipeline.answer("Why did the Titanic sink?", "rag"))
    overview = run(pipeline.answer("Why did the Titanic sink?", "typed", "reason")).aspects[0]
    assert overview.label == "overview" and overview.answer == rag.answer


def test_a_sentence_from_the_article_the_question_names_outranks_one_that_only_shares_its_words():
    """Regression: "What caused the Black Death?" quoted gangrene ("tissue death caused by ...") and homicide
    ("causes the death of another person") and left out the Black Death article's own cause, the fleas."""
    passages = [
        article("Gangrene", "Gangrene is a type of tissue death caused by a lack of blood supply."),
        article("Homicide", "Homicide is an act in which a person causes the death of another person."),
        article("Death", "Death is the end of life; its causes range from disease to old age and accidents."),
        article(
            "Black Death",
            "The Black Death was a plague pandemic in Europe from 1346 to 1353. "
            "The bacterium Yersinia pestis spread among rats and people through the bites of infected fleas.",
        ),
    ]
    pipeline = Pipeline(OfflineEngine(), ListRetriever(passages))
    for method in ("rag", "typed"):
        result = run(pipeline.answer("What caused the Black Death?", method, "reason"))
        assert "fleas" in result.answer, (method, result.answer)


def test_an_offline_comparison_quotes_only_sentences_about_its_items():
    """Regression: over an index with no article on capitalism, "Capitalism vs socialism: what's the core
    difference?" put capital cities under "Capitalism" and the Earth's outer core ("core") under "Difference"."""
    passages = [
        article(
            "Capital city", "A capital city is typically a city that holds the government's offices and meeting places."
        ),
        article(
            "Earth's outer core",
            "The outer core differs from the inner core: it is liquid, whereas the inner core is solid.",
        ),
        article(
            "Socialism",
            "Socialism is a political philosophy that favours social ownership of the means of production. "
            "Socialist economies plan production to meet needs.",
        ),
    ]
    pipeline = Pipeline(OfflineEngine(settings=OfflineSettings(role_additions=True)), ListRetriever(passages))
    result = run(pipeline.answer("Capitalism vs socialism: what's the core difference?", "typed", "comparison"))
    points = "\n".join(line for line in result.answer.splitlines() if line.startswith("- "))  # the items' own points
    assert "social ownership" in result.answer, result.answer
    assert "capital city" not in points and "outer core" not in points, result.answer
    assert "- Capitalism:" not in points, result.answer  # nothing about it: no point under its name


def test_a_list_item_is_quoted_as_a_sentence_without_its_bullet():
    """Regression (issue 24): "- removing a package: - dpkg removes all of the package's files ..." quoted a
    list item with the bullet its HTML page was read into. The HTML reader now keeps items as items."""
    from typedrag.corpus.chunker import chunk_document
    from typedrag.corpus.formats.html import parse_html
    from typedrag.records import Document

    html = (
        "<html><head><title>dpkg</title></head><body><p>Removing a package with dpkg happens in two phases.</p><ul>"
        "<li>dpkg removes all of the package's files, with the exception of the configuration files.</li>"
        "<li>Purging a package also deletes the configuration files that removal keeps.</li></ul></body></html>"
    )
    parsed = parse_html(html, "dpkg")
    pipeline = Pipeline(
        OfflineEngine(), ListRetriever(chunk_document(Document("dpkg.html", parsed.title, blocks=parsed.blocks)))
    )
    answer = run(pipeline.answer("What does dpkg do when it removes a package?", "rag")).answer
    assert "dpkg removes all of the package's files" in answer, answer
    assert "- " not in answer and not answer.startswith("-"), answer


def test_a_sentence_on_the_questions_subject_outranks_a_namesake_article():
    """Regression: "How do I train for a marathon?" names the article "Train" too, and quoted the gauge of
    railway trains."""
    passages = [
        article(
            "Marathon",
            "The marathon can be completed by running or with a run/walk strategy. Runners build up their weekly mileage over several months before a marathon.",
        ),
        article("Train", "Trains are designed to a certain gauge, or distance between rails."),
    ]
    answer = run(
        Pipeline(OfflineEngine(), ListRetriever(passages)).answer("How do I train for a marathon?", "rag")
    ).answer
    assert "mileage" in answer and "gauge" not in answer, answer


def test_the_sentence_that_answers_is_quoted_whatever_article_the_question_names():
    """Regression: "Why do bees sting even though it will kill them?" names the article "Bee", whose
    preference pushed out the one sentence that answers it, from another article."""
    passages = [
        article("Bee", "In Indonesia bee larvae are eaten with rice, wrapped in banana leaves and steamed."),
        article(
            "Africanized bee", "Species of bees who die after stinging inflict pain on themselves to protect the hive."
        ),
    ]
    answer = run(
        Pipeline(OfflineEngine(), ListRetriever(passages)).answer(
            "Why do bees sting even though it will kill them?", "rag"
        )
    ).answer
    assert "protect the hive" in answer and "banana" not in answer, answer
