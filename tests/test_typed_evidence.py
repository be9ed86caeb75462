"""How typed strategies gather evidence (issue 12): never less than plain RAG, the subject over cue words,
aspects that add something new, visible caps, and citations without layout."""

from __future__ import annotations

import asyncio

from typedrag import FunctionRetriever, ListRetriever, OfflineEngine, Pipeline
from typedrag.pipeline import PipelineSettings
from typedrag.engines.base import Extract, Section
from typedrag.engines.offline import Candidate
from typedrag.engines.llm_engine import LLMEngine
from typedrag.records import Passage
from typedrag.result import Source, extract_citations
from typedrag.strategies.decomposed import repeats
from typedrag.testing import ScriptedChatModel

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


def test_cue_words_do_not_pull_in_passages_off_the_question():
    result = run(Pipeline(OfflineEngine(), ListRetriever(TITANIC)).answer("Why did the Titanic sink?", "typed", "reason"))
    assert result.strategy == "reason"
    by_number = {s.number: s.text for s in result.sources}
    planned = [a for a in result.aspects if a.label != "overview"]
    assert any(a.error is None for a in planned)
    for aspect in planned:  # "causes", "background" must not fetch plumbing or mythology for the aspects
        assert not any("plumbing" in by_number[n] or "Greek mythology" in by_number[n] for n in aspect.source_numbers)
    assert "iceberg" in result.answer


def test_typed_evidence_includes_plain_rag_evidence_and_aspects_add_their_own():
    pipeline = Pipeline(OfflineEngine(), ListRetriever(TITANIC))
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
    result = run(Pipeline(LLMEngine(model), ListRetriever(texts)).answer("How do these letters differ?", "typed", "comparison"))
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
        assert rag_sentences and typed.strategy == kind, typed.fallbacks
        assert rag_sentences <= {c.text for c in typed.citations}, (kind, typed.answer)
    rag = run(pipeline.answer("Why did the Titanic sink?", "rag"))
    overview = run(pipeline.answer("Why did the Titanic sink?", "typed", "reason")).aspects[0]
    assert overview.label == "overview" and overview.answer == rag.answer


def test_a_section_with_max_words_prefers_shorter_sentences():
    from typedrag.engines.base import Extract, Section
    from typedrag.engines.offline import Candidate

    long = "The Titanic sank because the iceberg she struck at speed in the dark opened six of her forward compartments to the sea."
    short = "The Titanic sank after striking an iceberg."
    candidates = [Candidate(long, "[1]", 1, 0), Candidate(short, "[2]", 2, 1)]
    engine = OfflineEngine()
    unbounded = Section(query="Why did the Titanic sink?", sentences=2)
    assert sorted(engine.pick(Extract((unbounded,)), candidates)[0]) == [0, 1]
    bounded = Section(query="Why did the Titanic sink?", sentences=2, max_words=len(short.split()))
    assert engine.pick(Extract((bounded,)), candidates) == [[1]]
    # With no shorter sentence the long one still serves: an aspect is not dropped for its wording.
    assert engine.pick(Extract((bounded,)), candidates[:1]) == [[0]]


def test_the_overview_reads_past_plain_rags_passages_only_on_the_questions_topic():
    on_topic = [t for t in TITANIC if "Titanic" in t or "sinking" in t]
    plumbing = [f"A kitchen sink model {n} is a plumbing fixture; a sink drains through a trap." for n in range(3)]
    ranked = on_topic + plumbing  # BM25's lower ranks often share one word with the question
    pipeline = Pipeline(OfflineEngine(), FunctionRetriever(lambda query, k: ranked[:k]))
    typed = run(pipeline.answer("Why did the Titanic sink?", "typed", "reason"))
    assert typed.aspects[0].label == "overview"
    assert not any("kitchen sink" in s.text for s in typed.sources)  # neither the overview's nor an aspect's


def test_a_sentence_that_only_shares_a_rare_word_with_the_question_is_not_quoted():
    """Regression: "home" made Prague ("home to 2.3 million people") a step of "How do I make bread at home?"."""
    passages = [
        "Prague is the capital of the Czech Republic. Its metropolitan area is home to approximately 2.3 million people.",
        "Bread is a baked food made from flour and water. To make bread, knead the dough and let it rise before baking.",
    ]
    result = run(Pipeline(OfflineEngine(), ListRetriever(passages)).answer("How do I make bread at home?", "rag"))
    assert "knead" in result.answer
    assert "Prague" not in result.answer and "million people" not in result.answer


def test_a_labelled_aspect_quotes_a_sentence_of_its_shape_when_it_has_one():
    """A "causes" point states a cause, even when a sentence of another shape is closer to the question."""
    from typedrag.engines.base import Extract, Section
    from typedrag.engines.offline import Candidate
    from typedrag.engines.offline.shapes import CAUSE

    closer = "The Titanic sank in the North Atlantic in April 1912 on her maiden voyage."
    cause = "The hull failed because the iceberg opened six compartments."
    candidates = [Candidate(closer, "[1]", 1, 0), Candidate(cause, "[2]", 2, 1)]
    engine = OfflineEngine()
    favoured = Section(query="Why did the Titanic sink?", sentences=1, shape=CAUSE)
    assert engine.pick(Extract((favoured,)), candidates) == [[0]]  # a bonus alone does not outweigh the closer one
    only = Section(query="Why did the Titanic sink?", sentences=1, shape=CAUSE, shape_only=True)
    assert engine.pick(Extract((only,)), candidates) == [[1]]
    # Issue 24: with no sentence of its shape the section adds nothing, rather than the nearest sentence.
    assert engine.pick(Extract((only,)), candidates[:1]) == [[]]


def test_the_frame_of_an_offline_answer_appears_only_around_labelled_points():
    """Regression: definitions were numbered under "Steps:", and a debate with every view dropped still
    opened with "Views on this question differ." and closed on how the views are weighed."""
    from typedrag.engines.base import Extract, Section
    from typedrag.engines.offline import Candidate, layout

    candidates = [Candidate("Bread is a baked food.", "[1]", 1, 0), Candidate("First knead the dough.", "[2]", 2, 1)]
    overview, step = Section(query="q"), Section(query="q", label="method", optional=True)
    steps = Extract((overview, step), layout="numbered", header="Steps:")
    assert layout(steps, [[0], [1]], candidates) == "Bread is a baked food. [1]\nSteps:\n1. First knead the dough. [2]"
    assert layout(steps, [[0], []], candidates) == "Bread is a baked food. [1]"
    views = Extract((overview, step), layout="bullets", header="Views differ.", footer="It turns on the weighing.")
    assert layout(views, [[0], [1]], candidates) == (
        "Views differ.\nBread is a baked food. [1]\n- method: First knead the dough. [2]\nIt turns on the weighing."
    )
    assert layout(views, [[0], []], candidates) == "Bread is a baked food. [1]"
    # Issue 24: "Views differ" only when a view on each side was found.
    against = Section(query="q", label="Against", optional=True)
    sides = Extract((overview, step, against), layout="bullets", header="Views differ.", header_needs=("method", "Against"))
    assert layout(sides, [[0], [1], []], candidates) == "Bread is a baked food. [1]\n- method: First knead the dough. [2]"


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
        article("Capital city", "A capital city is typically a city that holds the government's offices and meeting places."),
        article("Earth's outer core", "The outer core differs from the inner core: it is liquid, whereas the inner core is solid."),
        article(
            "Socialism",
            "Socialism is a political philosophy that favours social ownership of the means of production. "
            "Socialist economies plan production to meet needs.",
        ),
    ]
    pipeline = Pipeline(OfflineEngine(), ListRetriever(passages))
    result = run(pipeline.answer("Capitalism vs socialism: what's the core difference?", "typed", "comparison"))
    points = "\n".join(line for line in result.answer.splitlines() if line.startswith("- "))  # the items' own points
    assert "social ownership" in result.answer, result.answer
    assert "capital city" not in points and "outer core" not in points, result.answer
    assert "- Capitalism:" not in points, result.answer  # nothing about it: no point under its name


def test_an_items_point_is_a_sentence_about_it_not_one_that_names_it_in_passing():
    """Issue 24: each item's bullet quoted sentences that merely name it ("Objects of interest include planets,
    moons, ... asteroids, and comets.", "Many meteorites are fragments from comets or asteroids"). A point is a
    sentence the item opens, or one that opens with "It" in a passage the item titles."""
    texts = [
        "Objects of interest include planets, moons, stars, nebulae, galaxies, meteoroids, asteroids, and comets.",
        "Many meteorites are fragments from comets or asteroids, whereas others are collision debris.",
        "The probe photographed two asteroids on its way to Jupiter.",
        "Asteroids orbit the Sun mostly in a belt between Mars and Jupiter.",
        "It is made of ice and dust, and grows a tail near the Sun.",
    ]
    candidates = [Candidate(text, f"[{n}]", n, n, frozenset({n})) for n, text in enumerate(texts, 1)]
    titles = {1: "Astronomy", 2: "Meteorite", 3: "Galileo (spacecraft)", 4: "Asteroid belt", 5: "Comet"}

    def point(item: str) -> list[str]:
        section = Section(query=f"{item} comet vs asteroid", sentences=1, about=(item,), subject=True)
        return [texts[i] for i in OfflineEngine().pick(Extract((section,)), candidates, titles)[0]]

    assert point("asteroid") == [texts[3]]
    assert point("comet") in ([texts[4]], [])  # its own passage's "It ...", or nothing: never a passing mention


def test_a_question_word_no_sentence_holds_still_weighs_in_the_lexical_score():
    """Regression: for "Should zoos exist?" over passages that never say "zoos", "exist" alone made up the
    question's weight, so "Existence monism posits that there exists only one thing" scored as a full match."""
    from typedrag.engines.offline import LexicalOverlap

    sentences = ["Existence monism posits that there exists only one thing.", "Animals are kept in enclosures for exhibition."]
    monism, animals = LexicalOverlap(sentences).scores("Should zoos exist?")
    assert 0 < monism < 0.5 and animals == 0


def test_an_article_the_question_names_only_in_passing_gets_no_preference():
    """Regression: "How do I train for a marathon?" names the article "Train" too, and quoted the gauge of
    railway trains: an article is preferred only when its sentences come near the best in meaning."""
    from typedrag.engines.base import Extract, Section
    from typedrag.engines.offline import Candidate

    candidates = [
        Candidate("The marathon can be completed by running or with a run/walk strategy.", "[1]", 1, 0, frozenset({1})),
        Candidate("Trains are designed to a certain gauge, or distance between rails.", "[2]", 2, 1, frozenset({2})),
        Candidate("Runners build up their weekly mileage over several months.", "[1]", 1, 2, frozenset({1})),
    ]
    section = Section(query="How do I train for a marathon?", sentences=2)
    assert OfflineEngine().pick(Extract((section,)), candidates, {1: "Marathon", 2: "Train"}) == [[0, 2]]


def test_the_sentence_nearest_the_question_is_quoted_whatever_article_the_question_names():
    """Regression: "Why do bees sting even though it will kill them?" names the article "Bee", whose
    preference pushed out the one sentence that answers it, from another article."""
    from typedrag.engines.base import Extract, Section
    from typedrag.engines.offline import Candidate

    candidates = [
        Candidate("In Indonesia bee larvae are eaten with rice, wrapped in banana leaves and steamed.", "[1]", 1, 0, frozenset({1})),
        Candidate("Although a bee sting can be deadly to those with allergies, most bees are not aggressive.", "[1]", 1, 1, frozenset({1})),
        Candidate("Species of bees who die after stinging inflict pain on themselves to protect the hive.", "[2]", 2, 2, frozenset({2})),
    ]
    section = Section(query="Why do bees sting even though it will kill them?", sentences=2)
    assert OfflineEngine().pick(Extract((section,)), candidates, {1: "Bee", 2: "Africanized bee"})[0][0] == 2


def test_a_list_item_is_quoted_as_a_sentence_without_its_bullet():
    """Regression (issue 24): "- removing a package: - dpkg removes all of the package's files ..." quoted a
    list item with the bullet its HTML page was read into."""
    text = (
        "Removing a package with dpkg happens in two phases.\n"
        "- dpkg removes all of the package's files, with the exception of the configuration files.\n"
        "- Purging a package also deletes the configuration files that removal keeps."
    )
    pipeline = Pipeline(OfflineEngine(), ListRetriever([article("dpkg", text)]))
    answer = run(pipeline.answer("What does dpkg do when it removes a package?", "rag")).answer
    assert "dpkg removes all of the package's files" in answer, answer
    assert "- " not in answer and not answer.startswith("-"), answer
