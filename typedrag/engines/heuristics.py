"""Type-aware question analysis for the offline engine: the planning roles without a model.

Patterns cover the common English phrasings of each NF-CATS type; anything they miss yields
PlanFailed, so the pipeline falls back to plain RAG and records it rather than guessing.
"""

from __future__ import annotations

import re

from typedrag.plans import ComparisonPlan, DebatePlan, ExperiencePlan, Perspective, SubQueryPlan

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours yourself yourselves
    get got also may might must shall one ones thing things really much many way ways best better good make
    someone something anyone anything people person""".split()
)

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'+#.-]*[A-Za-z0-9+#]|[A-Za-z0-9]")
_LEAD = re.compile(
    r"^(?:so|and|but|well|ok|okay|please|hi|hey)[, ]+|"
    r"^(?:can|could|would) (?:you|someone|anyone) (?:please )?(?:tell me|explain|say)\s*",
    re.I,
)


def normalise(question: str) -> str:
    text = " ".join(question.split()).strip()
    text = _LEAD.sub("", text)
    return text.rstrip(" ?!.")


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in STOPWORDS]


def key_phrases(text: str) -> list[str]:
    """Runs of consecutive content words, longest first: a cheap noun-phrase chunker."""
    phrases: list[list[str]] = [[]]
    for token in re.findall(r"[A-Za-z0-9][A-Za-z0-9'+#.-]*[A-Za-z0-9+#]|[A-Za-z0-9]|[^\sA-Za-z0-9]", text):
        if token.lower() in STOPWORDS or not token[0].isalnum():
            if phrases[-1]:
                phrases.append([])
        else:
            phrases[-1].append(token)
    found = [" ".join(p) for p in phrases if p]
    return sorted(dict.fromkeys(found), key=lambda p: -len(p.split()))


_COMPARATIVE = (
    r"better|worse|best|worst|faster|slower|cheaper|safer|healthier|stronger|easier|harder|bigger|smaller|"
    r"preferable|superior|(?:more|less) \w+"
)


def _clean_item(text: str) -> str:
    text = re.sub(r"^(?:(?:the|a|an|using|being|having|to|is|are|was|were|do|does|should|can|would) )+", "", text.strip(" ,.;:?!\"'"), flags=re.I)
    text = re.sub(r"\s+(?:in|for|when|if|regarding|with respect to|as|at)\s+.*$", "", text, flags=re.I)
    text = re.sub(rf"(?:^|\s+)(?:{_COMPARATIVE})$", "", text, flags=re.I)
    return text.strip(" ,.;:?!\"'")


_COMPARISON_PATTERNS = [
    re.compile(r"differences? (?:between|among) (?P<a>.+?) and (?P<b>.+)", re.I),
    re.compile(r"similarit(?:y|ies) (?:between|among|of) (?P<a>.+?) and (?P<b>.+)", re.I),
    re.compile(r"compare (?P<a>.+?) (?:with|to|and|against) (?P<b>.+)", re.I),
    re.compile(r"(?:comparison|contrast) (?:of|between) (?P<a>.+?) (?:and|with|to|vs\.?) (?P<b>.+)", re.I),
    re.compile(r"(?P<a>.+?)\s+(?:vs\.?|versus|v\.)\s+(?P<b>.+)", re.I),
    re.compile(rf"(?:is|are|was|were) (?P<a>.+?) (?:{_COMPARATIVE}) than (?P<b>.+)", re.I),
    re.compile(r"how (?:does|do|is|are) (?P<a>.+?) (?:compare|differ) (?:with|to|from) (?P<b>.+)", re.I),
    re.compile(r"(?P<a>[^,]+?) or (?P<b>[^,]+)$", re.I),
]
_PREFIX = re.compile(
    r"^(?:what(?:'s| is| are)?|which(?: is| are)?|who(?: is)?|should i (?:use|choose|buy|get|pick)|"
    r"is it better to (?:use|choose|buy|get)?|do you prefer|would you rather)\s+",
    re.I,
)


def comparison_plan(question: str) -> ComparisonPlan:
    text = normalise(question)
    lowered = text.lower()
    if re.search(r"\b(similar\w*|in common|alike|same)\b", lowered):
        purpose = "similarity"
    elif re.search(rf"\b(?:{_COMPARATIVE}|prefer\w*|should i|which (?:one|is)|rather)\b", lowered) and not re.search(
        r"\bdifferen", lowered
    ):
        purpose = "superiority"
    else:
        purpose = "difference"
    for pattern in _COMPARISON_PATTERNS:
        match = pattern.search(text)
        if not match:
            continue
        first = [_clean_item(_PREFIX.sub("", part)) for part in match.group("a").split(",")]
        rest = re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+", match.group("b"))
        items = first + [_clean_item(r) for r in rest]
        items = [i for i in items if content_words(i)]
        if len(items) >= 2:
            return ComparisonPlan(purpose=purpose, items=items)
    raise ValueError("no compared items found (looked for 'X vs Y', 'difference between X and Y', 'X or Y', ...)")


def experience_plan(question: str) -> ExperiencePlan:
    text = normalise(question)
    text = re.sub(
        r"^(?:what|which|any|can you|could you|do you|would you)\s+(?:are|is|do|does|have|recommend|suggest|good|some|advice|tips|ideas)?\s*",
        "",
        text,
        flags=re.I,
    )
    phrases = key_phrases(text)
    if not phrases:
        raise ValueError("no keywords found in the question")
    keywords = list(dict.fromkeys(phrases + content_words(text)))[:8]
    return ExperiencePlan(topic=" ".join(content_words(text)), keywords=keywords)


def _subject(question: str, lead: re.Pattern, what: str) -> tuple[str, str]:
    """(the question without its lead words, its content words): what sub-queries are built around."""
    core = lead.sub("", normalise(question)).strip()
    phrase = " ".join(content_words(core)) or core
    if not phrase:
        raise ValueError(f"no {what} found in the question")
    return core, phrase


_REASON_CORE = re.compile(
    r"^(?:why|how come|what (?:is|are|was|were) the (?:reasons?|causes?) (?:for|of|why|behind)|what causes?|what caused|"
    r"what makes|for what reason|what leads to|what led to|what is the reason)\s+(?:(?:do|does|did|is|are|was|were|can|could|would|should|will|has|have|had)\s+)?",
    re.I,
)


def reason_plan(question: str) -> SubQueryPlan:
    _, phrase = _subject(question, _REASON_CORE, "subject")
    # One cue word per query: BM25 lets extra generic words pull in off-topic passages.
    return SubQueryPlan(sub_queries=[f"{phrase} causes", f"{phrase} background", f"{phrase} factors"])


_INSTRUCTION_CORE = re.compile(
    r"^(?:how (?:do|can|should|would|could|might) (?:i|you|we|one|someone|people)|how to|how is|how are|how does|"
    r"what(?:'s| is| are) the (?:best |easiest |right |proper )?(?:way|ways|steps|method|process) (?:to|for|of)|"
    r"what should i do to|steps to|tips (?:for|on))\s+",
    re.I,
)


def instruction_plan(question: str) -> SubQueryPlan:
    _, phrase = _subject(question, _INSTRUCTION_CORE, "task")
    # Few generic words beside the task: BM25 lets words like "steps" pull in unrelated passages.
    return SubQueryPlan(
        sub_queries=[
            f"{phrase} requirements materials",
            f"{phrase} preparation",
            f"{phrase} method",
            f"{phrase} tips",
        ]
    )


_DEBATE_CORE = re.compile(
    r"^(?:is it (?:right|wrong|ethical|moral|fair|ok|okay|good|bad) (?:to|that)|should (?:we|i|you|people|the government|governments)|"
    r"should|is|are|do you think|does|do|can|what do you think (?:of|about)|your opinion on|"
    r"what are the pros and cons of|pros and cons of)\s+",
    re.I,
)


def debate_plan(question: str) -> DebatePlan:
    core, phrase = _subject(question, _DEBATE_CORE, "debated topic")
    return DebatePlan(
        topic=core or phrase,
        perspectives=[
            Perspective(name="supporters", sub_query=f"{phrase} benefits support"),
            Perspective(name="critics", sub_query=f"{phrase} criticism risks"),
            Perspective(name="neutral evidence", sub_query=f"{phrase} evidence"),
        ],
    )
