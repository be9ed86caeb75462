"""Comparison, offline: the items and purpose read from common phrasings, and an answer that leads with
plain RAG's sentences and the one that relates the items, then gives each item's own point."""

from __future__ import annotations

import re

from typedrag.engines.base import Extract, Section, WriteTask
from typedrag.engines.offline.settings import OfflineSettings
from typedrag.engines.offline.shapes import RELATION
from typedrag.strategies.comparison import ComparisonPlan
from typedrag.text import bare_question, content_words

_COMPARATIVE = (
    r"better|worse|best|worst|faster|slower|cheaper|safer|healthier|stronger|easier|harder|bigger|smaller|"
    r"preferable|superior|(?:more|less) \w+"
)
_PATTERNS = [
    re.compile(r"differences? (?:between|among) (?P<a>.+?) and (?P<b>.+)", re.I),
    re.compile(r"similarit(?:y|ies) (?:between|among|of) (?P<a>.+?) and (?P<b>.+)", re.I),
    re.compile(r"compare (?P<a>.+?) (?:with|to|and|against) (?P<b>.+)", re.I),
    re.compile(r"(?:comparison|contrast) (?:of|between) (?P<a>.+?) (?:and|with|to|vs\.?) (?P<b>.+)", re.I),
    re.compile(r"(?P<a>.+?)\s+(?:vs\.?|versus|v\.)\s+(?P<b>.+)", re.I),
    re.compile(rf"(?:is|are|was|were) (?P<a>.+?) (?:{_COMPARATIVE}) than (?P<b>.+)", re.I),
    re.compile(r"how (?:does|do|is|are|did|was|were) (?P<a>.+?) (?:compare|differ|different|similar|related)\w* (?:with|to|from|than) (?P<b>.+)", re.I),
    re.compile(r"(?P<a>[^,]+?) or (?P<b>[^,]+)$", re.I),
]
_PREFIX = re.compile(
    r"^(?:what(?:'s| is| are)?|which(?: one)?(?: is| are| was| would be| should i \w+)?(?: (?:the )?(?:" + _COMPARATIVE + r")(?: \w+)??)?|"
    r"who(?: is)?|should (?:i|we|you|one) \w+|is it (?:better|best|worse|wiser|smarter|cheaper|healthier) to|"
    r"do you prefer|would you rather)\s+",
    re.I,
)
_LEAD_ARTICLE = r"(?:the|a|an|using|being|having|to|is|are|was|were|do|does|should|can|would|it)"


def _clean_item(text: str) -> str:
    text = re.sub(rf"^(?:{_LEAD_ARTICLE} )+", "", text.strip(" ,.;:?!\"'-–—"), flags=re.I)
    text = re.sub(r"\s+(?:in|for|when|if|regarding|with respect to|as|at)\s+.*$", "", text, flags=re.I)
    text = re.sub(rf"(?:^|\s+)(?:{_COMPARATIVE})$", "", text, flags=re.I)
    return text.strip(" ,.;:?!\"'-–—")


def _purpose(text: str) -> str:
    lowered = text.lower()
    if re.search(r"\b(similar\w*|in common|alike|same)\b", lowered):
        return "similarity"
    if re.search(rf"\b(?:{_COMPARATIVE}|prefer\w*|should (?:i|we)|which|rather|pick|choose)\b", lowered) and not re.search(
        r"\bdifferen", lowered
    ):
        return "superiority"
    return "difference"


# What sets the question off from the items: a colon, or a dash between spaces ("tea vs coffee - how do they
# compare?"); a hyphen inside a word ("apt-get", "self-hosted") is none.
_CLAUSE_BREAK = re.compile(r"\s*:\s*|\s+[-–—]+\s+")


def _candidates(text: str) -> list[str]:
    """The spans that may hold the items: both sides of the break ("X or Y: which...", "Which is better: X or Y")."""
    parts = _CLAUSE_BREAK.split(text, maxsplit=1)
    if len(parts) == 1:
        return [text]
    before, after = parts
    return [after.strip(), before.strip()] if re.search(r"\s(?:or|vs\.?|versus|and)\s", after) else [before.strip(), after.strip()]


# A word that reads as an adjective ("Australian", "digital", "primary"): alone it names no thing.
_ADJECTIVE = re.compile(r"\w+(?:an|ese|ish|ic|al|ern|ive|ous|ary)$", re.I)


def _share_object(items: list[str]) -> list[str]:
    """Two items that share words written once:
    - "rent or buy a house" compares renting a house with buying one: a bare first verb takes the object;
    - "removing a package and purging it": "it" is the first item's object;
    - "the Australian and New Zealand flags" compares two flags: a bare first adjective takes the last noun."""
    if len(items) == 2 and len(items[0].split()) > 1 and re.fullmatch(r"\S+ (?:it|them|one)", items[1], re.I):
        return [items[0], f"{items[1].split()[0]} {items[0].split(maxsplit=1)[1]}"]
    if len(items) == 2 and len(items[0].split()) == 1 and len(items[1].split()) > 1:
        rest = items[1].split(maxsplit=1)[1]
        if re.match(r"(?:a|an|the|my|your|our|their|his|her|its)\b", rest, re.I):
            return [f"{items[0]} {rest}", items[1]]
        if _ADJECTIVE.fullmatch(items[0]):  # the second item's own modifier is its first word, or a name
            words = items[1].split()
            named = next((i for i, word in enumerate(words) if not word[:1].isupper()), len(words))
            return [" ".join([items[0], *words[max(named, 1) :]]), items[1]]
    return items


def plan(question: str) -> ComparisonPlan:
    """Items and purpose from common phrasings ('X vs Y', 'difference between X and Y', 'X or Y')."""
    text = bare_question(question)
    for span in _candidates(text):
        for pattern in _PATTERNS:
            match = pattern.search(span)
            if not match:
                continue
            first = [_clean_item(_PREFIX.sub("", part.strip())) for part in match.group("a").split(",")]
            rest = re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+", match.group("b"))
            items = _share_object([i for i in first + [_clean_item(r) for r in rest] if content_words(i)])
            if len(items) >= 2:
                return ComparisonPlan(purpose=_purpose(text), items=items)
    raise ValueError("no compared items found (looked for 'X vs Y', 'difference between X and Y', 'X or Y', ...)")


def answer(task: WriteTask, settings: OfflineSettings) -> Extract:
    """The sentence that relates two of the items by the comparison's purpose, then plain RAG's lead, then
    one point about each item (a sentence it opens, from any passage) that the lead does not already make."""
    question, purpose = task.values["question"], task.values["purpose"]
    items = task.values["items"].split("; ")
    relation = Section(query=question, sentences=1, shape=RELATION[purpose], shape_only=True, optional=True, about=tuple(items))
    points = [
        Section(
            query=f"{item} {question}", label=item, sentences=1, optional=True, about=(item,), subject=True, max_words=settings.added_max_words
        )
        for item in items[: settings.added_sentences]
    ]
    return Extract((relation, Section(query=question, lead=True), *points), layout="bullets")
