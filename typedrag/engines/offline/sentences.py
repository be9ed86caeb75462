"""The built-in engine for machines with no LLM: heuristic plans and extractive, attributed answers.

Plans come from each strategy's own offline planner. Answers are sentences taken verbatim from
the retrieved passages (or, when combining, from the aspects' answers), picked section by section
as the strategy's `Extract` recipe says: by MiniLM similarity to the section's query, favouring
sentences of the right shape (the section's cue) and from the article the query names, with maximal
marginal relevance so no sentence repeats another, and never a sentence an earlier section already
used. Each keeps the number of the passage it came from. Nothing is invented, and every result names
this engine.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

import numpy as np

from typedrag.citations import cited_numbers, strip_markers
from typedrag.embed import Embedder, default_embedder
from typedrag.engines.base import Extract, PlanT, PlanTask, TextSink, Trace, WriteTask, sentence_pieces
from typedrag.errors import PlanFailed
from typedrag.llm.base import LLMCall, StructuredOutcome
from typedrag.text import split_sentences, terms

ENGINE_NAME = "offline-extractive"
NO_PASSAGES = "The index has no passage that speaks to this question."
NOTHING_RELEVANT = "The retrieved passages do not speak to this."
CLOSED_BOOK = (
    "The offline engine answers only from retrieved passages, so it has no closed-book answer; "
    "configure an LLM endpoint (--llm) for the LLM-only baseline."
)
NEAR_DUPLICATE = 0.9
# Below this cosine to the query a sentence is off topic (MiniLM: unrelated text scores ~0-0.2);
# better to say less than to quote a passage that only shares a word with the query.
MIN_RELEVANCE = 0.25
# The meaning must match too: a sentence that only shares a rare word with the query ("home" for "How do I make
# bread at home?" picks Prague, "home to 2.3 million people") scores near zero cosine however high its overlap.
# The bar is relative, as the strategies' on-topic test is: where nothing scores well (a question in a language
# the embedder does not read) the passages BM25 found still speak.
MIN_SIMILARITY = 0.1
SIMILARITY_MARGIN = 0.25
CUE_BONUS = 0.1  # a sentence of the section's shape (a cause, a step, a stance) outranks a slightly closer one
CUE_FIRST = 2.0  # ... or, in a `cue_first` section, any sentence not of its shape (relevance stays below 2.1)
# Weight of the query's rare words found in a sentence (IDF over the candidate sentences): the sentence
# that holds an answer usually repeats the question's most specific words. On 200 Wiki-NFQA questions
# (top-10 passages, six sentences) it raised the share of answers holding the short answer 22.0% -> 23.5%.
LEXICAL_WEIGHT = 1.0
# A sentence from the article the query names ("What caused the Black Death?" -> "Black Death") is about the
# subject; one that only shares words with it ("Gangrene is a type of tissue death caused by ...") is not.
# Key-term set: typed 57 -> 58 of 66 with 0.3, 60 with 0.6 counted before the relevance bar; on Wiki-NFQA's
# 347 decomposing questions typed 78 -> 79 with either, plain RAG 61 unchanged.
SUBJECT_BONUS = 0.6
DIVERSITY = 0.3
MIN_WORDS, MAX_WORDS = 5, 70  # fragments and run-ons read badly out of context


@dataclass(frozen=True)
class Candidate:
    """A sentence that may be quoted: its text, the citation markers it carries, where it came from."""

    text: str
    markers: str
    group: int  # passage number, or part index when combining
    position: int  # order in the material, for sections that keep text order
    cites: frozenset[int] = frozenset()  # the passage numbers it came from


def sentences_of_sources(task: WriteTask) -> list[Candidate]:
    found = []
    for source in task.sources:
        for sentence in split_sentences(source.text):
            words = sentence.split()
            if MIN_WORDS <= len(words) <= MAX_WORDS:
                found.append(Candidate(" ".join(words), f"[{source.number}]", source.number, len(found), frozenset({source.number})))
    return found


def sentences_of_parts(task: WriteTask) -> list[Candidate]:
    """Cited sentences of the partial answers (uncited ones are the engine's own connective text)."""
    found = []
    for index, part in enumerate(task.parts):
        for sentence in split_sentences(part.text):
            sentence = sentence.lstrip("-•0123456789. ")
            numbers = cited_numbers(sentence)
            if numbers:
                markers = "".join(f"[{n}]" for n in numbers)
                found.append(Candidate(strip_markers(sentence).strip(), markers, index, len(found), frozenset(numbers)))
    return found


def mmr(relevance: np.ndarray, vectors: np.ndarray, count: int, allowed: list[int], taken: np.ndarray) -> list[int]:
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
            if redundancy > NEAR_DUPLICATE:
                continue
            score = (1 - DIVERSITY) * relevance[i] - DIVERSITY * max(redundancy, 0.0)
            if score > best_score:
                best, best_score = i, score
        if best < 0:
            break
        chosen.append(best)
        picked.append(vectors[best][None, :])
    return chosen


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


class OfflineEngine:
    """Extractive answers and heuristic plans, no model needed.

    >>> OfflineEngine().name
    'offline-extractive'
    """

    name = ENGINE_NAME
    generative = False

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def _record(self, trace: Trace, role: str, started: float, **extra) -> None:
        latency = round((time.perf_counter() - started) * 1000, 1)
        trace.calls.append(LLMCall(role=role, engine=self.name, latency_ms=latency, requests=0, **extra))

    async def plan(self, task: PlanTask[PlanT], question: str, trace: Trace) -> PlanT:
        started = time.perf_counter()
        try:
            plan = task.schema.model_validate(task.offline(question).model_dump())
        except ValueError as error:  # includes pydantic.ValidationError
            self._record(trace, task.role, started, structured=StructuredOutcome.FAILED, error=str(error)[:300])
            raise PlanFailed(f"offline planner: {error}") from error
        self._record(trace, task.role, started, structured=StructuredOutcome.OK)
        return plan

    async def write(self, task: WriteTask, trace: Trace, on_text: TextSink | None = None) -> str:
        """The extracted text; `on_text` hears it a sentence (or line) at a time once it is chosen."""
        started = time.perf_counter()
        text = await asyncio.to_thread(self._write, task)
        self._record(trace, task.role, started)
        if on_text is not None:
            for piece in sentence_pieces(text):
                on_text(piece)
        return text

    def _write(self, task: WriteTask) -> str:
        if not task.sources and not task.parts:
            return CLOSED_BOOK if "sources" not in task.prompt.fields() else NO_PASSAGES
        candidates = sentences_of_parts(task) if task.parts else sentences_of_sources(task)
        if not candidates:
            return NO_PASSAGES
        picks = self.pick(task.extract, candidates, {source.number: source.title for source in task.sources})
        return layout(task.extract, picks, candidates) or NOTHING_RELEVANT

    def pick(self, extract: Extract, candidates: list[Candidate], titles: dict[int, str] | None = None) -> list[list[int]]:
        """For each section, the indices of its sentences; no sentence serves two sections.

        `titles` (passage number -> article title) lets a section prefer the article its query names.
        """
        title_words = {number: title_terms(title) for number, title in (titles or {}).items()}

        def titled(candidate: Candidate) -> set[str]:
            return set().union(*(title_words.get(n, set()) for n in candidate.cites))

        queries = [s.query for s in extract.sections]
        vectors = self.embedder.embed(queries + [c.text for c in candidates])
        query_vectors, sentence_vectors = vectors[: len(queries)], vectors[len(queries) :]
        taken = np.zeros((0, sentence_vectors.shape[1]), dtype=sentence_vectors.dtype)
        overlap = LexicalOverlap([c.text for c in candidates])
        picks: list[list[int]] = []
        for section, query_vector in zip(extract.sections, query_vectors):
            similarity = sentence_vectors @ query_vector
            relevance = similarity + LEXICAL_WEIGHT * overlap.scores(section.query)
            shaped = np.array([section.cue is not None and bool(section.cue.search(c.text)) for c in candidates])
            relevance = relevance + CUE_BONUS * shaped
            named = named_articles(section.query, title_words)
            # ... unless its sentences read far off the query ("Train" for "How do I train for a marathon?").
            near = {n for i, c in enumerate(candidates) if similarity[i] >= similarity.max() - SIMILARITY_MARGIN for n in c.cites}
            relevance = relevance + SUBJECT_BONUS * np.array([bool(c.cites & named & near) for c in candidates])
            allowed = [i for i, c in enumerate(candidates) if section.groups is None or c.group in section.groups]
            if allowed:
                floor = min(MIN_SIMILARITY, float(similarity[allowed].max()) - SIMILARITY_MARGIN)
                allowed = [i for i in allowed if similarity[i] >= floor and relevance[i] >= MIN_RELEVANCE]
            if allowed:  # the sentence nearest the query in meaning leads, whatever article the query names
                closest = max(allowed, key=lambda i: similarity[i])
                relevance[closest] = relevance[allowed].max() + 1e-3
            if section.cue_first:
                relevance = relevance + CUE_FIRST * shaped
            if section.about:
                things = [terms(thing) for thing in section.about]
                allowed = [i for i in allowed if names(things, overlap.sentence_terms[i] | titled(candidates[i]))]
            if section.max_words is not None:
                allowed = [i for i in allowed if len(candidates[i].text.split()) <= section.max_words] or allowed
            chosen = mmr(relevance, sentence_vectors, section.sentences, allowed, taken)
            if section.in_order:
                chosen.sort(key=lambda i: candidates[i].position)
            if chosen:
                taken = np.vstack([taken, sentence_vectors[chosen]])
            picks.append(chosen)
        return picks


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


def names(things: list[set[str]], found: set[str]) -> bool:
    """True when `found` (a sentence's terms) names one of `things` (each given by its terms), or two of them
    when there are several: a sentence that relates compared items names at least two."""
    named = sum(1 for thing in things if thing & found)
    return named >= min(2, len(things))


def _quote(candidate: Candidate) -> str:
    return f"{candidate.text} {candidate.markers}"


def layout(extract: Extract, picks: list[list[int]], candidates: list[Candidate]) -> str:
    """The answer text: prose; or a lead paragraph (the unlabelled sections), then one bullet per labelled
    section or one numbered line per labelled sentence (steps).

    The header and footer frame the labelled sections ("Steps:", "Views on this question differ."), so
    they are left out when no labelled section has anything to say: definitions numbered as steps, or a
    debate with no view, would promise what the answer does not give.
    """
    if not any(picks):
        return ""
    if extract.layout == "prose":
        return " ".join(_quote(candidates[i]) for chosen in picks for i in chosen)
    shown = [(s, c) for s, c in zip(extract.sections, picks) if c or (s.label and not s.optional)]
    lead = " ".join(_quote(candidates[i]) for section, chosen in shown if not section.label for i in chosen)
    labelled = [(section, chosen) for section, chosen in shown if section.label]
    if extract.layout == "numbered":
        quotes = [_quote(candidates[i]) for _, chosen in labelled for i in chosen]
        body = [f"{n}. {quote}" for n, quote in enumerate(quotes, 1)]
    else:
        body = []
        for section, chosen in labelled:
            said = " ".join(_quote(candidates[i]) for i in chosen)
            body.append(f"- {section.label}: {said or 'the retrieved passages say nothing specific.'}")
    lines = [lead] if lead else []
    if body:  # a list of steps is titled after the lead; an opening line ("Views differ.") comes first
        header = [extract.header] if extract.header else []
        lines = header + lines + body if extract.layout == "bullets" else lines + header + body
        lines += [extract.footer] if extract.footer else []
    return "\n".join(lines)
