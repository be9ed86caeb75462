"""Phrasings that decide between COMPARISON and the model's pick, read from the question's shape.

- An explicit comparison ("difference between X and Y", "X vs Y", "compare X and Y", "how is X different
  from Y") is a comparison whatever the model says.
- A choice between named options asked for a verdict ("X or Y: which should I use?", "Which is better
  for a beginner, violin or cello?", "rsync or tar for copying a directory tree?") is a comparison of
  superiority, even where the model says DEBATE (NF-CATS labels a bare "Inflation or deflation?" a debate).
- A comparison asked as a fragment ("annotated tag versus lightweight tag", "sapply vs vapply") is one too.
- A weaker choice ("Is it better to rent or buy?", "Should I learn French or Spanish?") is one only
  when the model is not sure of another type: NF-CATS labels many such questions debates.
- A choice between facts ("Which is older, X or Y?", "Which came first?") is not a comparison: the
  comparative must judge (better, safer, prefer), not measure (older, taller, first).
- A question that asks how to do something ("How to explain the difference between a fraction and a
  ratio?") is an instruction even when what it is about is a difference.
- A yes/no question with a comparative between two things ("Is a CTE slower than a subquery?", "Are BRIN
  indexes smaller than B-tree indexes?") is a comparison by our guidelines (bench/data/TYPES.md), but only in
  a question about a manual: NF-CATS's annotators labelled every such question of theirs a debate ("Is Android
  better than iOS?") or a factoid ("is the xbox one newer than the xbox 360"), so the classifier applies it
  where its own domain regression says the question reads technical (typedrag/classify/shipped.py).
The validation figures with and without the rules are in classify/model/MODEL_CARD.md.
"""

from __future__ import annotations

import re

# Comparatives that judge rather than measure.
_VERDICT = (
    r"better|best|worse|worst|preferable|superior|inferior|prefer(?:red)?|recommended|wiser|smarter|safer|"
    r"healthier|cheaper|easier|faster|slower|more (?:efficient|reliable|secure|useful|suitable|practical)"
)
_EXPLICIT = re.compile(
    r"\bdifferen(?:ce|ces|t) (?:between|among|from|than)\b|\bdiffer(?:s|ed)? (?:from|between)\b|"
    r"\bdistinguish\w* between\b|\bsimilarit(?:y|ies) (?:between|among)\b|\bin common\b|"
    r"^compare\b|\bcompare\s*\?$|\bvs\.?\s|\bversus\b",
    re.I,
)
_OPTIONS = r"\w[\w .+#/-]* or (?!not\b|no\b|so\b)\w"
# A verdict asked between named options.
_STRONG_CHOICE = re.compile(
    rf"^{_OPTIONS}[^:?]*[:,-]\s*which\b|"  # "X or Y: which should I use?"
    rf"^{_OPTIONS}[^:?]*:[^?]*\b(?:{_VERDICT}|choose|pick|go with|gain|win)\b[^?]*\?$|"  # "X or Y: what do I gain with the stricter one?"
    rf"^which(?: one)?\b[^?]*\b(?:should (?:i|we|you)|would you|do you|(?:is|are|would be) (?:the )?(?:{_VERDICT}))\b.*\b{_OPTIONS}|"
    rf"^which(?: one)?\b.*\b{_OPTIONS}[^?]*\b(?:should (?:i|we)|(?:{_VERDICT}))\b",
    re.I,
)
_WEAK_CHOICE = re.compile(
    rf"^is it (?:{_VERDICT}) to .+ or (?!not\b|no\b)\w+|^should (?:i|we) \w+ (?:\w+ ){{0,3}}\w+ or (?!not\b|no\b)\w+",
    re.I,
)
_HOW_TO = re.compile(r"^how (?:to|do (?:i|you|we)|can (?:i|you|we)|should (?:i|we))\b", re.I)
# Named options first, then what they are for: "rsync or tar for copying a directory tree?". A question that
# opens with a verb or a question word ("Should I stay or go for ...?") is left to the model.
_OPTIONS_FOR = re.compile(
    r"^(?!(?:should|shall|is|are|am|do|does|did|can|could|would|will|was|were|what|why|how|when|where|who|whom|which|"
    r"if|to|i|we|you)\b)[\w.+#/()-]+(?: [\w.+#/()-]+){0,3} or (?!not\b|no\b|so\b)[\w.+#/()-]+(?: [\w.+#/()-]+){0,3} "
    r"(?:for|to|when|on|in) [^?]*\?$",
    re.I,
)
# "A vs B" or "A versus B" as a fragment: no sentence, no full stop.
_FRAGMENT_VS = re.compile(r"^[^.?!]{1,80}\b(?:vs\.?|versus)\s[^.?!]{1,80}$", re.I)
# Statements that mention a difference are not comparison questions.
_QUESTION = re.compile(r"\?\s*$|^(?:how|what|which|who|is|are|do|does|should|can|compare)\b", re.I)


# A yes/no question with "<comparative> than": "Is X faster than Y?", "Would X be better than that?", "Does X use
# less memory than Y?". Not "other than" or "rather than" (no comparison of two things).
_COMPARATIVE = re.compile(
    r"^(?:is|are|was|were|isn't|aren't|do|does|did|would|will|can|could)\b[^?]*?\b"
    r"(?:(?!(?:oth|rath)er\b)\w+er|more \w+|less \w+|fewer \w+|worse|better) than\b",
    re.I,
)


_CARRIED = re.compile(r"^(.*\?)\s*\([^()]*\)$")


def own_words(question: str) -> str:
    """The question without the terms an offline follow-up carries in from the conversation ("And which is
    safer? (merge, rebase)"): the rules read how the asker phrased it, not the carried subject."""
    text = " ".join(question.split())
    carried = _CARRIED.match(text)
    return carried.group(1) if carried else text


def comparison_phrasing(question: str) -> bool:
    """True when the wording itself asks for a comparison, whatever a model says."""
    text = own_words(question)
    if _HOW_TO.search(text):
        return False
    if _OPTIONS_FOR.search(text) or _FRAGMENT_VS.search(text):
        return True
    return bool(_QUESTION.search(text) and (_EXPLICIT.search(text) or _STRONG_CHOICE.search(text)))


def weak_choice(question: str) -> bool:
    """A choice between two actions or options that may be a debate: a comparison only if the model is unsure."""
    return bool(_WEAK_CHOICE.search(own_words(question)))


def comparative_question(question: str) -> bool:
    """A yes/no question that sets two things side by side with a comparative ("Is X slower than Y?")."""
    return bool(_COMPARATIVE.search(own_words(question)))


def asks_how_to(question: str) -> bool:
    """The question asks how to do something: an instruction, even about a difference."""
    return bool(_HOW_TO.search(own_words(question)))
