"""Choosing sentences: the candidates, how each is scored for a section, and the layout of the answer.

A sentence is scored for a section by its meaning (MiniLM cosine to the section's query), the query's
rare words it holds, whether it comes from the article the query names, and whether it has the
section's shape; maximal marginal relevance keeps chosen sentences unlike each other, and no sentence
serves two sections. Each keeps the number of the passage it came from, so nothing is invented.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from typedrag.citations import cited_numbers, strip_markers
from typedrag.embed import Embedder
from typedrag.engines.base import Extract, Section, WriteTask
from typedrag.engines.offline.settings import OfflineSettings
from typedrag.result import Source
from typedrag.text import split_sentences, terms

_SENTENCE_END = re.compile(r"[.!?:][\"'”’)\]]*$")
# A numbered heading kept in a passage's text ("6.3 Data frames", "7.12.1 uupdate + tarball", "2 Objects"):
# the section path already says where the passage is, and quoted, it reads as noise. A single number
# must open a capitalised word, so "3 cups of flour" stays a line of its own.
_NUMBERED_HEADING = re.compile(r"^(?:(?:\d+\.)+\d+\s+\S+|\d+\s+[A-Z]\S*)(?:\s+\S+){0,8}$")
# The bullet or step number a partial answer's line opens with; never an option's dashes ("--search") or a year.
_BULLET = re.compile(r"^\s*(?:[-•*]|\d{1,2}[.)])\s+")
# A line of a listing, not prose: it opens as a comment or a shell prompt does (even when it ends like a
# sentence, "# CPU-bound operations will block the event loop:"); or it ends no sentence and opens as another
# prompt does or holds a URL. (A PDF joins an example's "> fm <- lm(y ~ x)" with the prose after it.)
_CODE_OPENING = re.compile(r"^\s*[#$]")
_CODE_LINE = re.compile(r"https?://|^\s*[>%]")
# A sentence that only announces a listing ("you can use the following command:"): quoted alone, it promises
# what the answer does not hold. One that says something first ("... asyncio will emit a RuntimeWarning:") stays.
_ANNOUNCES = re.compile(r"\b(?:following|as follows|below|like this|like so)\b[^.!?]*:[\"'”’)\]]*$", re.I)
# A short line that ends no sentence and is no list item is a caption, a heading or a screen's line
# ("dpkg-query: no path found matching pattern /bin/apt"); a longer one is prose that lost its full stop.
_SHORT_LINE = 12
_AFTER_MARKERS = re.compile(r"(?<=\])\s+(?!\[)")  # where a quoted piece "... [4]" ends and the next begins
# A line that ends with a word no sentence ends with was broken where a screen or a listing wrapped it
# ("For each AppArmor event, you will be given the" / "opportunity to choose ..."): it runs on into the next.
_RUNS_ON = re.compile(r"\b(?:a|an|the|of|to|and|or|with|for|in|by|from|that|is|are|be|as|on|at)$", re.I)
# An admonition's title ("Note", "Warning", "See also") says how to read the text below it, not what it is
# about: it is left out, where a term above its definition is quoted with it.
_ADMONITION = re.compile(r"(?:note|notes|warning|tip|hint|important|caution|attention|danger|example|see also|seealso)[.:]?", re.I)
# A licence or copyright notice, as every manual's front matter carries one: it answers no question about
# the manual's subject ("Why does R copy objects?" quoted "Permission is granted to copy and distribute ...").
_NOTICE = re.compile(r"^Permission is granted to\b|\bAll rights reserved\b|^Copyright\b|©", re.I)
_LABEL_WORDS = 10  # a term or a label above what it names is short; a list item or a code line may not be
NO_PASSAGES = "The index has no passage that speaks to this question."
NOTHING_RELEVANT = "The retrieved passages do not speak to this."
NOTHING_SPECIFIC = "the retrieved passages say nothing specific."


@dataclass(frozen=True)
class Candidate:
    """A sentence that may be quoted: its text, the citation markers it carries, where it came from."""

    text: str
    markers: str
    group: int  # passage number, or part index when combining
    position: int  # order in the material, for sections that keep text order
    cites: frozenset[int] = frozenset()  # the passage numbers it came from


def sentences_of_sources(sources: list[Source], settings: OfflineSettings) -> list[Candidate]:
    found = []
    for source in sources:
        for sentence in with_their_fragments(split_sentences(source.text), settings.max_words):
            words = _BULLET.sub("", sentence, count=1).split()  # a list item is quoted as a sentence, not as "- ..."
            if settings.min_words <= len(words) <= settings.max_words:
                found.append(Candidate(" ".join(words), f"[{source.number}]", source.number, len(found), frozenset({source.number})))
    return found


def with_their_fragments(pieces: list[str], max_words: int) -> list[str]:
    """The quotable pieces of a passage's sentences and lines.

    - A single short line that ends no sentence (a term above its definition, a sidebar's label) is quoted
      with the sentence it heads: "global interpreter lock; The mechanism used by ...".
    - Of the other lines that end no sentence, list items and long lines are quoted, each on its own: the
      lines of a listing, a table or a screen strung together made one long "sentence"; alone, a short one
      is a caption or a screen's line.
    - A line that ends with "the" or "of" was wrapped: it runs on into the next.
    - Left out: numbered headings, admonition titles ("Note"), code (a comment, a prompt, a URL), licence
      notices, and a sentence that announces a listing (ends in ":") without it.
    """
    merged: list[str] = []
    in_run = False  # the line before ended no sentence either (list items, code): this one is no label
    index = 0
    while index < len(pieces):
        piece = pieces[index]
        index += 1
        while _RUNS_ON.search(piece) and index < len(pieces) and len(piece.split()) < max_words:
            piece = f"{piece} {pieces[index]}"
            index += 1
        if _never_quoted(piece):
            in_run = True  # and never a label: what follows is a listing's, or a notice's
            continue
        if _SENTENCE_END.search(piece) is not None:
            merged.append(piece)
            in_run = False
            continue
        if _NUMBERED_HEADING.match(piece) or _ADMONITION.fullmatch(piece.strip()):
            continue
        following = pieces[index] if index < len(pieces) else ""
        words = len(piece.split())
        is_label = not in_run and not _CODE_LINE.search(piece) and words <= _LABEL_WORDS and quotable_sentence(following)
        if is_label and words + len(following.split()) <= max_words:
            merged.append(f"{piece}; {following}")
            index += 1
            continue
        if not _CODE_LINE.search(piece) and (_BULLET.match(piece) or words >= _SHORT_LINE):
            merged.append(piece)
        in_run = True
    return merged


def _never_quoted(piece: str) -> bool:
    """A comment or prompt line, a licence notice, or a sentence that only announces a listing."""
    return bool(_CODE_OPENING.match(piece) or _NOTICE.search(piece) or _ANNOUNCES.search(piece))


def quotable_sentence(piece: str) -> bool:
    """True for a piece that is a sentence the engine quotes: it ends one, and is no heading, code, notice or announcement."""
    return _SENTENCE_END.search(piece) is not None and not _NUMBERED_HEADING.match(piece) and not _never_quoted(piece)


def sentences_of_parts(task: WriteTask) -> list[Candidate]:
    """Cited sentences of the partial answers (uncited ones are the engine's own connective text). A quoted
    piece ends at its marker even when it ends no sentence (a list item's ";"): otherwise it ran into the
    next quote, and the answer carried one run-on with all their markers at its end."""
    found = []
    for index, part in enumerate(task.parts):
        for sentence in (piece for whole in split_sentences(part.text) for piece in _AFTER_MARKERS.split(whole)):
            sentence = _BULLET.sub("", sentence, count=1)
            numbers = cited_numbers(sentence)
            if numbers:
                markers = "".join(f"[{n}]" for n in numbers)
                found.append(Candidate(strip_markers(sentence).strip(), markers, index, len(found), frozenset(numbers)))
    return found


class LexicalOverlap:
    """How much of a query's weight each sentence holds, words weighted by rarity among the sentences."""

    def __init__(self, sentences: list[str]) -> None:
        self.sentence_terms = [terms(s) for s in sentences]
        counts: dict[str, int] = {}
        for found in self.sentence_terms:
            for term in found:
                counts[term] = counts.get(term, 0) + 1
        self.idf = {t: math.log(1 + len(sentences) / (1 + n)) for t, n in counts.items()}
        # A query word no sentence holds is the rarest of all, and it still counts in the total: otherwise
        # "Should zoos exist?" over passages that never say "zoos" weighs "exist" alone and quotes monism.
        self.unseen = math.log(1 + len(sentences))

    def scores(self, query: str) -> np.ndarray:
        weights = {t: self.idf.get(t, self.unseen) for t in terms(query)}
        total = sum(weights.values())
        if total <= 0:
            return np.zeros(len(self.sentence_terms), dtype=np.float32)
        return np.array([sum(weights[t] for t in weights if t in found) / total for found in self.sentence_terms], dtype=np.float32)


def mmr(
    relevance: np.ndarray, vectors: np.ndarray, count: int, allowed: list[int], taken: np.ndarray, settings: OfflineSettings
) -> list[int]:
    """Up to `count` of the `allowed` indices (already judged relevant enough), most relevant first, unlike each
    other and unlike `taken` vectors."""
    chosen: list[int] = []
    picked = [taken] if len(taken) else []
    while len(chosen) < count:
        seen = np.vstack(picked) if picked else np.zeros((0, vectors.shape[1]), dtype=vectors.dtype)
        best, best_score = -1, -np.inf
        for i in allowed:
            if i in chosen:
                continue
            redundancy = float((seen @ vectors[i]).max()) if len(seen) else 0.0
            if redundancy > settings.near_duplicate:
                continue
            score = (1 - settings.diversity) * relevance[i] - settings.diversity * max(redundancy, 0.0)
            if score > best_score:
                best, best_score = i, score
        if best < 0:
            break
        chosen.append(best)
        picked.append(vectors[best][None, :])
    return chosen


def title_terms(title: str) -> set[str]:
    """The terms of an article title, less a disambiguation ("Mercury (planet)" -> {"mercury"})."""
    return terms(title.split(" (")[0])


def named_articles(query: str, titles: dict[int, set[str]]) -> set[int]:
    """The passages of the article `query` names most specifically: every term of its title is in the
    query, and no other passage's title names more of it ("Black Death" over "Death")."""
    wanted = terms(query)
    sizes = {number: len(words) for number, words in titles.items() if words and words <= wanted}
    most = max(sizes.values(), default=0)
    return {number for number, size in sizes.items() if size == most}


# Where a sentence's opening ends: a preposition after its first word ("fragments from comets", "the discovery
# of a virus", "caused by the bacterium" name the thing inside a phrase, not as the subject).
_PREPOSITION = re.compile(
    r"(?:about|among|at|between|by|during|for|from|in|including|into|of|on|over|such|through|to|under|via|with|within|without)", re.I
)
_OPENING_WORDS = 5
# A sentence that opens with a pronoun is about what its passage is about.
_ANAPHOR = re.compile(r"^(?:it|its|they|their|this|these|such)\b", re.I)


def opening(text: str) -> str:
    """The words a sentence opens with, up to its first preposition after the first word (at most five)."""
    words = text.split()[:_OPENING_WORDS]
    cut = next((i for i, word in enumerate(words) if i and _PREPOSITION.fullmatch(word.strip(",;:()\"'“”"))), len(words))
    return " ".join(words[:cut])


# A sentence as prose ends it: not a caption ("NFS entry in the /etc/fstab file"), a label or a line of a
# program's progress ("Purging configuration files for debian-cd (3.1.35) ...").
_PROSE_END = re.compile(r"\S[.!?][\"'”’)\]]*$")


def is_subject(thing: set[str], text: str, titled: set[str]) -> bool:
    """True when `text` is a sentence about `thing` (its terms): named in its opening, or its passage's
    title (`titled`) names it and the sentence opens with a pronoun ("It is used as a spread")."""
    if _PROSE_END.search(text) is None or text.endswith(" ..."):
        return False
    return bool(thing & terms(opening(text))) or (bool(thing & titled) and _ANAPHOR.match(text) is not None)


def names(things: list[set[str]], found: set[str]) -> bool:
    """True when `found` (a sentence's terms) names one of `things` (each given by its terms), or two of them
    when there are several: a sentence that relates compared items names at least two."""
    named = sum(1 for thing in things if thing & found)
    return named >= min(2, len(things))


class Picker:
    """Chooses each section's sentences from one set of candidates; no sentence serves two sections."""

    def __init__(self, candidates: list[Candidate], embedder: Embedder, settings: OfflineSettings, titles: dict[int, str] | None = None):
        self.candidates, self.settings = candidates, settings
        self.title_words = {number: title_terms(title) for number, title in (titles or {}).items()}
        self.vectors = embedder.embed([c.text for c in candidates])
        self.embedder = embedder
        self.overlap = LexicalOverlap([c.text for c in candidates])
        self.taken = np.zeros((0, self.vectors.shape[1]), dtype=self.vectors.dtype)
        self.used: set[int] = set()
        self.lead: list[int] = []  # plain RAG's sentences, chosen beforehand from the question's own passages

    def pick(self, extract: Extract) -> list[list[int]]:
        """For each section of `extract`, the indices of its sentences."""
        query_vectors = self.embedder.embed([s.query for s in extract.sections])
        return [self.section(section, vector) for section, vector in zip(extract.sections, query_vectors)]

    def section(self, section: Section, query_vector: np.ndarray) -> list[int]:
        candidates = self.candidates
        allowed = [i for i, c in enumerate(candidates) if (section.groups is None or c.group in section.groups) and i not in self.used]
        if section.verbatim:
            return self._keep(allowed)
        if section.lead:
            return self._keep([i for i in self.lead if i not in self.used])
        similarity = self.vectors @ query_vector
        relevance = similarity + self.settings.lexical_weight * self.overlap.scores(section.query)
        shaped = np.array([section.shape is not None and bool(section.shape.search(c.text)) for c in candidates])
        relevance = relevance + self.settings.cue_bonus * shaped
        relevance = relevance + self.settings.subject_bonus * self._named_subject(section.query, similarity)
        if allowed:
            floor = min(self.settings.min_similarity, float(similarity[allowed].max()) - self.settings.similarity_margin)
            allowed = [i for i in allowed if similarity[i] >= floor and relevance[i] >= self.settings.min_relevance]
        if allowed:  # the sentence nearest the query in meaning leads, whatever article the query names
            closest = max(allowed, key=lambda i: similarity[i])
            relevance[closest] = relevance[allowed].max() + 1e-3
        if section.shape_only:
            allowed = [i for i in allowed if shaped[i]]
        if section.about:
            things = [terms(thing) for thing in section.about]
            allowed = [i for i in allowed if names(things, self.overlap.sentence_terms[i] | self._titled(candidates[i]))]
            if section.subject:
                allowed = [i for i in allowed if any(is_subject(t, candidates[i].text, self._titled(candidates[i])) for t in things)]
        if section.max_words is not None:
            allowed = [i for i in allowed if len(candidates[i].text.split()) <= section.max_words] or allowed
        chosen = mmr(relevance, self.vectors, section.sentences, allowed, self.taken, self.settings)
        if section.in_order:
            chosen.sort(key=lambda i: candidates[i].position)
        return self._keep(chosen)

    def _keep(self, chosen: list[int]) -> list[int]:
        if chosen:
            self.taken = np.vstack([self.taken, self.vectors[chosen]])
            self.used.update(chosen)
        return chosen

    def _titled(self, candidate: Candidate) -> set[str]:
        return set().union(*(self.title_words.get(n, set()) for n in candidate.cites))

    def _named_subject(self, query: str, similarity: np.ndarray) -> np.ndarray:
        """1 for sentences from the article the query names, when that article reads near the query ("Train"
        for "How do I train for a marathon?" does not)."""
        named = named_articles(query, self.title_words)
        near = {n for i, c in enumerate(self.candidates) if similarity[i] >= similarity.max() - self.settings.similarity_margin for n in c.cites}
        return np.array([bool(c.cites & named & near) for c in self.candidates], dtype=np.float32)


def quote(candidate: Candidate) -> str:
    return f"{candidate.text} {candidate.markers}"


def layout(extract: Extract, picks: list[list[int]], candidates: list[Candidate]) -> str:
    """The answer text: prose; or a lead paragraph (the unlabelled sections), then one bullet per labelled
    section or one numbered line per labelled sentence (steps).

    The header and footer frame the labelled sections ("Steps:", "Views differ."), so they are left out
    when no labelled section has anything to say, and the header also when a section it needs is empty.
    """
    if not any(picks):
        return ""
    if extract.layout == "prose":
        return " ".join(quote(candidates[i]) for chosen in picks for i in chosen)
    shown = [(s, c) for s, c in zip(extract.sections, picks) if c or (s.label and not s.optional)]
    lead = " ".join(quote(candidates[i]) for section, chosen in shown if not section.label for i in chosen)
    labelled = [(section, chosen) for section, chosen in shown if section.label]
    if extract.layout == "numbered":
        body = [f"{n}. {quote(candidates[i])}" for n, i in enumerate((i for _, chosen in labelled for i in chosen), 1)]
    else:
        body = [f"- {section.label}: {' '.join(quote(candidates[i]) for i in chosen) or NOTHING_SPECIFIC}" for section, chosen in labelled]
    filled = {section.label for section, chosen in labelled if chosen}
    lines = [lead] if lead else []
    if body:  # a list of steps is titled after the lead; an opening line ("Views differ.") comes first
        header = [extract.header] if extract.header and all(label in filled for label in extract.header_needs) else []
        lines = header + lines + body if extract.layout == "bullets" else lines + header + body
        lines += [extract.footer] if extract.footer and header else []
    return "\n".join(lines)
