"""The sentences an extractive answer may quote, the reader's reading of each, and how they are chosen.

A passage's lines keep the kind their document's reader gave them (records.LineKind): prose is split
into sentences, a list item is one sentence of its own (with its place in an ordered list), and code,
tables, headings, captions and notices are never quoted. Each sentence is read by the reader model
against the question: how likely it answers, and what it does (a cause, a step, an argument ...).
An answer is chosen by the reader's score, among the sentences every filter keeps, leaving out one
that repeats a sentence already chosen. Each keeps the number of the passage it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from typedrag.engines.base import Quote
from typedrag.engines.offline.settings import OfflineSettings
from typedrag.nfq import NFQType
from typedrag.phrasing.questions import Amount, states_an_amount
from typedrag.phrasing.words import EXTRAPOSING
from typedrag.phrasing.words import POINTING as _REFERRING
from typedrag.phrasing.words import STANDING_IN as _STANDING_IN
from typedrag.phrasing.words import VERBS_AFTER as _VERBS_AFTER
from typedrag.reader import Piece, Reader, Reading, Role, quoted_pieces
from typedrag.records import LineKind
from typedrag.result import Source
from typedrag.text import terms


@dataclass(frozen=True)
class Sentence:
    """A sentence that may be quoted, where it came from, and what the reader made of it."""

    text: str
    source: int  # the number of the passage it came from
    position: int  # order in the material, for steps kept in document order
    reading: Reading
    order: int | None = None  # its place in an ordered list of its document
    words: frozenset[str] = frozenset()  # its terms, to tell a repeat

    @property
    def answers(self) -> float:
        return self.reading.answers

    def quote(self) -> Quote:
        return Quote(self.text, (self.source,), self.reading.role, self.answers, self.order)


def refers_back(text: str) -> bool:
    """Whether a sentence's subject is in the sentence before it: it opens with a pronoun or a demonstrative,
    or with a quantifier standing for a noun ("Many are ...")."""
    words = [w.strip(",;:()\"'").lower() for w in text.split()[:8]]
    if not words:
        return False
    if words[0] == "it" and len(words) > 1 and words[1] in _VERBS_AFTER and (EXTRAPOSING & set(words[2:])):
        return False  # "It is very important to distinguish ...", "It may happen that ...": "it" stands for nothing
    if words[0] in _REFERRING:
        return True
    return words[0] in _STANDING_IN and len(words) > 1 and words[1] in _VERBS_AFTER


def pieces_of(source: Source, settings: OfflineSettings) -> Iterable[tuple[str, LineKind]]:
    """(text, kind of its line) of each quotable piece of a source: prose sentences, list items and the sentences
    of note boxes, of `min_words` to `max_words` words."""
    return quoted_pieces(source.text, source.lines, settings.min_words, settings.max_words)


class Material:
    """Every quotable sentence of some sources, read against one question."""

    def __init__(
        self,
        question: str,
        sources: list[Source],
        reader: Reader,
        settings: OfflineSettings,
        asked: NFQType | None = None,
        headings: bool = True,
    ) -> None:
        """The quotable pieces of `sources`, read against `question`; `headings` False: each read without the heading
        it is filed under, for what it says alone."""
        self.question = question
        found: list[tuple[Piece, int]] = []
        seen: set[str] = set()
        for source in sources:
            for text, kind in pieces_of(source, settings):
                if text not in seen:
                    seen.add(text)
                    piece = Piece(
                        text, source.title, source.section if headings else "", kind.kind, kind.order, source.number
                    )
                    found.append((piece, source.number))
        readings = reader.read(question, [piece for piece, _ in found], asked)
        self.sentences = [
            Sentence(piece.text, number, position, reading, piece.order, frozenset(terms(piece.text)))
            for position, ((piece, number), reading) in enumerate(zip(found, readings))
        ]

    @classmethod
    def of_quotes(cls, quotes: Iterable[Quote]) -> "Material":
        """The sentences partial answers quoted, with the readings they were quoted on."""
        material = cls.__new__(cls)
        material.question = ""
        material.sentences = [
            Sentence(
                q.text, q.cites[0], position, Reading(q.answers, q.answers, q.role), q.order, frozenset(terms(q.text))
            )
            for position, q in enumerate(quotes)
        ]
        return material

    def pick(self, count: int, *keep: Filter, beside: Iterable[Sentence] = ()) -> list[Sentence]:
        """Up to `count` sentences every filter in `keep` accepts, best read first, none repeating another
        or a sentence `beside` them (already in the answer)."""
        chosen: list[Sentence] = []
        taken = list(beside)
        for sentence in sorted(self.sentences, key=lambda s: -s.answers):
            if len(chosen) == count:
                break
            if all(f(sentence) for f in keep) and not any(repeats(sentence, other) for other in taken + chosen):
                chosen.append(sentence)
        return chosen

    def before(self, sentence: Sentence) -> Sentence | None:
        """The sentence just before `sentence` in its passage (None: it opens what this material holds of it)."""
        index = sentence.position - 1
        if 0 <= index < len(self.sentences) and self.sentences[index].source == sentence.source:
            return self.sentences[index]
        return None

    def with_antecedents(self, chosen: list[Sentence], limit: int, on_topic_bar: float) -> list[Sentence]:
        """`chosen`, each sentence whose subject is in the sentence before it (`refers_back`) quoted right after
        that sentence, which is brought in when it was not chosen and the reader reads it as on topic
        (`on_topic_bar`); otherwise (the sentence before is off topic, refers back itself, or is not in this
        material: it opens a passage) the sentence is left out: "It can be measured as ..." after a sentence on
        economic growth is not about inflation. At most `limit` sentences, cut at the end, never leaving a
        sentence brought in only for one that was cut."""
        placed: list[Sentence] = []
        brought: list[Sentence] = []
        for sentence in chosen:
            if sentence in placed:
                continue
            if not refers_back(sentence.text):
                placed.append(sentence)
                continue
            antecedent = self.before(sentence)
            if antecedent is None or (
                antecedent not in placed
                and (refers_back(antecedent.text) or antecedent.reading.on_topic < on_topic_bar)
            ):
                continue
            if antecedent not in placed:
                placed.append(antecedent)
                brought.append(antecedent)
            placed.insert(placed.index(antecedent) + 1, sentence)
        kept = placed[:limit]
        if len(placed) > limit and kept[-1] in brought:
            kept.pop()
        return kept

    def best(self, *keep: Filter) -> float:
        """The highest chance of answering the reader gave any of these sentences every filter in `keep`
        accepts (0 when there are none)."""
        return max((s.answers for s in self.sentences if all(f(s) for f in keep)), default=0.0)

    def ordered_list(self, around: Sentence, limit: int) -> list[Sentence]:
        """The ordered list `around` is an item of, in its document's order (at most `limit` items)."""
        if around.order is None:
            return [around]
        items = [s for s in self.sentences if s.source == around.source and s.order is not None]
        start = next(i for i, s in enumerate(items) if s is around) - (around.order - 1)
        listed: list[Sentence] = []
        for sentence in items[max(start, 0) :]:  # consecutive numbers from 1: one list, not the next one in the passage
            if sentence.order != len(listed) + 1 or len(listed) == limit:
                break
            listed.append(sentence)
        return listed if around in listed else [around]


Filter = Callable[[Sentence], bool]


def answering(bar: float) -> Filter:
    """The reader says the sentence answers the question."""
    return lambda s: s.answers >= bar


def on_topic(bar: float) -> Filter:
    """The reader says the sentence is at least on the question's topic."""
    return lambda s: s.reading.on_topic >= bar


def playing(*roles: Role) -> Filter:
    """The sentence does one of `roles` for the answer."""
    wanted = frozenset(roles)
    return lambda s: s.reading.role in wanted


def stating(kind: Amount) -> Filter:
    """The sentence states an amount of `kind` (a number, a date): what a "How many ...?" or "When did ...?" asks for."""
    return lambda s: states_an_amount(s.text, kind)


def standing_alone(sentence: Sentence) -> bool:
    """The sentence names its own subject: quoted alone, it can be read (`refers_back`)."""
    return not refers_back(sentence.text)


def listed(sentence: Sentence) -> bool:
    """The sentence is an item of a list its document numbered."""
    return sentence.order is not None


def about(thing: str, others: Iterable[str], titles: dict[int, str]) -> Filter:
    """The sentence is about `thing` (its words, or its passage's title's when it names none of the things
    compared) more than about any of the `others`."""
    mine, theirs = terms(thing), [terms(o) for o in others]

    def named(sentence: Sentence, words: frozenset[str] | set[str]) -> bool:
        ours = len(mine & words)
        return ours > 0 and all(ours >= len(other & words) for other in theirs)

    def keep(sentence: Sentence) -> bool:
        if any(words & sentence.words for words in [mine, *theirs]):
            return named(sentence, sentence.words)
        return named(sentence, terms(titles.get(sentence.source, "")))

    return keep


def naming_two(things: list[str]) -> Filter:
    """The sentence names at least two of the compared `things`."""
    sets = [terms(t) for t in things]
    return lambda s: sum(bool(words & s.words) for words in sets) >= min(2, len(sets))


def repeats(sentence: Sentence, other: Sentence, overlap: float = 0.6) -> bool:
    """True when two sentences say the same: the same text, or most of the shorter one's words."""
    if sentence.text == other.text:
        return True
    shorter = min(len(sentence.words), len(other.words))
    return shorter > 0 and len(sentence.words & other.words) / shorter >= overlap
