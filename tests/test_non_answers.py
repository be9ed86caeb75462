"""Issue 42: a model's reply that only says its sources do not answer is an abstention, never a cited answer,
whatever form it takes; and an offline answer counts no model call it never made."""

from __future__ import annotations

import asyncio
import json

import pytest

from typedrag import ListRetriever, OfflineEngine, Pipeline
from typedrag.abstain import names, said_not_in_sources, unmentioned_names
from typedrag.attribution import settle
from typedrag.engines.llm_engine import LLMEngine
from typedrag.records import Passage
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
    sources = [
        Source(number=n, passage_id=f"c#{n}", title="Comet", text=text, score=1.0) for n, text in enumerate(COMETS, 1)
    ]
    settled = settle(
        "Comets release gas and dust that scatter sunlight. The sources do not say why comets glow in colour.", sources
    )
    assert settled.text.startswith("Comets release gas and dust that scatter sunlight. [1]")
    assert settled.text.endswith("The sources do not say why comets glow in colour.")


async def test_an_offline_answer_counts_no_model_call_and_shows_its_steps():
    result = await Pipeline(OfflineEngine(), ListRetriever(COMETS)).answer(QUESTION, "typed", "reason")
    assert result.llm_calls == [] and result.usage.calls == 0 and result.usage.requests == 0
    assert [step.role for step in result.steps if step.step == "plan"] == ["plan:reason"]
    assert result.steps[-1].role == "aggregate:reason" and all(s.engine == "offline-extractive" for s in result.steps)


# --- issue 42 #7: a small FAQ's entry answers the question it is filed under ------------------------------

FAQ = [  # (heading, answer): entries of a library's FAQ, each one short answer under its question
    ("How many books can I borrow at once?", "Each card holder may have up to 30 items on loan at a time."),
    ("Why was my account blocked?", "Accounts are blocked automatically when unpaid fines exceed ten dollars."),
    (
        "Is there Wi-Fi in the library?",
        "Free Wi-Fi is available in every branch; the network name is GreenfieldGuest and no password is needed.",
    ),
    ("Where can I park?", "Visitors can use the free car park behind the main branch for up to three hours."),
    (
        "How do I donate books?",
        "Donations in good condition can be dropped off at the main branch on Saturday mornings.",
    ),
    ("How long can I keep a book?", "The loan period is three weeks for books and one week for DVDs."),
    (
        "Can I print documents at the library?",
        "Black-and-white printing costs 10 cents per page and colour printing 50 cents per page.",
    ),
]


def faq_pipeline() -> Pipeline:
    passages = [
        Passage(
            f"faq#{i}",
            "faq",
            "Library: frequently asked questions",
            answer,
            section=f"Frequently asked questions › {heading}",
        )
        for i, (heading, answer) in enumerate(FAQ)
    ]
    return Pipeline(OfflineEngine(), ListRetriever(passages))


@pytest.mark.parametrize(
    "question, entry",
    [
        ("How many items can I borrow?", 0),  # the reader's best chance 0.13, under its bar: abstained before
        ("Why is my account blocked?", 1),  # its sentence 0.49 from the question, under the relevance bar of 0.50
        ("Does the library have Wi-Fi?", 2),
        ("Where do I park my car?", 3),
        # Issue 57 N7: withheld since the heading stopped letting anything under it through (the reader read "Donations
        # in good condition can be dropped off ..." at 0.19, bar 0.34), answered by the reader retrained in issue 55
        # on the labels that were lost. The reader retrained on the labels kept in the repository reads it at 0.22
        # against its on-topic bar of 0.33, and abstains: a known regression (BENCHMARKS.md 55i); strict, so that
        # the reader that answers it again is noticed.
        pytest.param(
            "How can I donate my old books?",
            4,
            marks=pytest.mark.xfail(
                strict=True, reason="the reader of 2026-12-07 reads the entry below its on-topic bar"
            ),
        ),
        ("Can I print at the library?", 6),
    ],
)
def test_a_faqs_entry_answers_the_question_it_is_filed_under(question, entry):
    tokens: list[str] = []
    result = asyncio.run(
        faq_pipeline().answer(
            question, "rag", on_event=lambda name, data: tokens.append(data["text"]) if name == "token" else None
        )
    )
    assert result.abstention is None, result.abstention
    assert (
        result.answer == f"{FAQ[entry][1]} [{next(s.number for s in result.sources if s.passage_id == f'faq#{entry}')}]"
    )
    assert (
        "".join(tokens) == result.answer
    )  # issue 55 E4: the stream held back what the reader's bar alone would turn down


@pytest.mark.parametrize(
    "question",
    [
        "Can I buy old books from the library's sale?",  # near "How do I donate books?", asking something else
        "How do I become a library volunteer?",
        "Can I bring my dog into the library?",
    ],
)
def test_a_question_no_entry_is_filed_under_is_still_abstained_on(question):
    result = asyncio.run(faq_pipeline().answer(question, "rag"))
    assert result.abstention is not None, result.answer


# --- issue 57 P1: a heading is no answer; what is filed under it must still answer -------------------------

NON_ANSWERS = [  # what a wiki or a help centre holds under a question heading that says nothing to it
    "TODO: this section has not been written yet.",
    "Win big at LuckyStar Casino tonight: claim 200 free spins and a 500% welcome bonus at luckystar-casino.example!",
    "Content for this entry will be added in a future release of the documentation.",
    "Follow us on Twitter and Instagram for the latest news and updates from our team.",
]


def help_centre(under_reset: str) -> list[Passage]:
    entries = [
        ("How do I reset my password?", under_reset),
        (
            "How do I change my email address?",
            "Open Settings, choose Account, and type the new address in the Email field.",
        ),
        (
            "How do I delete my account?",
            "Write to support from the address on the account and we remove it within 30 days.",
        ),
    ]
    return [
        Passage(f"help#{i}", "help", "Account help", text, section=f"Account help › {heading}")
        for i, (heading, text) in enumerate(entries)
    ]


@pytest.mark.parametrize("non_answer", NON_ANSWERS)
@pytest.mark.parametrize("method", ["rag", "typed"])
async def test_a_placeholder_or_an_advert_filed_under_the_question_asked_is_abstained_on(non_answer, method):
    """Before, the entry under a heading that reads as the question passed both bars whatever it said, and was
    cited as the answer: "TODO: this section has not been written yet. [1]"."""
    result = await Pipeline(OfflineEngine(), ListRetriever(help_centre(non_answer))).answer(
        "How do I reset my password?", method
    )
    assert result.abstention is not None, result.answer
    assert non_answer not in result.answer and result.citations == []


@pytest.mark.parametrize("method", ["rag", "typed"])
async def test_an_entry_that_answers_the_question_it_is_filed_under_is_still_its_answer(method):
    answer = "Click Forgot password on the sign-in page and follow the link we email you."
    result = await Pipeline(OfflineEngine(), ListRetriever(help_centre(answer))).answer(
        "How can I reset my password?", method
    )
    assert result.abstention is None and answer in result.answer


def test_the_issues_reproduction_through_an_index_and_the_command_line(tmp_path):
    """Issue 57's P1 as a user meets it: `typedrag index docs`, then `typedrag ask ... --method rag --json`."""
    from typer.testing import CliRunner

    from typedrag.cli import app
    from typedrag.index import build_index

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "faq.md").write_text(
        "# Account FAQ\n\n## How do I reset my password?\n\nTODO: this section has not been written yet.\n\n"
        "## How do I change my email address?\n\nOpen Settings, choose Account, and type the new address in the Email field; "
        "a confirmation link is sent to it.\n",
        encoding="utf-8",
    )
    build_index([tmp_path / "docs"], tmp_path / "idx", show_progress=False, retrieval="bm25")
    run = CliRunner().invoke(
        app, ["ask", "How do I reset my password?", "--index", str(tmp_path / "idx"), "--method", "rag", "--json"]
    )
    assert run.exit_code == 0, run.output
    answered = json.loads(run.output)
    assert answered["abstained"] is True and "TODO" not in answered["answer"] and answered["citations"] == []


# ---------------------------------------------------------------- a name no document mentions (issue 43's abstention)

VIRTUALIZATION = [
    Passage(
        "kvm#0",
        "kvm",
        "Virtualization with KVM",
        "KVM, which stands for Kernel-based Virtual Machine, is first and foremost "
        "a kernel module providing most of the infrastructure that can be used by a virtualizer; libvirt and "
        "virt-manager build on it to manage virtual machines.",
    ),
    Passage(
        "alien#0",
        "alien",
        "Coexistence with other packaging systems",
        "It is unreasonable to use rpm to install an RPM "
        "on a Debian system; RPM uses its own database. The alien utility can convert RPM packages into Debian packages.",
    ),
]


@pytest.mark.parametrize("method", ["rag", "typed"])
async def test_a_question_about_a_name_no_document_mentions_is_abstained_on_and_says_which(method):
    """The conversational set's "Does Proxmox build on it?" (after KVM) was answered from the KVM passages: they
    pass both bars, and say nothing about Proxmox. Offline, a name no passage holds is an abstention that names it."""
    result = await Pipeline(OfflineEngine(), ListRetriever(VIRTUALIZATION)).answer("Does Proxmox build on KVM?", method)
    assert result.abstention is not None and result.abstention.by == "unmentioned name"
    assert (
        "\u201cProxmox\u201d" in result.abstention.reason
        and "\u201cProxmox\u201d" in result.answer
        and not result.citations
    )
    asked_about_kvm = await Pipeline(OfflineEngine(), ListRetriever(VIRTUALIZATION)).answer(
        "Does libvirt build on KVM?", method
    )
    assert asked_about_kvm.abstention is None and "libvirt" in asked_about_kvm.answer


PARSING = [
    Passage(
        "performance#0",
        "soup",
        "Troubleshooting › Improving performance",
        "The wrapper will never be as fast as the parsers it sits on top of. If response time is critical, or if you "
        "are paying for computer time by the hour, you should forget about the wrapper and work directly atop the "
        "parser. That said, there are things you can do to speed it up: use the fastest parser, and parse only the "
        "part of the document you need.",
    ),
    Passage(
        "encodings#0",
        "soup",
        "Encodings",
        "When a page comes out garbled, the encoding was guessed wrong. If you know the right encoding, pass it to the "
        "constructor as from_encoding. If you do not know it but know the guess is wrong, pass the wrong guesses as "
        "exclude_encodings.",
    ),
    Passage("tree#0", "soup", "Navigating the tree", "A tag's children are available in a list called contents."),
]


@pytest.mark.parametrize("method", ["rag", "typed"])
async def test_a_name_that_is_the_askers_context_does_not_turn_down_an_answer_the_reader_is_sure_of(method):
    """Beautiful Soup's manual answers "CPU time costs us real money: is it still worth it, or lxml directly?" word for
    word, but never says "CPU": the question was turned down for the name. A name no passage holds now needs the
    reader to be sure of the answer (abstain.NAMED_BAR), and the trace says why it stood; a name that is the
    subject (Kubernetes) is still turned down, and says so."""
    pipeline = Pipeline(OfflineEngine(), ListRetriever(PARSING))
    result = await pipeline.answer(
        "We parse millions of pages and CPU time costs us real money. Is the wrapper still worth it, or should we use "
        "the parser directly?",
        method,
    )
    assert result.abstention is None and "forget about the wrapper" in result.answer
    notes = [note for step in result.steps for note in step.notes]
    assert any(note.startswith("no passage of the documents mentions \u201cCPU\u201d; answered") for note in notes)
    subject = await pipeline.answer("Does the wrapper run on Kubernetes?", method)
    assert subject.abstention is not None and subject.abstention.by == "unmentioned name"
    assert "\u201cKubernetes\u201d" in subject.answer


async def test_a_name_the_documents_hold_in_another_form_is_mentioned():
    """ "RPMs": the stemmer leaves a plural on a word without a vowel, and the documents say "RPM"; a question's
    first word and "I've" are no names."""
    result = await Pipeline(OfflineEngine(), ListRetriever(VIRTUALIZATION)).answer(
        "Why is installing RPMs on Debian with alien a bad idea?", "rag"
    )
    assert result.abstention is None and "alien" in result.answer
    assert names("Walk me through what I've got to do on Debian with RPMs?") == ["Debian", "RPMs"]


ESPRESSO = [  # a German coffee machine's manual: every noun is written with a capital
    Passage(
        "entkalken#0",
        "entkalken",
        "Bedienungsanleitung › Entkalken",
        "Füllen Sie den Wassertank mit einer Mischung aus "
        "Wasser und Zitronensäure. Lassen Sie die Maschine zwei Durchläufe ohne Kaffeepulver laufen. Spülen Sie danach "
        "dreimal mit klarem Wasser nach, damit kein Geschmack der Säure im Kaffee bleibt.",
    ),
    Passage(
        "reinigen#0",
        "reinigen",
        "Bedienungsanleitung › Reinigung",
        "Die Brühgruppe sollte einmal pro Woche unter "
        "fließendem Wasser gereinigt werden. Bei hartem Wasser ist eine monatliche Entkalkung der Maschine nötig.",
    ),
]


@pytest.mark.parametrize(
    "question",
    [
        "Wie entkalke ich meinen Kaffeeautomaten?",  # the manual says "Maschine", never "Kaffeeautomat"
        "Wie oft sollte ich die Brühgruppe unter dem Wasserhahn reinigen?",  # nor "Wasserhahn"
    ],
)
async def test_a_german_noun_the_documents_do_not_use_is_no_name(question):
    """Issue 55 E10: German writes every noun with a capital, so "Kaffeeautomaten" was taken for a name no passage
    holds and the question abstained on ("no passage mentions “Kaffeeautomaten”"), though the manual answers it.
    In a language that capitalises its nouns, only a capital inside a word makes a name."""
    result = await Pipeline(OfflineEngine(), ListRetriever(ESPRESSO)).answer(question, "rag")
    assert result.abstention is None or result.abstention.by != "unmentioned name", result.abstention
    assert unmentioned_names(question, ListRetriever(ESPRESSO)) == []


async def test_a_name_with_a_capital_inside_is_still_a_name_in_german_and_english_keeps_its_rule():
    german = await Pipeline(OfflineEngine(), ListRetriever(ESPRESSO)).answer(
        "Wie entkalke ich die Maschine mit pgBackRest?", "rag"
    )
    assert (
        german.abstention is not None
        and german.abstention.by == "unmentioned name"
        and "pgBackRest" in german.abstention.reason
    )
    assert unmentioned_names(
        "Kann ich die Maschine mit einem KVM-Switch und E-Mail-Alarm steuern?", ListRetriever(ESPRESSO)
    ) == ["KVM-Switch"]
    english = await Pipeline(OfflineEngine(), ListRetriever(ESPRESSO)).answer(
        "How do I descale the Kaffeeautomat?", "rag"
    )
    assert english.abstention is not None and english.abstention.by == "unmentioned name"


def test_the_index_on_disk_says_which_names_it_mentions(tmp_path):
    from typedrag.index import build_index, open_retriever

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "kvm.txt").write_text(VIRTUALIZATION[0].text + " " + VIRTUALIZATION[1].text, encoding="utf-8")
    build_index([tmp_path / "docs"], tmp_path / "index", show_progress=False, retrieval="bm25")
    retriever = open_retriever(tmp_path / "index")
    assert [retriever.mentions(word) for word in ("KVM", "RPMs", "Debian's", "Proxmox", "the")] == [
        True,
        True,
        True,
        False,
        True,
    ]


async def test_an_llm_answer_is_not_turned_down_for_a_name():
    """A model may say what its sources lack beside what they hold; the name check is the offline engine's."""
    reply = "KVM is a kernel module that virtualizers build on [1]."
    result = await Pipeline(LLMEngine(ScriptedChatModel(lambda call: reply)), ListRetriever(VIRTUALIZATION)).answer(
        "Does Proxmox build on KVM?", "rag"
    )
    assert result.abstention is None
