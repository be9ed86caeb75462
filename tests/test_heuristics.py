"""The offline plans each strategy reads from common phrasings (typedrag.phrasing), the comparison's item
queries, and the sentence splitter."""

import pytest

from typedrag.strategies import comparison, debate, experience, instruction, reason
from typedrag.strategies.comparison import item_query
from typedrag.text import split_sentences, terms


@pytest.mark.parametrize(
    ("question", "purpose", "items"),
    [
        ("What is the difference between a crocodile and an alligator?", "difference", ["crocodile", "alligator"]),
        ("What are the similarities between cats and dogs?", "similarity", ["cats", "dogs"]),
        ("Which is better, Windows or Linux?", "superiority", ["Windows", "Linux"]),
        ("Is coffee or tea healthier?", "superiority", ["coffee", "tea"]),
        ("comet vs asteroid", "difference", ["comet", "asteroid"]),
        ("How does an Aussie accent compare with a Kiwi accent?", "difference", ["Aussie accent", "Kiwi accent"]),
        ("Differences between TCP, UDP and QUIC?", "difference", ["TCP", "UDP", "QUIC"]),
        # Regressions (issue 12): the lead words were kept as part of the first item.
        ("Is it better to rent or buy a house?", "superiority", ["rent a house", "buy a house"]),
        ("Which is healthier: running or swimming?", "superiority", ["running", "swimming"]),
        ("Should I learn French or Spanish?", "superiority", ["French", "Spanish"]),
        ("How is a virus different from a bacterium?", "difference", ["virus", "bacterium"]),
        ("Compare Judaism, Christianity and Islam.", "difference", ["Judaism", "Christianity", "Islam"]),
        ("Which is better for a beginner, violin or cello?", "superiority", ["violin", "cello"]),
        # Issue 24: a choice asked as "X or Y: which should I use?" is a comparison of superiority.
        ("asyncio or threads: which should I use?", "superiority", ["asyncio", "threads"]),
        # A bare first adjective takes the noun the two items share ("Australian" alone finds no flag).
        (
            "What are the differences between the Australian and New Zealand flags?",
            "difference",
            ["Australian flags", "New Zealand flags"],
        ),
        ("What is the difference between animal and plant cells?", "difference", ["animal cells", "plant cells"]),
        ("Is electric or gas heating cheaper?", "superiority", ["electric heating", "gas heating"]),
        ("Differences between cats and big dogs?", "difference", ["cats", "big dogs"]),
        # A dash sets the question off from the items as a colon does; "it" is the first item's object.
        ("tea vs coffee - how do they compare?", "difference", ["tea", "coffee"]),
        ("AC vs DC electricity – what's the difference?", "difference", ["AC", "DC electricity"]),
        ("Python 2 or Python 3 — which should I learn?", "superiority", ["Python 2", "Python 3"]),
        (
            "What's the difference between removing a package and purging it?",
            "difference",
            ["removing a package", "purging a package"],
        ),
        (
            "Is it better to repair my old laptop or replace it?",
            "superiority",
            ["repair my old laptop", "replace my old laptop"],
        ),
        ("self-hosted-runner vs github-hosted", "difference", ["self-hosted-runner", "github-hosted"]),
    ],
)
def test_comparison_items_and_purpose(question, purpose, items):
    plan = comparison.offline_plan(question)
    assert (plan.purpose, plan.items) == (purpose, items)


@pytest.mark.parametrize(
    ("question", "items", "queries"),
    [
        (
            "Which film came out first, Forgotten Pills or Why Does Herr R. Run Amok?",
            ["Forgotten Pills", "Why Does Herr R. Run Amok"],
            ["Forgotten Pills film came first", "Why Does Herr R. Run Amok film came first"],
        ),
        (
            "What is the main difference between dysphagia and odynophagia?",
            ["dysphagia", "odynophagia"],
            ["dysphagia", "odynophagia"],
        ),
        (
            "Which is better for a beginner, violin or cello?",
            ["violin", "cello"],
            ["violin beginner", "cello beginner"],
        ),
    ],
)
def test_comparison_item_queries_carry_the_question_context_but_no_other_item(question, items, queries):
    assert [item_query(item, question, items) for item in items] == queries


def test_comparison_without_items_fails_instead_of_guessing():
    with pytest.raises(ValueError):
        comparison.offline_plan("How does it compare?")


def test_reason_and_instruction_sub_queries_keep_the_subject():
    plan = reason.offline_plan("Why did the Western Roman Empire fall?")
    assert 2 <= len(plan.sub_queries) <= 5
    assert all("Western Roman Empire" in q for q in plan.sub_queries)
    steps = instruction.offline_plan("How do I bake sourdough bread?")
    assert all("sourdough bread" in q for q in steps.sub_queries)


def test_debate_has_for_and_against_perspectives():
    plan = debate.offline_plan("Should we build more nuclear power plants?")
    assert [p.name for p in plan.perspectives] == ["in favour", "against"]
    assert all("nuclear power plants" in p.sub_query for p in plan.perspectives)


def test_an_offline_debate_plan_reads_a_question_of_several_sentences():
    """The Debian handbook's dh-059 ("Our file server has RAID-1, so we don't bother with anything else. Is that
    reasonable?") failed its offline plan ("a search query must be a single phrase, not several
    sentences") and fell back to plain RAG as a recorded failure: the topic is its content words then."""
    question = "Our file server has RAID 1 and a nightly rsync to a USB disk, nothing else. Is that reasonable backup?"
    plan = debate.offline_plan(question)
    assert plan.topic and "." not in plan.topic and "RAID" in plan.topic
    assert debate.offline_plan("Should we build more nuclear power plants?").topic == "build more nuclear power plants"


def test_experience_keywords():
    plan = experience.offline_plan("Any advice for a beginner learning guitar?")
    assert "guitar" in plan.keywords and "guitar" in plan.topic


def test_sentence_split_keeps_abbreviations_and_initials_together():
    # Regression: "St. Clair" was split, and the fragment "Clair River toward Lake Erie." was quoted as an answer.
    text = "It flows from the St. Clair River toward Lake Erie. J. R. R. Tolkien wrote it. Then Dr. Who left! Next one."
    assert split_sentences(text) == [
        "It flows from the St. Clair River toward Lake Erie.",
        "J. R. R. Tolkien wrote it.",
        "Then Dr. Who left!",
        "Next one.",
    ]


def test_terms_match_a_short_plural_to_its_singular_but_keep_a_words_own_s():
    # Regression: "zoos" stayed "zoos", so "Should zoos exist?" never matched a sentence about a zoo;
    # "virus" was cut to "viru" while "viruses" became "virus".
    assert terms("zoos cats bees sinking") == {"zoo", "cat", "bee", "sink"}
    assert terms("virus viruses glass glasses axis") == {"virus", "glass", "axis"}


def test_sentence_split_ends_a_sentence_after_a_decade_or_an_ordinal():
    # Regression: "1930s." read as the initial "s.", so the Dust Bowl's first two sentences were quoted as one.
    text = "Dust storms struck during the 1930s. The drought came in waves. He finished 5th. Then he left."
    assert split_sentences(text) == [
        "Dust storms struck during the 1930s.",
        "The drought came in waves.",
        "He finished 5th.",
        "Then he left.",
    ]


def test_sentence_split_keeps_numbered_works_and_circa_together():
    # Regression (issue 12): "No. 9" and "c. 1824" cut a sentence in three; an answer quoted "... Violin Op. [5]".
    assert split_sentences("Symphony No. 9 was written c. 1824 in Vienna. His 24 Caprices, Op. 1, followed [2].") == [
        "Symphony No. 9 was written c. 1824 in Vienna.",
        "His 24 Caprices, Op. 1, followed [2].",
    ]
