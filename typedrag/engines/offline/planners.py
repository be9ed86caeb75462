"""The offline planners: each question type's plan read from the question's own words.

A planner fills the same validated schema an LLM fills (typedrag/strategies), from common phrasings:
a comparison's items and purpose ("X vs Y", "the difference between X and Y", "X or Y"), the subject a
why- or how-question asks about, a debate's topic, an advice request's keywords. It raises ValueError
when the phrasing is not one it reads, so the strategy falls back to plain RAG, recorded.
"""

from __future__ import annotations

import re

from typedrag.strategies.comparison import ComparisonPlan
from typedrag.strategies.debate import DebatePlan, Perspective
from typedrag.strategies.decomposed import SubQueryPlan
from typedrag.strategies.experience import ExperiencePlan
from typedrag.text import bare_question, content_words, key_phrases


def subject(question: str, lead: re.Pattern[str], what: str) -> tuple[str, str]:
    """(the question without its lead words, its content words): what sub-queries are built around.

    ValueError when nothing is left, so the planner fails visibly instead of searching for nothing.
    """
    core = lead.sub("", bare_question(question)).strip()
    phrase = " ".join(content_words(core)) or core
    if not phrase:
        raise ValueError(f"no {what} found in the question")
    return core, phrase


# --- comparison -------------------------------------------------------------------------------------

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


def comparison(question: str) -> ComparisonPlan:
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


# --- reason: the subject's causes, searched around its content words -------------------------------

_WHY = re.compile(
    r"^(?:why|how come|what (?:is|are|was|were) the (?:reasons?|causes?) (?:for|of|why|behind)|what causes?|what caused|"
    r"what makes|for what reason|what leads to|what led to|what is the reason)\s+"
    r"(?:(?:do|does|did|is|are|was|were|can|could|would|should|will|has|have|had)\s+)?",
    re.I,
)


def reason(question: str) -> SubQueryPlan:
    """Two searches for the subject's causes: its causes, and the factors behind it."""
    _, phrase = subject(question, _WHY, "subject")
    return SubQueryPlan(sub_queries=[f"{phrase} causes", f"{phrase} factors"])


# --- instruction: what the task takes, and its steps -------------------------------------------------

_HOW_TO = re.compile(
    r"^(?:how (?:do|can|should|would|could|might) (?:i|you|we|one|someone|people)|how to|how is|how are|how does|"
    r"what(?:'s| is| are) the (?:best |easiest |right |proper )?(?:way|ways|steps|method|process) (?:to|for|of)|"
    r"what should i do to|steps to|tips (?:for|on))\s+",
    re.I,
)


def instruction(question: str) -> SubQueryPlan:
    """What the task needs first, then its steps, searched around its content words."""
    _, phrase = subject(question, _HOW_TO, "task")
    return SubQueryPlan(sub_queries=[f"{phrase} requirements", f"{phrase} steps"])


# --- debate: the case for and the case against -------------------------------------------------------

_SHOULD = re.compile(
    r"^(?:is it (?:right|wrong|ethical|moral|fair|ok|okay|good|bad) (?:to|that)|should (?:we|i|you|people|the government|governments)|"
    r"should|is|are|do you think|does|do|can|what do you think (?:of|about)|your opinion on|"
    r"what are the pros and cons of|pros and cons of)\s+",
    re.I,
)


def debate(question: str) -> DebatePlan:
    """The case for and the case against, each searched around the topic."""
    core, phrase = subject(question, _SHOULD, "debated topic")
    return DebatePlan(
        topic=core or phrase,
        perspectives=[
            Perspective(name="in favour", sub_query=f"{phrase} benefits"),
            Perspective(name="against", sub_query=f"{phrase} criticism"),
        ],
    )


# --- experience: the topic and the keywords advice would mention -------------------------------------

_ASKS_ADVICE = re.compile(
    r"^(?:what|which|any|can you|could you|do you|would you)\s+"
    r"(?:are|is|do|does|have|recommend|suggest|good|some|advice|tips|ideas)?\s*",
    re.I,
)


def experience(question: str) -> ExperiencePlan:
    """The question's content words as the topic, its noun phrases and words as keywords."""
    text = _ASKS_ADVICE.sub("", bare_question(question))
    phrases = key_phrases(text)
    if not phrases:
        raise ValueError("no keywords found in the question")
    keywords = list(dict.fromkeys(phrases + content_words(text)))
    return ExperiencePlan(topic=" ".join(content_words(text)), keywords=keywords)
