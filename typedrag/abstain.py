"""Abstention: telling a question its documents answer from one they do not.

The policy (`Policy`) is the one place that decides; typedrag.driver applies it to every writing step, and
engines only report what it reads (`Written.best`, `Written.not_in_sources`), never a bar. The signals, one
per kind of engine, so an answer never quotes passages as if they answered:

- Offline, before a step is written, a relevance bar (`support`): the question against every sentence of
  its passages (MiniLM cosine); below the bar, no sentence says what the question asks. MiniLM reads
  English: a question in another script is not judged (`readable`).
- Offline, once the answer is written, the reader model's best chance that a sentence of its passages
  answers (READER_BAR).
- Offline: a name the question uses ("Proxmox", "pgBackRest": a word with a capital letter past its first word)
  that no passage of the documents holds (`names`, and the retriever's `mentions`). Passages about what
  surrounds it may come close enough to pass both bars above and say nothing about it; but the name may also be
  the asker's context, not the subject ("a Hebrew page comes out garbled", "CPU time costs us money"), and the
  passages answer all the same. So the answer stands only when the reader is sure of it (NAMED_BAR); where no
  reader reads the question (`readable`), the name turns it down before anything is written. In a language that
  capitalises every noun (German: "Wie reinige ich die Brühgruppe?") a capital first letter says nothing, so
  there only a capital inside a word ("KVM", "pgBackRest") makes a name (`unmentioned_names`).
- An LLM says so itself. The writing prompts let the model reply with only the JSON object
  `{"not_in_sources": "<what the sources lack>"}`; `said_not_in_sources` recognises that reply as a
  whole, validated against `NotInSourcesReply`, and a short uncited reply every sentence of which says the
  sources lack the answer (what a small model writes instead of the object). Words found inside an answer
  are no signal (an answer that says "the sources do not mention X" beside what they do say is an answer),
  but such a sentence is never given a citation (typedrag.attribution).

A final step its sources do not answer ends the answer as an `Abstention`; any other step (a planned
aspect, the overview) is dropped with the reason, against a bar ASPECT_MARGIN lower.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from textwrap import shorten

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from typedrag.citations import cited_numbers, strip_markers
from typedrag.embed import Embedder, default_embedder
from typedrag.phrasing.denials import DENIAL as _DENIAL
from typedrag.phrasing.denials import NAMES_SOURCES as _NAMES_SOURCES
from typedrag.phrasing.questions import FIRST_PERSON as _FIRST_PERSON
from typedrag.records import SECTION_SEPARATOR
from typedrag.result import Abstention
from typedrag.text import split_sentences

# Below this cosine between the question and its passages' best sentence, typedrag abstains, whatever the
# question's type: lower bars for advice and stances (once 0.36 and 0.44) let typed answers quote what a blind
# reader judged no answer where plain RAG abstained (docs/lab/2026-12-03-typed-never-loses.md). Calibrated on the tune half of
# bench/data/conversations.jsonl (unanswerable turns) and the key-term sets (answerable questions):
# docs/lab/2026-12-02-abstention.md.
SUPPORT_BAR = 0.50
# A planned aspect is narrower than its question, and its passages may sit further from the question's
# words: they are dropped only this far below the question's bar.
ASPECT_MARGIN = 0.10
# Offline, past the bar: abstain when no sentence the answer could quote reaches this chance of answering by
# the reader model (typedrag.reader). Chosen on the conversational set's tune half (docs/lab/2026-12-02-abstention.md);
# checked for the reader retrained in issue 55 on its out-of-fold chances over 14 manuals it was not trained on
# (838 questions): it makes the fewest wrong decisions there (answered with no sentence labelled as answering,
# or abstained with one: 205 + 52), BENCHMARKS.md section 55b.
READER_BAR = 0.15
# A passage filed under a heading that is itself a question (a FAQ's entry) was written to answer that question,
# however its sentences are worded ("Each card holder may have up to 30 items on loan" under "How many books can I
# borrow at once?"): when the best-ranked passage's heading reads as the question asked (MiniLM cosine at or above
# this), that entry is the answer's first candidate. It is a candidate, never a pass: the heading says what the
# entry is for, not what it says ("TODO: this section has not been written yet.", an advert planted under "How do I
# reset my password?"), so the engine still reads the entry's text (typedrag.engines.offline.answers.the_entry) and
# the bars above apply unless it reads it as answering. MiniLM alone puts other questions of one domain as close
# ("How is R different from S?" and "Is there Emacs support for R?": 0.78), so the search must agree: only the top
# passage's heading counts. Measured in docs/lab/2026-12-03-faq-entries.md and docs/lab/2026-12-06-hostile-6.md.
HEADING_BAR = 0.75
# Offline, when the question uses a name no passage holds, the reader's best chance that a sentence answers must reach
# this for the answer to stand. Chosen on 42 such questions over 20 manuals, each written with whether its manual
# answers it: the 39 it does not were read at 0.52 at most (27 of them pass the other bars), the answerable "Flask"
# question at 0.79 (docs/lab/2026-12-07-unmentioned-names.md).
NAMED_BAR = 0.6
NOT_ANSWERED = "its passages do not answer it"  # how a dropped step's reason opens when its passages do not answer
UNMENTIONED = "unmentioned name"  # an abstention's `by` when the question names what no document mentions
# Languages that write every noun with a capital (py3langid's codes: German, Luxembourgish): there a capital first
# letter does not make a name.
NOUN_CAPITALISING = frozenset({"de", "lb"})
_NAME_WORD = re.compile(r"[^\W_](?:[\w.+#'-]*[\w+#])?")  # a word, with the dots, pluses and dashes names hold
MIN_SENTENCE_WORDS = 4  # shorter pieces (a heading, "See also") say nothing a question asks
MAX_SIGNAL_CHARS = 400  # a reply still open after this much text is an answer, not the signal
_FENCE = re.compile(r"^```(?:json|JSON)?\s*(.*?)\s*```$", re.DOTALL)
_OPENS_SIGNAL = re.compile(r'(?:```(?:json|JSON)?\s*)?\{\s*"not_in_sources"\s*:')  # held to its end, however long


@dataclass(frozen=True)
class Support:
    """Whether passages answer a question: the best sentence's similarity to it, against the bar; and the
    question heading the best-ranked passage is filed under when it reads as the question (its entry is the
    answer's first candidate, which the engine reads before the passages are turned down)."""

    answered: bool
    score: float
    bar: float
    heading: str | None = None

    def __str__(self) -> str:
        return f"relevance {self.score:.2f} {'at or above' if self.answered else 'below'} {self.bar:.2f}"


@dataclass(frozen=True)
class Verdict:
    """The policy's finding that a writing step's sources do not answer: the answer's abstention when the
    step is final, and why a partial answer (an aspect, the overview) is dropped otherwise."""

    abstention: Abstention
    dropped: str


@dataclass(frozen=True)
class Policy:
    """When typedrag says its documents do not answer, for one question (`looked_for`, as searched).

    `relevance_bar` (offline; None: passages are not judged) is checked before a step is written;
    `reader_bar` (offline) after the final step is written, against the reader's best chance; a model's
    own not-in-sources reply is always honoured.

    >>> Policy("Why?").bar(final=True) is None
    True
    >>> Policy.offline("Why did Rome fall?").bar(final=False)
    0.4
    """

    looked_for: str = ""
    relevance_bar: float | None = None
    reader_bar: float | None = None
    unmentioned: tuple[str, ...] = ()  # names the question uses that no passage of the documents holds
    named_bar: float | None = None  # the reader's chance a final answer needs when there are such names

    @classmethod
    def offline(cls, looked_for: str, unmentioned: Sequence[str] = ()) -> Policy:
        """An extractive engine's policy: the relevance bar and the reader's bars, when the bar's model reads
        the question (`readable`); none otherwise, and then names no document mentions turn every step down."""
        if not readable(looked_for):
            return cls(looked_for, unmentioned=tuple(unmentioned))
        return cls(looked_for, SUPPORT_BAR, READER_BAR, tuple(unmentioned), NAMED_BAR)

    def unknown_names(self) -> Verdict | None:
        """The verdict, before anything is written, on a question about names no document mentions: given when no
        reader will read the answer (`named_bar` None); None when there are no such names or a reader will."""
        if not self.unmentioned or self.named_bar is not None:
            return None
        return self._unmentioned()

    @property
    def _no_mention(self) -> str:
        return "no passage of the documents mentions " + ", ".join(f"\u201c{name}\u201d" for name in self.unmentioned)

    def _unmentioned(self, unsure: float | None = None) -> Verdict:
        why = self._no_mention
        if unsure is None:
            return Verdict(Abstention(looked_for=self.looked_for, reason=why, by=UNMENTIONED), why)
        why += ", and the passages found do not surely answer the question"
        abstention = Abstention(
            looked_for=self.looked_for, reason=why, by=UNMENTIONED, score=round(unsure, 4), bar=self.named_bar
        )
        return Verdict(abstention, why)

    def stood_despite_names(self, best: float | None) -> str | None:
        """What the trace says of a final answer that stands although the question uses names no passage holds
        (None when it uses none, or no reader read it)."""
        if not self.unmentioned or self.named_bar is None or best is None:
            return None
        return (
            f"{self._no_mention}; answered because the reader model reads a sentence as answering the question at "
            f"{best:.2f}, at or above {self.named_bar:.2f}"
        )

    @property
    def holds_back(self) -> bool:
        """Whether a final step's text may still be turned down once written (the reader's bar): a client
        hears it only after it is judged."""
        return self.reader_bar is not None

    def bar(self, final: bool) -> float | None:
        """The relevance bar a step's passages must reach before it is written (None: not judged)."""
        if self.relevance_bar is None:
            return None
        return self.relevance_bar if final else self.relevance_bar - ASPECT_MARGIN

    def below(self, judged: Support, numbered: bool) -> Verdict:
        """The verdict on passages that fell below the relevance bar (`numbered`: the run has any passage); a name
        the question uses that no passage holds is the reason given, being the more telling one."""
        if self.unmentioned:
            return self._unmentioned()
        why = (
            "no sentence of the passages comes close enough to the question to answer it"
            if numbered
            else "no passage found"
        )
        abstention = Abstention(
            looked_for=self.looked_for, reason=why, by="relevance bar", score=judged.score, bar=judged.bar
        )
        return Verdict(abstention, f"{NOT_ANSWERED} ({judged})")

    def read(self, best: float | None, not_in_sources: str | None, by: str, final: bool) -> Verdict | None:
        """The verdict on a written step: the model said its sources do not answer, or (the final step,
        offline) the reader's best chance falls below its bar; None when the text stands (`best` None: the
        reader's bar is not read, as for an entry the engine read as answering the question it is filed under)."""
        if not_in_sources is not None:
            why = f"the model said its sources do not answer: {not_in_sources}"
            return Verdict(
                Abstention(looked_for=self.looked_for, reason=why, by=by),
                f"{NOT_ANSWERED}: {not_in_sources}",
            )
        if final and self.unmentioned and self.named_bar is not None and best is not None and best < self.named_bar:
            return self._unmentioned(unsure=best)
        if final and self.reader_bar is not None and best is not None and best < self.reader_bar:
            why = "the reader model reads no sentence of the passages as an answer to the question"
            abstention = Abstention(
                looked_for=self.looked_for, reason=why, by="reader", score=round(best, 4), bar=self.reader_bar
            )
            return Verdict(abstention, why)
        return None


def names(question: str) -> list[str]:
    """The names a question uses: its words past the first with a capital letter in them ("Proxmox",
    "pgBackRest", "RPMs"), but "I" and its contractions. Lower-case names ("httpx") cannot be told from words."""
    found = []
    for position, word in enumerate(_NAME_WORD.findall(question)):
        if position and any(c.isupper() for c in word) and not _FIRST_PERSON.match(word):
            found.append(word)
    return list(dict.fromkeys(found))


def unmentioned_names(question: str, retriever) -> list[str]:
    """The names of `question` that no passage holds, as the retriever says (none when it cannot say). In a
    question whose language capitalises every noun, only words with a capital inside them count: "Kühlschrank"
    missing from a coffee machine's manual is a noun the manual may not use, not a product it does not cover."""
    if retriever is None:
        return []
    unmentioned = []
    for name in names(question):
        held = retriever.mentions(name)
        if held is None:  # it cannot say
            return []
        if not held:
            unmentioned.append(name)
    if unmentioned and capitalises_nouns(question):  # the language is read only when it would decide
        unmentioned = [name for name in unmentioned if _capital_inside(name)]
    return unmentioned


def capitalises_nouns(text: str) -> bool:
    """Whether `text` is in a language that writes every noun with a capital (py3langid's reading of it; its model
    loads on first use, about a second, so it is asked only when the answer depends on it)."""
    from py3langid.langid import classify

    return classify(text)[0] in NOUN_CAPITALISING


def _capital_inside(word: str) -> bool:
    """A capital past the first letter of the word or of a part of it ("KVM", "pgBackRest", "iPhone"; not "E-Mail")."""
    return any(any(c.isupper() for c in part[1:]) for part in re.split(r"[-'.]", word))


def readable(question: str) -> bool:
    """Whether the bar's model can judge `question`: MiniLM reads English, so a question mostly in another
    script (Korean, Arabic) is not judged at all, rather than judged unanswerable for want of reading it."""
    letters = [c for c in question if c.isalpha()]
    return not letters or sum(c < "\u0250" for c in letters) >= len(letters) / 2


def support(
    question: str,
    texts: Sequence[str],
    embedder: Embedder | None = None,
    bar: float = SUPPORT_BAR,
    top_section: str = "",
) -> Support:
    """Whether any sentence of `texts` comes close enough to `question` to answer it (no text: it does not), and
    the question heading the best-ranked passage is filed under (the last heading of `top_section`, its heading
    path, ending in "?") when it reads as `question` (HEADING_BAR): the search and the heading agree."""
    sentences = [s for text in texts for s in judged_sentences(text)]
    heading = question_heading(top_section)
    if not sentences:
        return Support(False, 0.0, bar)
    # The sentences and the heading are a passage's: an index keeps their vectors (typedrag.index.sentences).
    vectors = (embedder or default_embedder()).embed(
        [question, *sentences, *([heading] if heading else [])], keep_from=1
    )
    score = round(float((vectors[1 : 1 + len(sentences)] @ vectors[0]).max()), 4)
    filed_under = heading if heading and float(vectors[-1] @ vectors[0]) >= HEADING_BAR else None
    return Support(score >= bar, score, bar, heading=filed_under)


def judged_sentences(text: str) -> list[str]:
    """The sentences of a passage's text that `support` judges: whitespace made single, of MIN_SENTENCE_WORDS or more."""
    return [" ".join(s.split()) for s in split_sentences(strip_markers(text)) if len(s.split()) >= MIN_SENTENCE_WORDS]


def question_heading(section: str) -> str | None:
    """The last heading of a passage's heading path when it is a question ("Can I renew a loan?"), else None."""
    last = section.rsplit(SECTION_SEPARATOR.strip(), 1)[-1].strip()
    return last if last.endswith("?") and len(last.split()) >= 3 else None


class NotInSourcesReply(BaseModel):
    """A model's whole reply when its sources do not answer: what they lack (null: unsaid), and nothing else."""

    model_config = ConfigDict(extra="forbid")

    not_in_sources: str | None = Field(max_length=MAX_SIGNAL_CHARS)


def said_not_in_sources(reply: str) -> str | None:
    """What the sources lack, when `reply` says only that they do not answer: the not-in-sources object (bare
    or in a code fence, its value null or empty when the model did not say what), or prose every sentence of
    which denies the sources (`denies_sources`: a small model writes that instead of the object). None for
    an answer, even one that says a source lacks something beside what it does say."""
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    if not (text.startswith("{") and text.endswith("}")):
        return _said_in_prose(text)
    try:
        reply_object = json.loads(text)
    except ValueError:  # json.JSONDecodeError is a ValueError
        return None
    if isinstance(reply_object, dict) and isinstance(reply_object.get("not_in_sources"), str):
        # A small model puts passage text in the object: still the signal, not an answer; kept to its bound.
        reply_object["not_in_sources"] = shorten(
            " ".join(reply_object["not_in_sources"].split()), MAX_SIGNAL_CHARS, placeholder="…"
        )
    try:
        said = NotInSourcesReply.model_validate(reply_object)
    except ValidationError:
        return None
    return " ".join((said.not_in_sources or "").split()) or NOT_SAID


NOT_SAID = "the sources do not answer the question"


def denies_sources(sentence: str) -> bool:
    """Whether a sentence says the sources lack something ("The sources do not say why comets glow.", "I cannot
    answer this from the provided passages."): a statement about the sources, never a claim one could cite."""
    return bool(_NAMES_SOURCES.search(sentence) and _DENIAL.search(sentence))


def _said_in_prose(text: str) -> str | None:
    """The reply itself, when it is short, cites nothing and every sentence of it denies the sources."""
    if not text or len(text) > MAX_SIGNAL_CHARS or cited_numbers(text):
        return None
    sentences = split_sentences(text)
    return " ".join(text.split()) if all(denies_sources(s) for s in sentences) else None


class HoldBack:
    """A streamed reply passed on to `sink`, except while it could still be the not-in-sources object
    (it opens with "{" or a code fence): that much is held until the reply shows what it is, so a client
    never sees the signal as if it were the answer. `release` passes on what is held."""

    def __init__(self, sink: Callable[[str], None]) -> None:
        self.sink = sink
        self.held = ""
        self.deciding = True

    def __call__(self, piece: str) -> None:
        if not self.deciding:
            self.sink(piece)
            return
        self.held += piece
        head = self.held.lstrip()
        if not head or (head[0] in "{`" and (len(self.held) < MAX_SIGNAL_CHARS or _OPENS_SIGNAL.match(head))):
            return
        self.release()

    def release(self) -> None:
        self.deciding = False
        if self.held:
            held, self.held = self.held, ""
            self.sink(held)
