"""How an English question is phrased: what the offline engine plans from, and what keeps a question's cue words
out of its searches.

The pleasantries around a question (`bare_question`), the items a comparison compares and to what end
(`compared`), the words that say "compare" rather than what is compared (`says_compare`), the subject of a why-,
how- or should-question (`subject` with WHY, HOW_TO, SHOULD) and what an advice request asks about
(`advice_topic`). Each strategy's offline plan is built from these (typedrag.phrasing.plans). The offline engine
also reads whether a question asks for a number or a date (`amount_asked`): only a sentence that states one
(`states_an_amount`) can answer it.
"""

from __future__ import annotations

import re
from typing import Literal

from typedrag.phrasing.content import content_words

# ---------------------------------------------------------------- around the question

_PLEASANTRIES = re.compile(
    r"^(?:so|and|but|well|ok|okay|please|hi|hey)[, ]+|"
    r"^(?:can|could|would) (?:you|someone|anyone) (?:please )?(?:tell me|explain|say)\s*",
    re.I,
)


def bare_question(question: str) -> str:
    """The question on one line, without pleasantries ("so", "can you tell me") or the closing question mark."""
    return _PLEASANTRIES.sub("", " ".join(question.split()).strip()).rstrip(" ?!.")


def subject(question: str, lead: re.Pattern[str], what: str) -> tuple[str, str]:
    """(the question without its `lead` words, its content words): what sub-queries are built around.

    ValueError when nothing is left, so a planner fails visibly instead of searching for nothing.
    """
    core = lead.sub("", bare_question(question)).strip()
    phrase = " ".join(content_words(core)) or core
    if not phrase:
        raise ValueError(f"no {what} found in the question")
    return core, phrase


# What asks why: a reason question's lead words.
WHY = re.compile(
    r"^(?:why|how come|what (?:is|are|was|were) the (?:reasons?|causes?) (?:for|of|why|behind)|what causes?|what caused|"
    r"what makes|for what reason|what leads to|what led to|what is the reason)\s+"
    r"(?:(?:do|does|did|is|are|was|were|can|could|would|should|will|has|have|had)\s+)?",
    re.I,
)
# What asks how to do something: an instruction question's lead words.
HOW_TO = re.compile(
    r"^(?:how (?:do|can|should|would|could|might) (?:i|you|we|one|someone|people)|how to|how is|how are|how does|"
    r"what(?:'s| is| are) the (?:best |easiest |right |proper )?(?:way|ways|steps|method|process) (?:to|for|of)|"
    r"what should i do to|steps to|tips (?:for|on))\s+",
    re.I,
)
# What asks for a stance: a debate question's lead words.
SHOULD = re.compile(
    r"^(?:is it (?:right|wrong|ethical|moral|fair|ok|okay|good|bad) (?:to|that)|should (?:we|i|you|people|the government|governments)|"
    r"should|is|are|do you think|does|do|can|what do you think (?:of|about)|your opinion on|"
    r"what are the pros and cons of|pros and cons of)\s+",
    re.I,
)
_ASKS_ADVICE = re.compile(
    r"^(?:what|which|any|can you|could you|do you|would you)\s+"
    r"(?:are|is|do|does|have|recommend|suggest|good|some|advice|tips|ideas)?\s*",
    re.I,
)


def advice_topic(question: str) -> str:
    """What an advice request asks about: the question without its asking words ("any tips for ...")."""
    return _ASKS_ADVICE.sub("", bare_question(question))


# ---------------------------------------------------------------- what a comparison compares

_COMPARATIVE = (
    r"better|worse|best|worst|faster|slower|cheaper|safer|healthier|stronger|easier|harder|bigger|smaller|"
    r"preferable|superior|(?:more|less) \w+"
)
# Words that say "compare" rather than what is compared: they would pull in passages about differences in general.
_COMPARING_WORDS = re.compile(
    rf"^(?:differ\w*|compar\w*|similar\w*|contrast\w*|distinguish\w*|versus|vs|key|main|core|essential|{_COMPARATIVE})$",
    re.I,
)
_COMPARED = [
    re.compile(r"differences? (?:between|among) (?P<a>.+?) and (?P<b>.+)", re.I),
    re.compile(r"similarit(?:y|ies) (?:between|among|of) (?P<a>.+?) and (?P<b>.+)", re.I),
    re.compile(r"compare (?P<a>.+?) (?:with|to|and|against) (?P<b>.+)", re.I),
    re.compile(r"(?:comparison|contrast) (?:of|between) (?P<a>.+?) (?:and|with|to|vs\.?) (?P<b>.+)", re.I),
    re.compile(r"(?P<a>.+?)\s+(?:vs\.?|versus|v\.)\s+(?P<b>.+)", re.I),
    re.compile(rf"(?:is|are|was|were) (?P<a>.+?) (?:{_COMPARATIVE}) than (?P<b>.+)", re.I),
    re.compile(
        r"how (?:does|do|is|are|did|was|were) (?P<a>.+?) (?:compare|differ|different|similar|related)\w* (?:with|to|from|than) (?P<b>.+)",
        re.I,
    ),
    re.compile(r"(?P<a>[^,]+?) or (?P<b>[^,]+)$", re.I),
]
_PREFIX = re.compile(
    r"^(?:what(?:'s| is| are)?|which(?: one)?(?: is| are| was| would be| should i \w+)?(?: (?:the )?(?:"
    + _COMPARATIVE
    + r")(?: \w+)??)?|"
    r"who(?: is)?|should (?:i|we|you|one) \w+|is it (?:better|best|worse|wiser|smarter|cheaper|healthier) to|"
    r"do you prefer|would you rather)\s+",
    re.I,
)
_LEAD_ARTICLE = r"(?:the|a|an|using|being|having|to|is|are|was|were|do|does|should|can|would|it)"
# What sets the question off from the items: a colon, or a dash between spaces ("tea vs coffee - how do they
# compare?"); a hyphen inside a word ("apt-get", "self-hosted") is none.
_CLAUSE_BREAK = re.compile(r"\s*:\s*|\s+[-–—]+\s+")
# A word that reads as an adjective ("Australian", "digital", "primary"): alone it names no thing.
_ADJECTIVE = re.compile(r"\w+(?:an|ese|ish|ic|al|ern|ive|ous|ary)$", re.I)


def says_compare(word: str) -> bool:
    """Whether `word` says "compare" ("difference", "versus", "better") rather than naming what is compared."""
    return bool(_COMPARING_WORDS.match(word))


Purpose = Literal["difference", "similarity", "superiority"]


def compared(question: str) -> tuple[Purpose, list[str]]:
    """(purpose, items) of a comparison, from common phrasings ("X vs Y", "the difference between X and Y",
    "X or Y"); purpose is difference, similarity or superiority. ValueError when no two items are found."""
    text = bare_question(question)
    for span in _candidates(text):
        for pattern in _COMPARED:
            match = pattern.search(span)
            if not match:
                continue
            first = [_clean_item(_PREFIX.sub("", part.strip())) for part in match.group("a").split(",")]
            rest = re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+", match.group("b"))
            items = _share_object([i for i in first + [_clean_item(r) for r in rest] if content_words(i)])
            if len(items) >= 2:
                return _purpose(text), items
    raise ValueError("no compared items found (looked for 'X vs Y', 'difference between X and Y', 'X or Y', ...)")


def _clean_item(text: str) -> str:
    text = re.sub(rf"^(?:{_LEAD_ARTICLE} )+", "", text.strip(" ,.;:?!\"'-–—"), flags=re.I)
    text = re.sub(r"\s+(?:in|for|when|if|regarding|with respect to|as|at)\s+.*$", "", text, flags=re.I)
    text = re.sub(rf"(?:^|\s+)(?:{_COMPARATIVE})$", "", text, flags=re.I)
    return text.strip(" ,.;:?!\"'-–—")


def _purpose(text: str) -> Purpose:
    lowered = text.lower()
    if re.search(r"\b(similar\w*|in common|alike|same)\b", lowered):
        return "similarity"
    if re.search(
        rf"\b(?:{_COMPARATIVE}|prefer\w*|should (?:i|we)|which|rather|pick|choose)\b", lowered
    ) and not re.search(r"\bdifferen", lowered):
        return "superiority"
    return "difference"


def _candidates(text: str) -> list[str]:
    """The spans that may hold the items: both sides of the break ("X or Y: which...", "Which is better: X or Y")."""
    parts = _CLAUSE_BREAK.split(text, maxsplit=1)
    if len(parts) == 1:
        return [text]
    before, after = parts
    return (
        [after.strip(), before.strip()]
        if re.search(r"\s(?:or|vs\.?|versus|and)\s", after)
        else [before.strip(), after.strip()]
    )


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


# "How many ...?", "How long ...?", "What share of ...?": the answer is a number; "When did ...?", "In what year
# ...?": a date. "When" only before a past or future tense ("When is a GIN index the right choice?" asks for a
# condition).
_ASKS_A_NUMBER = re.compile(
    r"^(?:how (?:many|much|far|long|old|fast|big|large|tall|high|deep|often|heavy|wide)\b|"
    r"what (?:share|percentage|proportion|fraction) of\b)",
    re.I,
)
_ASKS_A_DATE = re.compile(r"^(?:(?:in |since )?what (?:year|century|decade)\b|when (?:was|were|did|will)\b)", re.I)
Amount = Literal["number", "date"]  # what a question asking for an amount asks for
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
# What states a number: a digit, a number word; a date: a year, a month, a century or decade, an era.
_STATES: dict[Amount, re.Pattern[str]] = {
    "number": re.compile(
        r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundreds?|"
        r"thousands?|millions?|billions?|dozens?|half|twice|once|single|double|daily|weekly|monthly|yearly|annually|"
        r"percent|per cent)\b",
        re.I,
    ),
    "date": re.compile(rf"\b\d{{3,4}}s?\b|\b(?:{_MONTHS}|century|centuries|decade|decades|BC|AD|BCE|CE|ago)\b"),
}


def amount_asked(question: str) -> Amount | None:
    """What the question asks for, when it asks for an amount: "number" ("How many climbers have died on it?"),
    "date" ("When was the first photo of one taken?"), else None."""
    bare = bare_question(question)
    return "number" if _ASKS_A_NUMBER.match(bare) else "date" if _ASKS_A_DATE.match(bare) else None


def states_an_amount(sentence: str, kind: Amount) -> bool:
    """Whether the sentence states an amount of that kind: a number (in digits or words), or a date."""
    return bool(_STATES[kind].search(sentence))


# "I", "I'm", "I've": a capital inside a question that names nothing (typedrag.abstain's unmentioned-name check).
FIRST_PERSON = re.compile(r"^I(?:'\w+)?$")
