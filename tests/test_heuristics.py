"""The offline engine's planning heuristics on common phrasings."""

import pytest

from typedrag.engines import heuristics


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
    ],
)
def test_comparison_items_and_purpose(question, purpose, items):
    plan = heuristics.comparison_plan(question)
    assert (plan.purpose, plan.items) == (purpose, items)


def test_comparison_without_items_fails_instead_of_guessing():
    with pytest.raises(ValueError):
        heuristics.comparison_plan("How does it compare?")


def test_reason_and_instruction_sub_queries_keep_the_subject():
    reason = heuristics.reason_plan("Why did the Western Roman Empire fall?")
    assert 2 <= len(reason.sub_queries) <= 5
    assert all("Western Roman Empire" in q for q in reason.sub_queries)
    steps = heuristics.instruction_plan("How do I bake sourdough bread?")
    assert all("sourdough bread" in q for q in steps.sub_queries)


def test_debate_has_for_against_and_neutral_perspectives():
    plan = heuristics.debate_plan("Should we build more nuclear power plants?")
    assert [p.name for p in plan.perspectives] == ["supporters", "critics", "neutral evidence"]
    assert all("nuclear power plants" in p.sub_query for p in plan.perspectives)


def test_experience_keywords():
    plan = heuristics.experience_plan("Any advice for a beginner learning guitar?")
    assert "guitar" in plan.keywords and "guitar" in plan.topic


def test_offline_sentence_split_keeps_abbreviations_and_initials_together():
    # Regression: "St. Clair" was split, and the fragment "Clair River toward Lake Erie." was quoted as an answer.
    from typedrag.engines.offline import _SENTENCE

    text = "It flows from the St. Clair River toward Lake Erie. J. R. R. Tolkien wrote it. Then Dr. Who left! Next one."
    assert _SENTENCE.split(text) == [
        "It flows from the St. Clair River toward Lake Erie.",
        "J. R. R. Tolkien wrote it.",
        "Then Dr. Who left!",
        "Next one.",
    ]
