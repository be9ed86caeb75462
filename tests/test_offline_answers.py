"""How the offline engine composes answers from the reader's readings (issue 32): plain RAG quotes what
answers and only that, a typed addition needs the reader's "answers" and its type's role, structure
comes from the document readers, and what is left out is recorded. The readings here are scripted, so
each test fails only when the composition does; tests/test_reader.py tests the shipped model's own."""

from __future__ import annotations

import asyncio

from typedrag import FunctionRetriever, ListRetriever, OfflineEngine, Pipeline
from typedrag.engines.base import AspectAnswer, Compared, Facet, Grounded
from typedrag.engines.offline import OfflineSettings
from typedrag.engines.offline.answers import NOTHING_RELEVANT
from typedrag.prompts import Prompt
from typedrag.reader import Reading, Role
from typedrag.records import BlockKind, LineKind, Passage
from typedrag.result import Source, Trace
from typedrag.testing import ScriptedReader

PROMPT = Prompt("t", "system", "{question} {sources}")
# Additions by the reader's role (causes, for and against, points about items, advice) are off by default
# (OfflineSettings.role_additions); the tests of how they are chosen turn them on.
ROLES = OfflineSettings(role_additions=True)
# A planned aspect's sentence the reader reads as likelier to answer than plain RAG's (off by default since 2026-12-06).
ASPECTS = OfflineSettings(aspect_sentences=1)
NOISE = Reading(0.02, 0.05, Role.NONE)


def reads(table: dict[str, Reading]):
    """A reader that gives each sentence containing a key its reading; every other sentence is noise."""

    def script(question: str, title: str, sentence: str) -> Reading:
        return next((reading for key, reading in table.items() if key in sentence), NOISE)

    return ScriptedReader(script)


def run(coroutine):
    return asyncio.run(coroutine)


def source(number: int, text: str, lines: tuple[LineKind, ...] = (), title: str = "Doc") -> Source:
    return Source(number=number, passage_id=f"d#{number}", title=title, text=text, score=1.0, lines=lines)


def write(engine: OfflineEngine, task) -> tuple[str, Trace]:
    trace = Trace()
    written = run(engine.write(task, trace))
    return written.text, trace


def test_plain_rag_quotes_the_sentences_that_answer_and_no_filler():
    """Two good sentences beat two good and two noise: nothing the reader calls noise is quoted."""
    engine = OfflineEngine(reads({"iceberg": Reading(0.9, 0.95, Role.CAUSE), "rivets": Reading(0.7, 0.9, Role.CAUSE)}))
    text = (
        "The Titanic struck an iceberg at night. The ship had four funnels and was painted black. "
        "Brittle rivets let the hull plates open. Tickets cost up to 870 pounds."
    )
    answer, _ = write(
        engine,
        Grounded(role="answer:rag", prompt=PROMPT, question="Why did the Titanic sink?", sources=[source(1, text)]),
    )
    assert answer == "The Titanic struck an iceberg at night. [1] Brittle rivets let the hull plates open. [1]"


def test_one_answering_sentence_is_followed_by_on_topic_ones_up_to_the_lead_size_never_by_noise():
    """The reader misses answers more often than it takes noise on topic (docs/lab/2026-12-02-reader-model.md)."""
    engine = OfflineEngine(reads({"iceberg": Reading(0.9, 0.95, Role.CAUSE), "funnels": Reading(0.1, 0.8, Role.FACT)}))
    text = "The Titanic struck an iceberg at night. The ship had four funnels. Tickets cost up to 870 pounds."
    written = run(
        engine.write(
            Grounded(role="answer:rag", prompt=PROMPT, question="Why did the Titanic sink?", sources=[source(1, text)]),
            Trace(),
        )
    )
    assert (
        written.text == "The Titanic struck an iceberg at night. [1] The ship had four funnels. [1]"
        and written.supported
    )
    assert written.notes == () and written.best == 0.9


def test_on_topic_sentences_fill_the_answer_only_from_the_passages_it_quotes():
    """Filler on the topic came from any passage: beside "struck an iceberg" a sentence of another page on the
    ship's funnels. Judged blind on six manuals, filler from the answering sentence's own passage won 24-11 with
    less noise (docs/lab/2026-12-07-filler-context.md); another passage's on-topic sentence is left out."""
    engine = OfflineEngine(
        reads(
            {
                "iceberg": Reading(0.9, 0.95, Role.CAUSE),
                "lookouts": Reading(0.15, 0.7, Role.FACT),
                "funnels": Reading(0.2, 0.8, Role.FACT),
            }
        )
    )
    task = Grounded(
        role="answer:rag",
        prompt=PROMPT,
        question="Why did the Titanic sink?",
        sources=[
            source(1, "The Titanic struck an iceberg at night. The lookouts had no binoculars that night."),
            source(2, "The ship had four funnels and was painted black. Tickets cost up to 870 pounds."),
        ],
    )
    written = run(engine.write(task, Trace()))
    assert written.text == "The Titanic struck an iceberg at night. [1] The lookouts had no binoculars that night. [1]"
    anywhere = run(
        OfflineEngine(engine.reader, settings=OfflineSettings(fill_from_answering_passages=False)).write(task, Trace())
    )
    assert "four funnels" in anywhere.text


def test_with_nothing_answering_plain_rag_shows_the_nearest_and_says_it_does_not_answer():
    engine = OfflineEngine(reads({"funnels": Reading(0.2, 0.8, Role.FACT)}))
    task = Grounded(
        role="answer:rag",
        prompt=PROMPT,
        question="Why did the Titanic sink?",
        sources=[source(1, "The ship had four funnels and was painted black. Tickets cost up to 870 pounds.")],
    )
    written = run(engine.write(task, Trace()))
    assert written.text == "The ship had four funnels and was painted black. [1]" and not written.supported
    # said on the step in the trace when the answer is used (an abstention drops it with the text); never a fallback
    assert (
        written.said == ("the reader found no sentence that answers; the nearest on-topic ones are quoted",)
        and written.notes == ()
    )
    nothing = run(OfflineEngine(reads({})).write(task, Trace()))
    assert nothing.text == NOTHING_RELEVANT and not nothing.supported and nothing.quotes == ()


def test_code_tables_and_headings_are_never_quoted_and_a_list_item_is_one_sentence():
    """Structure comes from the document's reader: a line it marked as code is left out whatever the
    reader model would say of it; an item of an ordered list is quoted whole, with its place."""
    everything = reads({"": Reading(0.9, 0.9, Role.STEP)})
    text = "Installing packages\napt install nginx will install it now\nRun the installer as root.\nUpdate the package index first"
    lines = (
        LineKind(BlockKind.HEADING),
        LineKind(BlockKind.CODE),
        LineKind(BlockKind.PROSE),
        LineKind(BlockKind.ITEM, 1),
    )
    written = run(
        OfflineEngine(everything).write(
            Grounded(
                role="answer:rag", prompt=PROMPT, question="How do I install nginx?", sources=[source(1, text, lines)]
            ),
            Trace(),
        )
    )
    quoted = [q.text for q in written.quotes]
    assert quoted == ["Run the installer as root.", "Update the package index first"] or quoted == [
        "Update the package index first",
        "Run the installer as root.",
    ]
    assert [q.order for q in written.quotes if q.text.startswith("Update")] == [1]


def test_a_typed_addition_needs_its_role_not_a_cue_word():
    """Issue 32: "Causes:" stood over a sentence that merely held the word "causes" (a note on overhead)."""
    engine = OfflineEngine(
        reads(
            {
                "overhead": Reading(0.8, 0.9, Role.FACT),  # answers, holds the word "causes", is no cause
                "iceberg": Reading(0.9, 0.9, Role.CAUSE),
            }
        ),
        settings=ROLES,
    )
    sources = [
        source(1, "The Titanic sank in 1912."),
        source(2, "Logging causes a millisecond of overhead per call."),
        source(3, "The Titanic struck an iceberg that opened six compartments."),
    ]
    cause = AspectAnswer(
        role="aspect:reason",
        prompt=PROMPT,
        question="Why did the Titanic sink?",
        focus="causes",
        facet=Facet.CAUSES,
        sources=sources[1:2],
    )
    assert not run(engine.write(cause, Trace())).supported
    found = run(
        engine.write(
            AspectAnswer(
                role="aspect:reason",
                prompt=PROMPT,
                question="Why did the Titanic sink?",
                focus="causes",
                facet=Facet.CAUSES,
                sources=sources[2:],
            ),
            Trace(),
        )
    )
    assert found.supported and [q.role for q in found.quotes] == [Role.CAUSE]


TITANIC = [
    "RMS Titanic sank in the North Atlantic in April 1912 after she struck an iceberg on her maiden voyage.",
    "The Titanic carried lifeboats for only about half of those on board, which made the disaster far deadlier.",
    "Titanic's hull plates and rivets became brittle in the icy water, and the collision opened six compartments.",
    "Warnings of ice from other ships went unheeded, and the Titanic kept close to full speed through the ice field.",
    "Logging causes about a millisecond of overhead per call in most programs.",
]


def titanic_reader(iceberg: float = 0.95):
    """The Titanic passages' readings; `iceberg`, the chance that the lead's fact answers (below the causes', 0.8
    and 0.85, the causes read as likelier to answer than plain RAG's best)."""
    return reads(
        {
            "struck an iceberg": Reading(iceberg, 0.95, Role.FACT),
            "lifeboats": Reading(0.6, 0.9, Role.CONSEQUENCE),
            "brittle": Reading(0.8, 0.9, Role.CAUSE),
            "Warnings of ice": Reading(0.85, 0.9, Role.CAUSE),
            "overhead": Reading(0.1, 0.1, Role.NONE),
        }
    )


def titanic_retriever():
    """The question finds the first two passages; a sub-query (the offline planner's "causes", "factors")
    finds the rest, so the planned aspects have passages of their own."""
    passages = [Passage(f"titanic#{i}", "titanic", "RMS Titanic", text) for i, text in enumerate(TITANIC)]
    return FunctionRetriever(
        lambda query, k: (passages[2:] if ("causes" in query or "factors" in query) else passages[:2])[:k]
    )


def test_a_reason_answer_is_plain_rags_then_causes_the_reader_found():
    pipeline = Pipeline(OfflineEngine(titanic_reader(), settings=ROLES), titanic_retriever())
    rag = run(pipeline.answer("Why did the Titanic sink?", "rag"))
    typed = run(pipeline.answer("Why did the Titanic sink?", "typed", "reason"))
    assert typed.strategy == "reason" and typed.answer.startswith(rag.answer + "\nCauses:\n- ")
    added = typed.answer[len(rag.answer) :]
    assert "brittle" in added and "Warnings of ice" in added and "overhead" not in added
    assert "lifeboats" not in added  # a consequence, not a cause


def test_when_no_aspect_adds_anything_the_typed_answer_is_plain_rags_and_the_trace_says_why():
    reader = reads({"struck an iceberg": Reading(0.95, 0.95, Role.FACT)})
    pipeline = Pipeline(OfflineEngine(reader, settings=ROLES), titanic_retriever())
    rag = run(pipeline.answer("Why did the Titanic sink?", "rag"))
    typed = run(pipeline.answer("Why did the Titanic sink?", "typed", "reason"))
    assert typed.answer == rag.answer and typed.plan is not None
    dropped = [f.reason for f in typed.fallbacks if f.step.startswith("aspect:")]
    assert dropped and all("no sentence of its kind" in reason for reason in dropped)


def test_a_comparison_point_is_about_its_own_item_and_a_relation_joins_the_lead():
    """Issue 32: an item's bullet described the other item."""
    texts = [
        "Comets are icy bodies that grow a glowing coma and tail near the Sun.",
        "Asteroids are rocky or metallic bodies, mostly found between Mars and Jupiter.",
        "Unlike asteroids, comets contain volatile ices that vaporise near the Sun.",
        "An asteroid named Ceres is now classed as a dwarf planet.",
    ]
    reader = reads(
        {
            "Comets are icy": Reading(0.9, 0.9, Role.ITEM),
            "Asteroids are rocky": Reading(0.9, 0.9, Role.ITEM),
            "Unlike asteroids": Reading(0.95, 0.95, Role.RELATES),
            "Ceres": Reading(0.2, 0.6, Role.ITEM),
        }
    )
    typed = run(
        Pipeline(OfflineEngine(reader, settings=ROLES), ListRetriever(texts)).answer(
            "What is the difference between a comet and an asteroid?", "typed", "comparison"
        )
    )
    assert typed.strategy == "comparison"
    bullets = dict(line[2:].split(": ", 1) for line in typed.answer.splitlines() if line.startswith("- "))
    for item, point in bullets.items():
        other = "asteroid" if item == "comet" else "comet"
        assert item in point.lower() and not point.lower().startswith(other)
    assert not any("Ceres" in point for point in bullets.values())  # on topic (the lead may quote it), no point
    assert "Unlike asteroids" in typed.answer.splitlines()[0]


def test_an_instruction_answer_quotes_the_documents_own_numbered_steps_in_order():
    steps = "Download the source archive.\nUnpack it with tar.\nRun make in the new folder.\nCopy the binary to /usr/local/bin."
    kinds = tuple(LineKind(BlockKind.ITEM, n) for n in range(1, 5))
    reader = reads(
        {
            "Unpack": Reading(0.9, 0.9, Role.STEP),
            "Download": Reading(0.5, 0.8, Role.STEP),
            "Run make": Reading(0.6, 0.8, Role.STEP),
            "Copy": Reading(0.4, 0.8, Role.STEP),
        }
    )
    task = AspectAnswer(
        role="aspect:instruction",
        prompt=PROMPT,
        question="How do I build it from source?",
        focus="steps",
        facet=Facet.STEPS,
        sources=[source(1, steps, kinds)],
    )
    written = run(OfflineEngine(reader).write(task, Trace()))
    assert [q.order for q in written.quotes] == [1, 2, 3, 4]
    assert written.text.startswith("Download the source archive. [1] Unpack it with tar. [1]")


def test_a_debate_shows_only_the_sides_the_reader_found():
    """Issue 32: "For/Against" bullets on a question whose manual gives one clear answer."""
    texts = [
        "Nuclear power plants produce electricity from fission.",
        "Critics warn that nuclear waste stays dangerous for thousands of years.",
        "Nuclear power is used in many countries.",
    ]
    reader = reads({"fission": Reading(0.7, 0.9, Role.FACT), "Critics warn": Reading(0.85, 0.9, Role.AGAINST)})
    typed = run(
        Pipeline(OfflineEngine(reader, settings=ROLES), ListRetriever(texts)).answer(
            "Should we build more nuclear power plants?", "typed", "debate"
        )
    )
    assert typed.strategy == "debate"
    assert "- For:" not in typed.answer
    # what the offline engine leaves out by design is said on its step, not recorded as a fallback (issue 55)
    assert [n for step in typed.steps for n in step.notes if "no argument for" in n]
    assert not [f for f in typed.fallbacks if "no argument for" in f.reason]


def test_a_procedure_the_document_numbered_is_the_answers_steps():
    """Issue 32: an instruction answer can quote a document's own ordered list as its steps, in order."""
    lead = Passage("build#0", "build", "Building from source", "You can build the program from its source code.")
    steps = Passage(
        "build#1",
        "build",
        "Building from source",
        "Download the source archive.\nUnpack it with tar.\nRun make in the new folder.\nCopy the binary to /usr/local/bin.",
        lines=tuple(LineKind(BlockKind.ITEM, n) for n in range(1, 5)),
    )
    retriever = FunctionRetriever(
        lambda query, k: ([steps] if "steps" in query or "requirements" in query else [lead])[:k]
    )
    reader = reads(
        {
            "build the program": Reading(0.8, 0.9, Role.FACT),
            "Unpack": Reading(0.9, 0.9, Role.STEP),
            "Download": Reading(0.5, 0.8, Role.STEP),
            "Run make": Reading(0.6, 0.8, Role.STEP),
            "Copy": Reading(0.4, 0.8, Role.STEP),
        }
    )
    typed = run(
        Pipeline(OfflineEngine(reader), retriever).answer("How do I build it from source?", "typed", "instruction")
    )
    assert typed.strategy == "instruction"
    assert typed.answer.splitlines()[1:] == [
        "Steps:",
        "1. Download the source archive. [2]",
        "2. Unpack it with tar. [2]",
        "3. Run make in the new folder. [2]",
        "4. Copy the binary to /usr/local/bin. [2]",
    ]


# --- issue 41 #16: a quoted sentence whose subject is in a sentence the answer does not quote -------------


def test_a_sentence_that_leans_on_the_one_before_is_quoted_after_it():
    """ "This makes Memcheck run more slowly" quoted alone says nothing: the sentence it speaks of comes first."""
    engine = OfflineEngine(
        reads(
            {
                "This makes": Reading(0.6, 0.9, Role.CAUSE),
                "Memcheck checks": Reading(0.5, 0.9, Role.FACT),
                "To see where": Reading(
                    0.1, 0.8, Role.STEP
                ),  # on topic, not answering: brought in for the one after it
            }
        )
    )
    text = (
        "Memcheck checks every read of memory. To see where uninitialised values come from, use --track-origins=yes. "
        "This makes Memcheck run more slowly, but finds the root cause. Tickets cost up to 870 pounds."
    )
    answer, _ = write(
        engine, Grounded(role="answer:rag", prompt=PROMPT, question="Why is Memcheck slow?", sources=[source(1, text)])
    )
    assert answer == (  # best first, the sentence leaned on brought in before the one leaning on it
        "To see where uninitialised values come from, use --track-origins=yes. [1] "
        "This makes Memcheck run more slowly, but finds the root cause. [1] Memcheck checks every read of memory. [1]"
    )


def test_a_sentence_leaning_on_an_off_topic_one_is_left_out_not_quoted_with_it():
    """ "What does inflation mean?": "It can be measured as the increase in the inflation-adjusted output ..."
    speaks of economic growth, the sentence before it: neither is quoted."""
    engine = OfflineEngine(
        reads(
            {
                "It can be measured": Reading(0.5, 0.9, Role.FACT),
                "In economics, inflation": Reading(0.9, 0.9, Role.DEFINITION),
            }
        )
    )
    sources = [
        source(1, "In economics, inflation is an increase in the average price of goods and services."),
        source(
            2,
            "In economics, economic growth is an increase in the goods a society produces. "
            "It can be measured as the increase in the inflation-adjusted output of an economy.",
        ),
    ]
    answer, _ = write(
        engine, Grounded(role="answer:rag", prompt=PROMPT, question="What does inflation mean?", sources=sources)
    )
    assert answer == "In economics, inflation is an increase in the average price of goods and services. [1]"


def test_a_sentence_whose_subject_opens_no_passage_here_is_left_out():
    """ "Many are fragments of comets" opening a passage: what "many" stands for was cut off with the passage before."""
    engine = OfflineEngine(
        reads({"Many are": Reading(0.9, 0.9, Role.FACT), "small body": Reading(0.5, 0.9, Role.DEFINITION)})
    )
    sources = [
        source(1, "Many are fragments from comets or asteroids."),
        source(2, "A meteoroid is a small body in outer space."),
    ]
    answer, _ = write(
        engine, Grounded(role="answer:rag", prompt=PROMPT, question="What are meteoroids?", sources=sources)
    )
    assert answer == "A meteoroid is a small body in outer space. [2]"


def test_a_typed_addition_never_leans_on_a_sentence_it_does_not_show():
    """A bullet under "Causes:" stands alone: "These may not manifest ..." has nothing before it to lean on."""
    engine = OfflineEngine(reads({"These may": Reading(0.9, 0.9, Role.CAUSE)}), settings=ROLES)
    text = "Alternatively, if your program has data races, they may hide. These may not manifest under Valgrind at all."
    cause = AspectAnswer(
        role="aspect:reason",
        prompt=PROMPT,
        question="Why is my program slow under Valgrind?",
        focus="causes",
        facet=Facet.CAUSES,
        sources=[source(1, text)],
    )
    assert not run(engine.write(cause, Trace())).supported


# --- issue 41 #2, issue 44 #4: a typed addition only where the reader is sure enough ----------------------


def test_a_cause_the_reader_doubts_is_not_added_and_the_typed_answer_is_plain_rags():
    """Over the valgrind manual, "If you don't understand an error message ..." stood under "Causes:", read as a
    cause at a chance past the lead's bar. An addition needs `added_bar`: a doubtful one is left out."""
    from typedrag.reader import Bars, default_reader

    shipped = default_reader().bars
    doubtful = 0.30  # past the lead's bar, and on the labels a cause read at 0.30 is one about half the time
    assert shipped.answers < doubtful
    reader = reads({"segfault": Reading(doubtful, 0.9, Role.CAUSE), "instrument": Reading(0.9, 0.9, Role.CAUSE)})
    reader = ScriptedReader(reader.script, bars=Bars(shipped.answers, shipped.on_topic))
    engine = OfflineEngine(reader, settings=ROLES)
    task = AspectAnswer(
        role="aspect:reason",
        prompt=PROMPT,
        question="Why does my program run slower under Valgrind?",
        focus="causes",
        facet=Facet.CAUSES,
        sources=[source(1, "A segfault at exit is reported as an error.")],
    )
    assert not run(engine.write(task, Trace())).supported
    sure = AspectAnswer(
        role="aspect:reason",
        prompt=PROMPT,
        question="Why does my program run slower under Valgrind?",
        focus="causes",
        facet=Facet.CAUSES,
        sources=[source(1, "Valgrind must instrument every instruction it runs.")],
    )
    assert run(engine.write(sure, Trace())).supported


def test_a_comparison_point_never_leans_on_a_sentence_it_does_not_show():
    """ "- Callgrind: This is because there are no explicit call instructions ..." (valgrind manual): the point
    stands on its own line, so "This" points at nothing; a point that names its subject is taken instead."""
    engine = OfflineEngine(
        reads(
            {
                "This is because": Reading(0.9, 0.9, Role.ITEM),
                "Callgrind records": Reading(0.7, 0.9, Role.ITEM),
                "both Valgrind tools": Reading(0.8, 0.9, Role.RELATES),
            }
        ),
        settings=ROLES,
    )
    sources = [
        source(1, "Cachegrind and Callgrind are both Valgrind tools."),
        source(2, "This is because Callgrind has no call instructions to read there."),
        source(3, "Callgrind records the call graph of a program."),
    ]
    task = Compared(
        role="answer:comparison",
        prompt=PROMPT,
        question="How does Callgrind differ from Cachegrind?",
        sources=sources,
        items=("Callgrind", "Cachegrind"),
        purpose="difference",
        instruction="",
        lead=1,
    )
    answer, _ = write(engine, task)
    assert "- Callgrind: Callgrind records the call graph of a program. [3]" in answer.splitlines()


def test_an_it_that_stands_for_nothing_is_no_reference_and_the_rule_never_empties_an_answer():
    """ "It is very important to distinguish Lst[[1]] from Lst[1]" opens its passage (the R manual): its "it" stands
    for nothing, so it is quoted; and an answer whose every answering sentence leans on one out of reach keeps them
    rather than saying the passages do not speak to the question."""
    engine = OfflineEngine(reads({"very important": Reading(0.8, 0.9, Role.FACT)}))
    task = Grounded(
        role="answer:rag",
        prompt=PROMPT,
        question="When should I use [[ instead of [ on a list?",
        sources=[source(1, "It is very important to distinguish Lst[[1]] from Lst[1]. Tickets cost 870 pounds.")],
    )
    assert write(engine, task)[0] == "It is very important to distinguish Lst[[1]] from Lst[1]. [1]"
    engine = OfflineEngine(reads({"They are": Reading(0.8, 0.9, Role.FACT)}))
    task = Grounded(
        role="answer:rag",
        prompt=PROMPT,
        question="What are lists in R?",
        sources=[source(1, "They are ordered collections of objects of any type.")],
    )
    assert write(engine, task)[0] == "They are ordered collections of objects of any type. [1]"


# --- issue 44 (offline), issue 41 #2: additions by the reader's role are off by default ----------------------


def test_by_default_a_typed_answer_adds_nothing_its_aspects_found_and_says_so_on_the_step():
    """On two manuals held out (BorgBackup, SQLAlchemy), each of the 3 offline typed answers an aspect's sentence
    changed gained only a sentence a blind reader counted as noise ("The fix has been adjusted to not interfere with
    quotes ..." for enforcing SQLite's foreign keys), read by the reader as likelier to answer than plain RAG's best:
    by default typed quotes plain RAG's answer, and each step says what it left out and why, never as a fallback."""
    reader = titanic_reader(iceberg=0.7)
    pipeline = Pipeline(OfflineEngine(reader), titanic_retriever())
    rag = run(pipeline.answer("Why did the Titanic sink?", "rag"))
    typed = run(pipeline.answer("Why did the Titanic sink?", "typed", "reason"))
    assert typed.strategy == "reason" and typed.answer == rag.answer
    assert not [f for f in typed.fallbacks if f.step.startswith("aspect:")]
    notes = [note for step in typed.steps for note in step.notes]
    assert "not added: sentences the plan's own searches found (off: OfflineSettings.aspect_sentences)" in notes, notes
    assert not any("the reader found none" in note for note in notes), notes  # it was not asked to look


def test_with_aspect_sentences_a_typed_answer_adds_what_its_aspects_found_better_by_no_role():
    """Where offline typed answers added causes, points about items, advice or sides by the reader's role, a blind
    reader preferred plain RAG's (docs/lab/2026-12-03-demo-vectors.md h, docs/lab/2026-12-03-typed-never-loses.md): no "Causes:" label. Since issue 55 each planned
    aspect quotes, from the passages its own search found, the sentence the reader reads as answering the question
    and as likelier to answer than every sentence plain RAG quotes, after plain RAG's answer: before, every aspect was
    "not written" and typed equalled plain RAG on 24 of 24 questions; the trace says what each step left out on the
    step itself, never as a fallback."""
    reader = titanic_reader(iceberg=0.7)
    pipeline = Pipeline(OfflineEngine(reader, settings=ASPECTS), titanic_retriever())
    rag = run(pipeline.answer("Why did the Titanic sink?", "rag"))
    typed = run(pipeline.answer("Why did the Titanic sink?", "typed", "reason"))
    assert typed.strategy == "reason" and typed.plan is not None and "Causes:" not in typed.answer
    assert typed.answer.startswith(rag.answer + " ") and "brittle" in typed.answer and "Warnings of ice" in typed.answer
    assert "overhead" not in typed.answer
    planned = [a for a in typed.aspects if a.label != "overview"]
    assert planned and all(a.error is None for a in planned)
    assert not [f for f in typed.fallbacks if f.step.startswith("aspect:")]
    # an aspect's sentence no likelier to answer than plain RAG's best adds nothing: typed is then plain RAG's
    pipeline = Pipeline(
        OfflineEngine(titanic_reader(), settings=ASPECTS), titanic_retriever()
    )  # "struck an iceberg" at 0.95
    assert (
        run(pipeline.answer("Why did the Titanic sink?", "typed", "reason")).answer
        == run(pipeline.answer("Why did the Titanic sink?", "rag")).answer
    )

    texts = [
        "Comets are icy bodies that grow a glowing coma and tail near the Sun.",
        "Asteroids are rocky or metallic bodies, mostly found between Mars and Jupiter.",
        "Unlike asteroids, comets contain volatile ices that vaporise near the Sun.",
    ]
    reader = reads(
        {
            "Comets are icy": Reading(0.9, 0.9, Role.ITEM),
            "Asteroids are rocky": Reading(0.9, 0.9, Role.ITEM),
            "Unlike asteroids": Reading(0.95, 0.95, Role.RELATES),
        }
    )
    comparison = Pipeline(OfflineEngine(reader), ListRetriever(texts))
    question = "What is the difference between a comet and an asteroid?"
    typed = run(comparison.answer(question, "typed", "comparison"))
    assert typed.strategy == "comparison" and not [line for line in typed.answer.splitlines() if line.startswith("- ")]
    assert typed.answer == run(comparison.answer(question, "rag")).answer
    assert [n for step in typed.steps for n in step.notes if "role_additions" in n] and not typed.fallbacks


def test_by_default_steps_the_document_did_not_number_are_not_added():
    """A step read by role from prose ("Valgrind's gdbserver implementation is quite complete ..." stood as step 1
    on the valgrind manual) is a reading; a numbered list is the document's own structure and is still quoted."""
    lead = Passage("build#0", "build", "Building from source", "You can build the program from its source code.")
    prose = Passage(
        "build#1", "build", "Building from source", "Unpack the archive with tar before you run make in the folder."
    )
    retriever = FunctionRetriever(
        lambda query, k: ([prose] if "steps" in query or "requirements" in query else [lead])[:k]
    )
    reader = reads({"build the program": Reading(0.8, 0.9, Role.FACT), "Unpack": Reading(0.9, 0.9, Role.STEP)})
    typed = run(
        Pipeline(OfflineEngine(reader, settings=ASPECTS), retriever).answer(
            "How do I build it from source?", "typed", "instruction"
        )
    )
    # not as a step: the sentence the aspect's search found that the reader is sure answers, after the lead (issue 55)
    assert typed.strategy == "instruction" and "Steps:" not in typed.answer and "\n" not in typed.answer
    assert typed.answer.startswith("You can build the program from its source code. [1] Unpack the archive")
    with_roles = run(
        Pipeline(OfflineEngine(reader, settings=ROLES), retriever).answer(
            "How do I build it from source?", "typed", "instruction"
        )
    )
    assert "Steps:" in with_roles.answer and "Unpack" in with_roles.answer


def test_a_typed_answer_is_judged_on_the_best_sentence_its_overview_read_not_only_on_those_it_quoted():
    """Debian Reference, "Why should I avoid logging in as root for everyday work?": plain RAG answered, typed
    abstained (reader 0.14 under its 0.15 bar) on the same passages, because the combined answer was judged only
    on the sentences it quoted, not on the best one its overview (plain RAG's step) had read."""
    from typedrag.abstain import READER_BAR

    texts = [
        "Logging in as root for everyday work means any mistyped command can damage the whole system.",
        "Personally, I consider using sudo a better alternative than using the root account all the time.",
    ]
    reader = reads(
        {
            "mistyped command": Reading(
                READER_BAR + 0.05, READER_BAR + 0.05, Role.CAUSE
            ),  # the best, too far off topic to quote
            "Personally": Reading(READER_BAR - 0.05, 0.9, Role.ADVICE),  # quoted as the nearest on topic
        }
    )
    pipeline = Pipeline(OfflineEngine(reader), ListRetriever(texts))
    question = "Why should I avoid logging in as root for everyday work?"
    rag = run(pipeline.answer(question, "rag"))
    typed = run(pipeline.answer(question, "typed", "reason"))
    assert rag.abstention is None and "Personally" in rag.answer
    assert typed.abstention is None and typed.answer == rag.answer


def test_an_answer_that_quotes_nothing_is_abstained_on_not_shown_as_an_answer():
    """Debian handbook dh-057 (plain RAG and typed) and R manuals rm-060 (typed): the reader read a sentence just
    past the abstention bar but not on topic, so nothing was quoted and "The retrieved passages do not speak to
    this." was returned as an answer, not abstained on."""
    from typedrag.abstain import READER_BAR

    texts = [
        "Variable names can be built on the fly from strings such as a1, a2 and a3 with assign().",
        "Tickets cost 870 pounds.",
    ]
    reader = reads({"Variable names": Reading(READER_BAR + 0.05, 0.05, Role.FACT)})  # past the bar, read as off topic
    pipeline = Pipeline(OfflineEngine(reader), ListRetriever(texts))
    question = "Is it good practice to build variable names on the fly from strings?"
    for method, kind in (("rag", None), ("typed", "debate")):
        result = run(pipeline.answer(question, method, kind))
        assert result.abstention is not None and result.abstention.by == "reader", (method, result.answer)
        assert NOTHING_RELEVANT not in result.answer


def test_a_question_asking_for_an_amount_or_a_date_is_answered_only_by_a_sentence_stating_one():
    """ "What share of the sunlight that hits a leaf ends up stored as sugar?" was answered with a sentence on how
    plants store energy, and "When will the next stable version come out?" with one on a package's journey: on the
    subject, stating no amount and no date. Such a sentence is at best the nearest; none stating one: abstained."""
    texts = [
        "The distance of the Moon from Earth varies along its elliptical orbit.",
        "The Moon orbits Earth at an average distance of 384,400 km.",
    ]
    reader = reads({"varies along": Reading(0.9, 0.9, Role.FACT), "average distance": Reading(0.5, 0.9, Role.FACT)})
    answer = run(Pipeline(OfflineEngine(reader), ListRetriever(texts)).answer("How far away is the Moon?", "rag"))
    assert answer.abstention is None and answer.answer.startswith("The Moon orbits Earth at an average distance")
    alone = run(Pipeline(OfflineEngine(reader), ListRetriever(texts[:1])).answer("How far away is the Moon?", "rag"))
    assert alone.abstention is not None and alone.abstention.by == "reader", alone.answer
    other = run(
        Pipeline(OfflineEngine(reader), ListRetriever(texts[:1])).answer(
            "Why does the Moon's distance from Earth vary?", "rag"
        )
    )
    assert other.abstention is None  # a question that asks for no amount is read as before


def test_what_reads_as_asking_for_an_amount_or_a_date():
    from typedrag.phrasing.questions import amount_asked, states_an_amount

    numbers = [
        "How many people were guillotined during it? (French Revolution, king)",
        "So how long does a restore take?",
        "What share of the sunlight ends up as sugar?",
    ]
    dates = [
        "When will the next stable version come out?",
        "In what year did Rome fall?",
        "When was the first photo of one taken?",
    ]
    neither = [
        "When is a GIN index the right choice?",
        "When I write `import foo`, how does Python find foo?",
        "When should I use [[ instead of [ on a list?",
        "How do I bake bread?",
        "Why did Rome fall?",
    ]
    assert [amount_asked(q) for q in numbers + dates + neither] == ["number"] * 3 + ["date"] * 3 + [None] * 5
    assert states_an_amount("The loan period is three weeks.", "number") and states_an_amount(
        "It was released in March.", "date"
    )
    assert states_an_amount("Founded in 1888, it grew.", "date") and not states_an_amount(
        "About three weeks long.", "date"
    )
    assert not states_an_amount("Almost every large galaxy has a black hole at its centre.", "number")


def test_a_typed_answer_is_judged_on_the_passages_it_was_written_from_not_those_of_aspects_left_out():
    """R manuals rm-036, PostgreSQL pg-09: plain RAG abstained (no sentence close enough to the question), the typed
    answer quoted the same off-topic passages as an answer, because the relevance bar read the passages of its
    aspects too, aspects that added nothing to the text."""
    off = [
        Passage(
            "ship#0", "ship", "Ship", "The wreck of a large ship lies on the floor of the North Atlantic."
        ),  # cosine 0.46
        Passage("ship#1", "ship", "Ship", "Many ships have sunk in the North Atlantic over the centuries."),
    ]  # 0.48
    close = [
        Passage(
            "titanic#0", "titanic", "RMS Titanic", "The Titanic sank because it struck an iceberg that opened its hull."
        ),
        Passage(
            "titanic#1",
            "titanic",
            "RMS Titanic",
            "The Titanic sank after too few lifeboats and ice warnings were ignored.",
        ),
    ]
    retriever = FunctionRetriever(lambda query, k: (close if ("causes" in query or "factors" in query) else off)[:k])
    reader = reads({"Many ships": Reading(0.3, 0.5, Role.FACT), "struck an iceberg": Reading(0.9, 0.9, Role.CAUSE)})
    pipeline = Pipeline(OfflineEngine(reader, settings=ASPECTS), retriever)
    rag = run(pipeline.answer("Why did the Titanic sink?", "rag"))
    typed = run(pipeline.answer("Why did the Titanic sink?", "typed", "reason"))
    assert rag.abstention is not None and rag.abstention.by == "relevance bar"
    # Since issue 55 an aspect that finds what the question's own search missed is quoted, and the overview's
    # nearest sentences (none answering) are left out: the off-topic passages are still never quoted.
    assert typed.abstention is None and "Many ships" not in typed.answer and "wreck" not in typed.answer
    assert typed.answer.startswith("The Titanic sank because it struck an iceberg that opened its hull. ["), (
        typed.answer
    )


def test_advice_is_held_to_the_same_relevance_bar_as_any_question():
    """Wikipedia demo kt-033 ("Thinking about setting up a home aquarium - any recommendations for a first-timer?"):
    plain RAG abstained, the typed answer quoted a dictionary definition of an aquarium, because advice questions had
    a lower relevance bar (0.36) than others (0.50); a blind reader preferred the abstention."""
    texts = [
        "An aquarium is a vivarium of any size having at least one transparent side.",  # cosine 0.44
        "Fishkeeping is a popular hobby practised by aquarists.",
    ]  # 0.38
    reader = reads({"vivarium": Reading(0.3, 0.6, Role.DEFINITION)})
    pipeline = Pipeline(OfflineEngine(reader), ListRetriever(texts))
    question = "Any tips for a first-timer setting up a home aquarium?"
    rag = run(pipeline.answer(question, "rag"))
    typed = run(pipeline.answer(question, "typed", "experience"))
    assert rag.abstention is not None and rag.abstention.by == "relevance bar"
    assert typed.abstention is not None and typed.abstention.by == "relevance bar", typed.answer


def test_advice_is_judged_on_the_passages_its_answer_quotes():
    """PostgreSQL pg-09 ("What would you recommend for keeping an eye on long-running queries and locks?"): plain
    RAG abstained; the typed answer passed the relevance bar on a passage its keyword search found, then quoted
    only its own passages' nearest sentences (on locking clauses), as an answer."""
    own = [
        Passage(
            "lock#0", "lock", "LOCK", "The wreck of a large ship lies on the floor of the North Atlantic."
        ),  # cosine 0.46
        Passage("lock#1", "lock", "LOCK", "Many ships have sunk in the North Atlantic over the centuries."),
    ]  # 0.48
    found_by_keywords = [
        Passage("t#0", "t", "RMS Titanic", "The Titanic sank because it struck an iceberg that opened its hull.")
    ]
    retriever = FunctionRetriever(lambda query, k: (own if query.startswith("Why") else found_by_keywords)[:k])
    reader = reads({"Many ships": Reading(0.2, 0.5, Role.FACT), "struck an iceberg": Reading(0.9, 0.9, Role.ADVICE)})
    pipeline = Pipeline(OfflineEngine(reader), retriever)
    question = "Why did the Titanic sink?"
    assert run(pipeline.answer(question, "rag")).abstention is not None
    typed = run(pipeline.answer(question, "typed", "experience"))
    assert typed.abstention is not None and typed.abstention.by == "relevance bar", typed.answer
    with_roles = run(Pipeline(OfflineEngine(reader, settings=ROLES), retriever).answer(question, "typed", "experience"))
    assert with_roles.abstention is None and "struck an iceberg" in with_roles.answer  # advice from the keyword search


def test_a_planned_aspect_that_finds_nothing_sure_is_said_on_its_step_never_a_fallback():
    """Issue 55: offline, every planned step showed as "dropped" (in the trace, on the page, in
    typedrag_fallbacks_total) where it did what the offline engine does by design: quote only what its reader is
    sure answers. It is said on the step; a fallback stays what failed."""
    reader = reads({"struck an iceberg": Reading(0.95, 0.95, Role.FACT), "brittle": Reading(0.3, 0.9, Role.CAUSE)})
    typed = run(
        Pipeline(OfflineEngine(reader, settings=ASPECTS), titanic_retriever()).answer(
            "Why did the Titanic sink?", "typed", "reason"
        )
    )
    assert (
        typed.answer
        == run(Pipeline(OfflineEngine(reader), titanic_retriever()).answer("Why did the Titanic sink?", "rag")).answer
    )
    assert not [f for f in typed.fallbacks if f.step.startswith("aspect:")], typed.fallbacks
    planned = [a for a in typed.aspects if a.label != "overview"]
    assert planned and all(a.error is None and a.answer == "" for a in planned)
    said = [n for step in typed.steps if step.role.startswith("aspect:") for n in step.notes]
    assert said and all("reads as answering the question (at 0.50)" in n for n in said), said
