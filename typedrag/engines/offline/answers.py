"""How the offline engine answers each step, one function per kind of step: the one place to read how a
question type is answered without a model.

Every answer begins with plain RAG's: the sentences of the question's own passages that the reader
says answer the question, best first (at most `answer_sentences`), or, when none does, the nearest
on-topic ones, marked as not answering. A typed answer adds to that lead only sentences the reader
says answer the question, past a higher bar than the lead's (`added_bar`), *and* play its type's role
(a cause, a step of the procedure, an argument for or against, a sentence that relates the compared items,
one about a single item, advice), and that do not repeat the lead; an addition with none is left out, and the step says so in the trace.
Those additions by role are off unless `OfflineSettings.role_additions` is set (a blind reader preferred plain
RAG where they were added); by default a typed answer adds only a procedure the document numbered itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from typedrag.abstain import question_heading
from typedrag.engines.base import Advised, AspectAnswer, Combined, Compared, Facet, Quote, WriteTask
from typedrag.engines.offline.sentences import (
    Filter,
    Material,
    Sentence,
    about,
    answering,
    listed,
    naming_two,
    on_topic,
    playing,
    repeats,
    standing_alone,
    stating,
)
from typedrag.engines.offline.settings import OfflineSettings
from typedrag.nfq import NFQType
from typedrag.phrasing.questions import amount_asked
from typedrag.reader import Bars, Reader, Role
from typedrag.result import Source

NO_PASSAGES = "The index has no passage that speaks to this question."
NOTHING_RELEVANT = "The retrieved passages do not speak to this."
# The roles a planned aspect of each decomposing type quotes, and the label they are shown under.
FACET_ROLES = {Facet.CAUSES: (Role.CAUSE,), Facet.STEPS: (Role.STEP,), Facet.VIEWS: (Role.FOR, Role.AGAINST)}
# The question type an aspect of each facet answers: the reader reads roles knowing it.
FACET_TYPES = {Facet.CAUSES: NFQType.REASON, Facet.STEPS: NFQType.INSTRUCTION, Facet.VIEWS: NFQType.DEBATE}
# What a typed answer leaves out when additions by the reader's role are off, as the trace says it.
ROLES_OFF = "sentences chosen by the role the reader reads (off: OfflineSettings.role_additions)"
# ... and when the sentences the plan's own searches found are off too; when on, what a step found none of.
ASPECTS_OFF = "sentences the plan's own searches found (off: OfflineSettings.aspect_sentences)"
NONE_BETTER = "the planned aspects found no sentence the reader reads as likelier to answer than the overview's"


@dataclass
class Group:
    """Labelled sentences added to the lead: "Causes:" over a list, or "- For: ..." on one line."""

    label: str
    sentences: list[Sentence]
    style: str = "list"  # "list" (bullets under the label), "steps" (numbered under it), "inline"


@dataclass
class Answer:
    """An extractive answer: the lead paragraph, then any labelled additions."""

    lead: list[Sentence]
    groups: list[Group] = field(default_factory=list)
    supported: bool = True  # False: nothing quoted answers the question, the lead is only the nearest
    best: float = 0.0  # the reader's highest chance of answering among the sentences of the step's whole pool
    dropped: list[str] = field(default_factory=list)  # additions left out, and why
    held_back: str | None = None  # additions the settings leave out (`ROLES_OFF`, `ASPECTS_OFF`)
    filed_under: str | None = None  # the question heading of the entry it answers from (`Written.filed_under`)

    def text(self) -> str:
        if not self.lead and not self.groups:
            return NOTHING_RELEVANT
        lines = [joined(self.lead)] if self.lead else []
        for group in self.groups:
            if group.style == "inline":
                lines.append(f"- {group.label}: " + joined(group.sentences))
            else:
                lines.append(f"{group.label}:")
                marks = (
                    [f"{n}." for n in range(1, len(group.sentences) + 1)]
                    if group.style == "steps"
                    else ["-"] * len(group.sentences)
                )
                lines += [f"{mark} {quoted(s)}" for mark, s in zip(marks, group.sentences)]
        return "\n".join(lines)

    def quotes(self) -> tuple[Quote, ...]:
        return tuple(s.quote() for s in [*self.lead, *(s for g in self.groups for s in g.sentences)])


def quoted(sentence: Sentence) -> str:
    """The sentence and its source's marker; a sentence quoted with the code block it leads into has the marker
    before the block, whose closing fence must end its line."""
    text, fence, block = sentence.text.partition("\n```")
    return f"{text} [{sentence.source}]{fence}{block}"


def joined(sentences: list[Sentence]) -> str:
    """Quoted sentences in a row, a space between two; after a code block, a line break."""
    out = ""
    for sentence in sentences:
        out += ("\n" if out.endswith("```") else " " if out else "") + quoted(sentence)
    return out


def added_by_role_only(facet: Facet, settings: OfflineSettings) -> bool:
    """Whether what a facet's aspects add would be chosen by role alone (causes, for and against), were those
    additions on: off, an aspect adds what the reader is sure answers the question, whatever its role."""
    return facet is not Facet.STEPS and not settings.role_additions


def quoted_from(task: WriteTask, settings: OfflineSettings) -> list[Source]:
    """The sources a step's answer can quote: a comparison's or an advice answer's own passages alone when
    additions by role are off (its lead is all it writes), else all of them."""
    if isinstance(task, Compared | Advised) and not settings.role_additions:
        return own_sources(task)
    return task.sources


def answer(task: WriteTask, reader: Reader, settings: OfflineSettings) -> Answer:
    """The extractive answer of `task`, by its kind (`by_kind`), from the entry filed under the question it asks
    alone when the reader reads that entry as answering it (`the_entry`)."""
    if task.filed_under is not None and not isinstance(task, Combined):
        task = the_entry(task, reader, settings)
    written = by_kind(task, reader, settings)
    if not isinstance(task, Combined):
        written.filed_under = task.filed_under
    return written


def the_entry(task: WriteTask, reader: Reader, settings: OfflineSettings) -> WriteTask:
    """`task` with only the entry filed under the question it asks as its sources (a FAQ's entry whose heading
    reads as the question, `task.filed_under`), when the reader, reading every sentence of the sources against
    the question, reads one of that entry's as on the question's topic (at its on-topic bar): under a heading
    that asks the question, a sentence on its topic is its answer, however tersely it is worded. A placeholder,
    an advert or a note under the heading is not on it; then the heading is forgotten and the sources are read,
    and judged, as any others (docs/lab/2026-12-06-hostile-6.md). The entry's sentences are read here without their
    headings: the reader weighs a heading that asks the question, and would let a placeholder under it through
    (issue 55; what the entry says decides, never where it is filed)."""
    entry = [source for source in task.sources if question_heading(source.section) == task.filed_under]
    numbers = {source.number for source in entry}
    material = Material(task.question, task.sources, reader, settings, headings=False)
    if any(s.source in numbers and s.reading.on_topic >= reader.bars.on_topic for s in material.sentences):
        return replace(task, sources=entry)
    return replace(task, filed_under=None)


def by_kind(task: WriteTask, reader: Reader, settings: OfflineSettings) -> Answer:
    """The extractive answer of `task`, by its kind; a step of a route typedrag does not know is
    answered as plain RAG answers."""
    if isinstance(task, Combined):
        return combined(task, reader.bars, settings)
    if isinstance(task, Compared | Advised):
        # The lead is plain RAG's answer: its own passages read as plain RAG reads them (the reader reads a
        # sentence among the others it is given, so the items' passages would reorder it).
        lead = plain(Material(task.question, own_sources(task), reader, settings), reader.bars, settings)
        if not settings.role_additions:
            lead.held_back = ROLES_OFF if settings.aspect_sentences else f"{ROLES_OFF}; {ASPECTS_OFF}"
            return planned_finds(task, lead, reader, settings)
        material = Material(task.question, task.sources, reader, settings, asked_type(task))
        if isinstance(task, Compared):
            return comparison(task, lead, material, reader.bars, settings)
        return experience(lead, material, reader.bars, settings)
    if isinstance(task, AspectAnswer) and not looks_for_sentences(task.facet, settings):
        return Answer([], supported=False, held_back=ASPECTS_OFF)  # nothing to quote: its passages go unread
    material = Material(task.question, task.sources, reader, settings, asked_type(task))
    match task:
        case AspectAnswer():
            return aspect(task, material, reader.bars, settings)
        case _ if task.filed_under is not None:
            return entry(task, material, settings)
        case _:
            return plain(material, reader.bars, settings)


def looks_for_sentences(facet: Facet, settings: OfflineSettings) -> bool:
    """Whether a planned aspect of `facet` reads its passages for sentences to quote: by role, by the reader's
    surest sentence (`aspect_sentences`), or for a procedure the document numbered (steps, always)."""
    return settings.role_additions or bool(settings.aspect_sentences) or facet is Facet.STEPS


def planned_finds(task: Compared | Advised, lead: Answer, reader: Reader, settings: OfflineSettings) -> Answer:
    """Plain RAG's `lead`, then what the plan's searches found beyond the question's own passages (each compared
    item's, the advice sought) that the reader is sure answers the question: at most `aspect_sentences` for each
    search, none repeating the lead. The lead's passages alone are judged by the relevance bar (`quoted_from`)."""
    beyond = task.sources[len(own_sources(task)) :]
    if not beyond or not lead.supported or not settings.aspect_sentences:
        return lead
    searches = len(task.items) if isinstance(task, Compared) else 1
    material = Material(task.question, beyond, reader, settings)
    found = material.pick(
        settings.aspect_sentences * searches,
        sure(reader.bars, settings),
        better_than(lead.lead),
        standing_alone,
        beside=lead.lead,
    )
    lead.lead = [*lead.lead, *found]
    return lead


def better_than(quoted: list[Sentence]) -> Filter:
    """The reader reads the sentence as likelier to answer than every one of `quoted` (plain RAG's answer): what
    a typed answer adds from the plan's searches is what they found better."""
    best = max((s.answers for s in quoted), default=0.0)
    return lambda s: s.answers > best


def asked_type(task: WriteTask) -> NFQType | None:
    """The type of question a step answers, as far as the step says (None: a plain answer needs no role)."""
    match task:
        case Compared():
            return NFQType.COMPARISON
        case Advised():
            return NFQType.EXPERIENCE
        case AspectAnswer():
            return FACET_TYPES[task.facet]
    return None


def adding(bars: Bars, settings: OfflineSettings) -> Filter:
    """A typed addition is held to a higher bar than the lead: shown under its role's label ("Causes:",
    "Steps:"), a wrong one misleads more than a lead sentence on topic, and where the reader is in doubt the
    typed answer is plain RAG's (`OfflineSettings.added_bar`)."""
    return answering(max(bars.answers, settings.added_bar))


def plain(material: Material, bars: Bars, settings: OfflineSettings) -> Answer:
    """Plain RAG: the sentences that answer, best first, with on-topic ones of their passages after them up to
    `lead_sentences`; none answering, the nearest on-topic ones, marked as not answering. A sentence whose
    subject is in the sentence before it comes with that sentence (`Material.with_antecedents`). A question that
    asks for an amount or a date ("How many ...?", "When did ...?") is answered only by a sentence that states
    one: a sentence on its subject without one is at best the nearest, and the reader's best chance is read
    among those that do."""
    kind = amount_asked(material.question)
    need = [stating(kind)] if kind is not None else []
    best = material.best(*need)
    found = material.pick(settings.answer_sentences, answering(bars.answers), *need)
    if not found:
        nearest = material.pick(settings.nearest_sentences, on_topic(bars.on_topic))
        return Answer(
            material.with_antecedents(nearest, settings.nearest_sentences, bars.on_topic), supported=False, best=best
        )
    resolved = material.with_antecedents(found, settings.lead_sentences, bars.on_topic)
    if not resolved:  # every answering sentence leans on one out of reach: quoted as they are rather than nothing
        return Answer(found, best=best)
    found = resolved
    if len(found) < settings.lead_sentences:  # the reader misses answers more often than it takes noise on topic
        context = [from_sources({s.source for s in found})] if settings.fill_from_answering_passages else []
        more = material.pick(settings.lead_sentences - len(found), on_topic(bars.on_topic), *context, beside=found)
        found = material.with_antecedents(found + more, settings.lead_sentences, bars.on_topic)
    return Answer(found, best=best)


def from_sources(numbers: set[int]) -> Filter:
    """The sentence is quoted from one of the passages numbered `numbers`."""
    return lambda s: s.source in numbers


def entry(task: WriteTask, material: Material, settings: OfflineSettings) -> Answer:
    """The entry of a FAQ filed under the question asked, which the reader read as on its topic (`the_entry`): its
    opening sentences, in its document's order (at most `lead_sentences`), however their wording reads: the
    heading already asks the question, and an entry opens with its answer ("Yes, instead of just running it in
    a console, definitely.")."""
    place = {source.number: passage_place(source.passage_id) for source in task.sources}
    opening = sorted(material.sentences, key=lambda s: (place.get(s.source, 0), s.position))
    return Answer(opening[: settings.lead_sentences], best=material.best())


def passage_place(passage_id: str) -> int:
    """A passage's place in its document (ids end in "#<n>"; 0 when they do not)."""
    tail = passage_id.rsplit("#", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def comparison(task: Compared, lead: Answer, material: Material, bars: Bars, settings: OfflineSettings) -> Answer:
    """Plain RAG's `lead`, then a sentence that relates two of the items, then one point about each item."""
    relation = material.pick(
        1, adding(bars, settings), playing(Role.RELATES), naming_two(list(task.items)), standing_alone, beside=lead.lead
    )
    result = Answer(lead.lead + relation, supported=lead.supported or bool(relation), best=material.best())
    if not relation:
        result.dropped.append("no sentence relates the items")
    titles = {source.number: source.title for source in task.sources}
    for item in task.items:
        others = [other for other in task.items if other != item]
        taken = [*result.lead, *(s for g in result.groups for s in g.sentences)]
        point = material.pick(
            1,
            adding(bars, settings),
            playing(Role.ITEM, Role.RELATES),
            about(item, others, titles),
            standing_alone,
            beside=taken,
        )
        if point:
            result.groups.append(Group(item, point, "inline"))
            result.supported = True
        else:
            result.dropped.append(f"no sentence about {item!r} answers")
    return result


def experience(lead: Answer, material: Material, bars: Bars, settings: OfflineSettings) -> Answer:
    """Plain RAG's `lead`, then advice the passages give."""
    lead.best = material.best()
    advice = material.pick(
        settings.added_sentences, adding(bars, settings), playing(Role.ADVICE), standing_alone, beside=lead.lead
    )
    if advice:
        lead.groups.append(Group("Advice", advice))
        lead.supported = True
    else:
        lead.dropped.append("no sentence gives advice")
    return lead


def aspect(task: AspectAnswer, material: Material, bars: Bars, settings: OfflineSettings) -> Answer:
    """A planned aspect, from its own passages: a procedure the document numbered itself is quoted as its list;
    otherwise, with additions by role on, its passages' sentences of its facet's role that answer; off (the
    default), the sentence the reader is surest answers the question, when it is sure (`aspect_bar`): what the
    plan's search found that the question's own did not (issue 55)."""
    if settings.role_additions:
        found = material.pick(
            settings.added_sentences, adding(bars, settings), playing(*FACET_ROLES[task.facet]), standing_alone
        )
    else:
        found = (
            material.pick(1, adding(bars, settings), playing(Role.STEP), standing_alone, listed)
            if task.facet is Facet.STEPS
            else []
        )
        if not found:
            found = material.pick(settings.aspect_sentences, sure(bars, settings), standing_alone)
    if task.facet is Facet.STEPS and found and found[0].order is not None:
        found = material.ordered_list(found[0], settings.list_steps)
    written = Answer(found, supported=bool(found))
    if not found and not settings.role_additions and not settings.aspect_sentences:
        written.held_back = ASPECTS_OFF
    elif not found and not settings.role_additions:
        written.dropped.append(
            f"a sentence of its passages the reader reads as answering the question (at {max(bars.answers, settings.aspect_bar):.2f})"
        )
    return written


def sure(bars: Bars, settings: OfflineSettings) -> Filter:
    """The reader reads the sentence as answering the question, at its bar and at least `OfflineSettings.aspect_bar`:
    what a planned aspect may add offline, read by no role."""
    return answering(max(bars.answers, settings.aspect_bar))


def combined(task: Combined, bars: Bars, settings: OfflineSettings) -> Answer:
    """The overview (plain RAG's answer) whole, then the aspects' best sentences of their facet's role,
    under its label: "Causes:", numbered "Steps:", or "- For:" and "- Against:"."""
    lead_quotes = [q for part in task.parts if part.lead for q in part.quotes]
    lead = Material.of_quotes(lead_quotes).sentences
    added = Material.of_quotes(q for part in task.parts if not part.lead for q in part.quotes)
    every_quote = [q for part in task.parts for q in part.quotes]
    # Judged as its parts were: a part's reader may have read a sentence it did not quote (off topic, or leaning
    # on one out of reach) as its best, and plain RAG's answer is judged on that.
    bests = [q.answers for q in every_quote] + [part.best for part in task.parts if part.best is not None]
    result = Answer(lead, supported=any(q.answers >= bars.answers for q in lead_quotes), best=max(bests, default=0.0))
    result.filed_under = next((part.filed_under for part in task.parts if part.lead and part.filed_under), None)
    ok = adding(bars, settings)
    if not settings.role_additions:
        return with_aspects(result, lead, added.sentences, task.facet, looked=bool(settings.aspect_sentences))
    if task.facet is Facet.VIEWS:
        for role, label in ((Role.FOR, "For"), (Role.AGAINST, "Against")):
            taken = [*lead, *(s for g in result.groups for s in g.sentences)]
            view = added.pick(1, ok, playing(role), beside=taken)
            if view:
                result.groups.append(Group(label, view, "inline"))
            else:
                result.dropped.append(f"no argument {label.lower()}")
    elif task.facet is Facet.STEPS:
        steps = first_list(added.sentences)
        if not steps and settings.role_additions:
            steps = sorted(
                added.pick(settings.added_sentences, ok, playing(Role.STEP), beside=lead), key=lambda s: s.position
            )
        if steps:
            result.groups.append(Group("Steps", steps, "steps"))
        else:
            result.dropped.append("no step of the procedure")
    else:
        causes = added.pick(settings.added_sentences, ok, playing(Role.CAUSE), beside=lead)
        if causes:
            result.groups.append(Group("Causes", causes))
        else:
            result.dropped.append("no cause")
    result.supported = result.supported or bool(result.groups)
    return result


def with_aspects(
    result: Answer, lead: list[Sentence], added: list[Sentence], facet: Facet, looked: bool = True
) -> Answer:
    """The overview, then what the planned aspects quoted that it does not say: a procedure the document numbered
    (steps), and each aspect's sentence the reader is sure answers, after the overview's own. An overview that
    quotes only the nearest sentences (none answers) is left out when the aspects found what answers. `looked`
    False: no aspect looked for a sentence (`OfflineSettings.aspect_sentences` 0), which the step says instead of
    "found none"."""
    steps = first_list(added) if facet is Facet.STEPS else []
    if not result.supported and (steps or any(sentence not in steps for sentence in added)):
        lead = []
    better = better_than(lead if result.supported else [])
    if steps:
        result.groups.append(Group("Steps", steps, "steps"))
    more: list[Sentence] = []
    for sentence in added:
        if (
            sentence not in steps
            and better(sentence)
            and not any(repeats(sentence, other) for other in [*lead, *steps, *more])
        ):
            more.append(sentence)
    result.lead = [*lead, *more]
    if not steps and not more and looked:
        result.dropped.append(NONE_BETTER)
    elif not steps and not more:
        result.held_back = ASPECTS_OFF
    result.supported = result.supported or bool(steps) or bool(more)
    return result


def first_list(sentences: list[Sentence]) -> list[Sentence]:
    """The first numbered list an aspect quoted whole (items 1, 2, ... in a row), as the steps."""
    listed: list[Sentence] = []
    for sentence in sentences:
        if sentence.order == len(listed) + 1:
            listed.append(sentence)
        elif listed:
            break
    return listed if len(listed) > 1 else []


def own_sources(task: Compared | Advised) -> list[Source]:
    """The question's own passages: the first `lead` sources (all when unknown)."""
    return task.sources[: task.lead or len(task.sources)]
