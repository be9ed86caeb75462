"""The offline engine's planners on common phrasings, the comparison's item queries, and the sentence splitter."""

import pytest

from typedrag.engines.offline import comparison, debate, experience, instruction, reason
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
        ("What are the differences between the Australian and New Zealand flags?", "difference", ["Australian flags", "New Zealand flags"]),
        ("What is the difference between animal and plant cells?", "difference", ["animal cells", "plant cells"]),
        ("Is electric or gas heating cheaper?", "superiority", ["electric heating", "gas heating"]),
        ("Differences between cats and big dogs?", "difference", ["cats", "big dogs"]),
        # A dash sets the question off from the items as a colon does; "it" is the first item's object.
        ("tea vs coffee - how do they compare?", "difference", ["tea", "coffee"]),
        ("AC vs DC electricity – what's the difference?", "difference", ["AC", "DC electricity"]),
        ("Python 2 or Python 3 — which should I learn?", "superiority", ["Python 2", "Python 3"]),
        ("What's the difference between removing a package and purging it?", "difference", ["removing a package", "purging a package"]),
        ("Is it better to repair my old laptop or replace it?", "superiority", ["repair my old laptop", "replace my old laptop"]),
        ("self-hosted-runner vs github-hosted", "difference", ["self-hosted-runner", "github-hosted"]),
    ],
)
def test_comparison_items_and_purpose(question, purpose, items):
    plan = comparison.plan(question)
    assert (plan.purpose, plan.items) == (purpose, items)


@pytest.mark.parametrize(
    ("question", "items", "queries"),
    [
        (
            "Which film came out first, Forgotten Pills or Why Does Herr R. Run Amok?",
            ["Forgotten Pills", "Why Does Herr R. Run Amok"],
            ["Forgotten Pills film came first", "Why Does Herr R. Run Amok film came first"],
        ),
        ("What is the main difference between dysphagia and odynophagia?", ["dysphagia", "odynophagia"], ["dysphagia", "odynophagia"]),
        ("Which is better for a beginner, violin or cello?", ["violin", "cello"], ["violin beginner", "cello beginner"]),
    ],
)
def test_comparison_item_queries_carry_the_question_context_but_no_other_item(question, items, queries):
    assert [item_query(item, question, items) for item in items] == queries


def test_comparison_without_items_fails_instead_of_guessing():
    with pytest.raises(ValueError):
        comparison.plan("How does it compare?")


def test_reason_and_instruction_sub_queries_keep_the_subject():
    plan = reason.plan("Why did the Western Roman Empire fall?")
    assert 2 <= len(plan.sub_queries) <= 5
    assert all("Western Roman Empire" in q for q in plan.sub_queries)
    steps = instruction.plan("How do I bake sourdough bread?")
    assert all("sourdough bread" in q for q in steps.sub_queries)


def test_debate_has_for_and_against_perspectives():
    plan = debate.plan("Should we build more nuclear power plants?")
    assert [p.name for p in plan.perspectives] == ["in favour", "against"]
    assert all("nuclear power plants" in p.sub_query for p in plan.perspectives)


def test_experience_keywords():
    plan = experience.plan("Any advice for a beginner learning guitar?")
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


def test_a_term_line_is_quoted_with_the_sentence_it_heads_and_a_numbered_heading_is_left_out():
    """PDF and HTML passages keep their lines: a glossary term above its definition joins it, while a
    numbered heading left in the text ("6.3 Data frames") was quoted glued to the next sentence."""
    from typedrag.engines.offline.sentences import with_their_fragments

    pieces = split_sentences(
        "6.3 Data frames\nA data frame is a list with class \"data.frame\".\n"
        "global interpreter lock\nThe mechanism used by CPython to run one thread at a time.\n"
        "2.3.2 Data frame objects\nData frames mimic a cases-by-variables matrix."
    )
    assert with_their_fragments(pieces, 70) == [
        'A data frame is a list with class "data.frame".',
        "global interpreter lock; The mechanism used by CPython to run one thread at a time.",
        "Data frames mimic a cases-by-variables matrix.",
    ]
    # a numbered step that ends a sentence is a sentence; a label joins its sentence only within max_words
    assert with_their_fragments(["2 Open the file.", "Aside", "one two three four five six."], 6) == [
        "2 Open the file.", "one two three four five six.",
    ]


def test_a_code_line_or_a_lowercase_numbered_heading_never_heads_the_sentence_after_it():
    """Regression: a shell line above a sentence was joined to it as its label ("$ cd /path/to/upstream-vcs $
    debmake -d -i debuild; Alternatively, ..." on debmake-doc), because the code check came after the label
    join; and "7.12.1 uupdate + tarball" passed as a label, as a numbered heading had to open with a capital."""
    from typedrag.engines.offline.sentences import with_their_fragments

    sentence = "Alternatively, you can build the package with debuild."
    assert with_their_fragments(["$ cd /path/to/upstream-vcs", sentence], 70) == [sentence]
    assert with_their_fragments(["7.12.1 uupdate + tarball", sentence], 70) == [sentence]
    assert with_their_fragments(["3 cups of flour", "Mix them well."], 70) == ["3 cups of flour; Mix them well."]  # no heading


def test_a_comment_and_a_sentence_that_announces_a_listing_are_not_quoted():
    """Regression: "# CPU-bound operations will block the event loop:" passed as a sentence (the sentence-end
    test came before the code test), and "Steps:" numbered "you can use the following command:" without
    the command it announces."""
    from typedrag.engines.offline.sentences import with_their_fragments

    pieces = [
        "# CPU-bound operations will block the event loop:",
        "loop = asyncio.get_running_loop()",
        "To install it, you can use the following command:",
        "apt install reprepro",
        "Run the tests before you upload the package.",
    ]
    assert with_their_fragments(pieces, 70) == ["Run the tests before you upload the package."]
    assert with_their_fragments(["- Notice", "The default is shown below:"], 70) == ["- Notice"]  # no label of an announcement
    # held-out regressions of the first version of these rules (python-docs, r-manuals): a sentence that says
    # something before its colon, and a PDF paragraph that opens with an R prompt, are prose
    kept = [
        "When a coroutine is not scheduled with asyncio.create_task(), asyncio will emit a RuntimeWarning:",
        "> fm2 <- lm(y ~ x1 + x2, data = production) would fit a multiple regression model of y on x1 and x2.",
    ]
    assert with_their_fragments(kept, 70) == kept


def test_a_licence_notice_is_not_quoted():
    """Regression: "Why does R copy objects when I modify them?" quoted the R manuals' front matter,
    "Permission is granted to copy and distribute translations of this manual ..."."""
    from typedrag.engines.offline.sentences import with_their_fragments

    notice = ["Permission is granted to copy and distribute translations of this manual into another language.",
              "Copyright © 1999–2024 R Core Team", "R makes a copy of an object when it is modified."]
    assert with_their_fragments(notice, 70) == [notice[-1]]


def test_a_line_that_ends_no_sentence_is_quoted_only_as_a_list_item():
    """Regression: a program's output in a screen listing was quoted as a sentence ("dpkg-query: no path
    found matching pattern /bin/apt [1]" led an answer), as was a caption ("NFS entry in the /etc/fstab file")."""
    from typedrag.engines.offline.sentences import with_their_fragments

    screen = ["$ dpkg -S /bin/apt", "dpkg-query: no path found matching pattern /bin/apt", "NFS entry in the /etc/fstab file"]
    assert with_their_fragments(screen, 70) == []
    assert with_their_fragments(["- the removal scripts of the package are called", "• its files are deleted"], 70) == [
        "- the removal scripts of the package are called", "• its files are deleted",
    ]
    # a long line is prose that lost its full stop (the R FAQ's "A library is a place (directory) where ...")
    prose = "A library is a place (directory) where R knows to find packages it can use"
    assert with_their_fragments([prose], 70) == [prose]


def test_an_admonitions_title_is_left_out_but_a_term_heads_its_definition():
    """Regression: "Note; The asyncio module provides ..." quoted a Sphinx note's title as the sentence's label."""
    from typedrag.engines.offline.sentences import with_their_fragments

    sentence = "The asyncio module provides a general purpose single-threaded asynchronous library."
    assert with_their_fragments(["Note", sentence], 70) == [sentence]
    assert with_their_fragments(["See also", sentence], 70) == [sentence]
    assert with_their_fragments(["bytecode", "Python source code is compiled into bytecode."], 70) == [
        "bytecode; Python source code is compiled into bytecode."
    ]


def test_a_line_that_ends_with_the_runs_on_into_the_next():
    """Regression: a sentence wrapped across the lines of a screen listing was quoted as its first line
    ("For each AppArmor event, you will be given the [5]")."""
    from typedrag.engines.offline.sentences import with_their_fragments

    pieces = ["For each AppArmor event, you will be given the", "opportunity to choose whether the access should be", "allowed or denied."]
    assert with_their_fragments(pieces, 70) == [
        "For each AppArmor event, you will be given the opportunity to choose whether the access should be allowed or denied."
    ]


def test_a_partial_answers_bullet_goes_but_an_options_dashes_stay():
    # Regression: the bullets were stripped with lstrip("-0123456789. "), which turned "--search file"
    # into "search file" and "2019 saw" into "saw".
    from typedrag.engines.base import Part, WriteTask
    from typedrag.engines.offline.sentences import sentences_of_parts
    from typedrag.prompts import Prompt

    task = WriteTask(role="aggregate:reason", prompt=Prompt("t", "s", "u"), values={}, parts=[
        Part(label="Causes", text="- --search file (or -S) finds the package holding a file. [2]\n2. 2019 saw the change. [3]", query="q"),
    ])
    assert [c.text for c in sentences_of_parts(task)] == ["--search file (or -S) finds the package holding a file.", "2019 saw the change."]
    # a quoted list item ends at its marker, though it ends no sentence: it no longer runs into the next quote
    task.parts[0].text = "- --search file (or -S), which finds the package; [4] A glance at sources.list shows more. [3] [1]"
    assert [(c.text, c.markers) for c in sentences_of_parts(task)] == [
        ("--search file (or -S), which finds the package;", "[4]"), ("A glance at sources.list shows more.", "[3][1]"),
    ]


def test_list_items_and_code_lines_stay_pieces_of_their_own():
    """Regression: consecutive lines that end no sentence were strung together with "; " and the run joined
    the sentence after it, so a Debian Handbook answer quoted a whole sources.list listing as one sentence."""
    from typedrag.engines.offline.sentences import with_their_fragments

    listing = [
        "Example 6.2. /etc/apt/sources.list file for users of Debian Stable",
        "# Security updates",
        "deb http://security.debian.org/ bullseye-security main contrib non-free",
        "deb-src http://security.debian.org/ bullseye-security main contrib non-free",
        "That is how Debian approaches it.",
    ]
    assert with_their_fragments(listing, 70) == [listing[-1]]  # the listing's lines are code, its caption no sentence
    items = ["- --list (or -l), which displays the list of known packages;", "- --contents file.deb, which lists its files;",
             "- --info file.deb, which displays its headers."]
    assert with_their_fragments(items, 70) == items
    assert with_their_fragments(["NOTE More AppArmor profiles", "The apparmor-profiles package contains profiles."], 70) == [
        "NOTE More AppArmor profiles; The apparmor-profiles package contains profiles."
    ]
