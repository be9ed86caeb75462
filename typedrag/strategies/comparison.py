"""Comparison: find the purpose and the items, retrieve per item, dedupe, rerank, answer by purpose."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from typedrag.engines.base import Extract, PlanTask, Section, WriteTask
from typedrag.engines.heuristics import normalise
from typedrag.prompts import CITE, GROUNDED, PLANNER, Prompt
from typedrag.result import Aspect
from typedrag.strategies.base import StrategyContext, StrategyOutput, union
from typedrag.strategies.plans import MAX_ASPECTS, Name, aspect_list, clean_phrases, keep_at_most
from typedrag.text import content_words


class ComparisonPlan(BaseModel):
    """What is compared, and to what end (it shapes the answer)."""

    purpose: Literal["difference", "similarity", "superiority"] = Field(
        description="difference (how they differ), similarity (what they share) or superiority (which is better)"
    )
    items: list[Name] = aspect_list("the two to five things compared, each named specifically enough to find documents on its own")

    @field_validator("purpose", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("items", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return clean_phrases(value)


PLAN_COMPARISON = Prompt(
    "plan_comparison",
    "You analyse comparison questions. " + PLANNER,
    "Question: {question}\n\n"
    "Identify what the question compares and why. Name each compared thing in full, as the question's "
    "context makes it specific, never by a pronoun.\n{reply_format}",
)

COMPARISON_ANSWER = Prompt(
    "comparison_answer",
    GROUNDED,
    "Sources:\n{sources}\n\nQuestion: {question}\n\n"
    "The reader wants to know the {purpose} among these: {items}. Cover every one of them. "
    "{purpose_instruction} Answer in at most seven sentences. " + CITE,
)

PURPOSE_INSTRUCTIONS = {
    "difference": "Set out how they differ, point by point.",
    "similarity": "Set out what they have in common, and note any important difference.",
    "superiority": "Weigh their strengths and weaknesses, then say which is better for what, and why.",
}
# The sentence that relates the items to each other, by purpose (offline engine).
_RELATION = {
    "difference": ("Difference", re.compile(r"\b(?:whereas|while|unlike|than|differ\w*|distinct|contrast|instead|but)\b", re.I)),
    "similarity": ("In common", re.compile(r"\b(?:both|similar\w*|alike|also|same|share\w*|common|like)\b", re.I)),
    "superiority": ("Weighing them", re.compile(r"\b(?:better|worse|more|less|advantage\w*|prefer\w*|superior|than|best)\b", re.I)),
}

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
    text = re.sub(rf"^(?:{_LEAD_ARTICLE} )+", "", text.strip(" ,.;:?!\"'"), flags=re.I)
    text = re.sub(r"\s+(?:in|for|when|if|regarding|with respect to|as|at)\s+.*$", "", text, flags=re.I)
    text = re.sub(rf"(?:^|\s+)(?:{_COMPARATIVE})$", "", text, flags=re.I)
    return text.strip(" ,.;:?!\"'")


def _purpose(text: str) -> str:
    lowered = text.lower()
    if re.search(r"\b(similar\w*|in common|alike|same)\b", lowered):
        return "similarity"
    if re.search(rf"\b(?:{_COMPARATIVE}|prefer\w*|should (?:i|we)|which (?:one|is)|rather)\b", lowered) and not re.search(
        r"\bdifferen", lowered
    ):
        return "superiority"
    return "difference"


def _candidates(text: str) -> list[str]:
    """The spans that may hold the items: both sides of a colon ("X or Y: which...", "Which is better: X or Y")."""
    if ":" not in text:
        return [text]
    before, after = text.split(":", 1)
    return [after.strip(), before.strip()] if re.search(r"\s(?:or|vs\.?|versus|and)\s", after) else [before.strip(), after.strip()]


# A word that reads as an adjective ("Australian", "digital", "primary"): alone it names no thing.
_ADJECTIVE = re.compile(r"\w+(?:an|ese|ish|ic|al|ern|ive|ous|ary)$", re.I)


def _share_object(items: list[str]) -> list[str]:
    """Two items that share words written once:
    - "rent or buy a house" compares renting a house with buying one: a bare first verb takes the object;
    - "the Australian and New Zealand flags" compares two flags: a bare first adjective takes the last noun."""
    if len(items) == 2 and len(items[0].split()) == 1 and len(items[1].split()) > 1:
        rest = items[1].split(maxsplit=1)[1]
        if re.match(r"(?:a|an|the|my|your|our|their|his|her|its)\b", rest, re.I):
            return [f"{items[0]} {rest}", items[1]]
        if _ADJECTIVE.fullmatch(items[0]):  # the second item's own modifier is its first word, or a name
            words = items[1].split()
            named = next((i for i, word in enumerate(words) if not word[:1].isupper()), len(words))
            return [" ".join([items[0], *words[max(named, 1) :]]), items[1]]
    return items


def offline_plan(question: str) -> ComparisonPlan:
    """Items and purpose from common phrasings ('X vs Y', 'difference between X and Y', 'X or Y')."""
    text = normalise(question)
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


# Words that say "compare" rather than what is compared: they would pull in passages about differences in general.
_COMPARING_WORDS = re.compile(
    rf"^(?:differ\w*|compar\w*|similar\w*|contrast\w*|distinguish\w*|versus|vs|key|main|core|essential|{_COMPARATIVE})$", re.I
)


def item_query(item: str, question: str, items: list[str]) -> str:
    """The item, then the question's other content words: "Forgotten Pills film came first" finds the film,
    where "Forgotten Pills" alone finds contraceptive tablets. The item's own words come first and stay the
    majority for a short question; words of the other items and of comparing itself are left out."""
    named = {w.lower() for other in items for w in content_words(other)}
    context = [w for w in content_words(question) if w.lower() not in named and not _COMPARING_WORDS.match(w)]
    return " ".join([item, *dict.fromkeys(context)])


PLAN = PlanTask(role="plan:comparison", prompt=PLAN_COMPARISON, schema=ComparisonPlan, offline=offline_plan)


class ComparisonStrategy:
    """Retrieve for the question and for each item, dedupe, rerank against the question, answer by purpose.

    >>> ComparisonStrategy().name
    'comparison'
    """

    name = "comparison"
    plan = PLAN

    async def run(self, question: str, ctx: StrategyContext) -> StrategyOutput:
        plan = await ctx.engine.plan(self.plan, question, ctx.trace)
        items = keep_at_most(plan.items, MAX_ASPECTS, "items", "plan:comparison", ctx.trace)
        ctx.emit("plan", plan=plan.model_dump())
        ctx.attempt = StrategyOutput(answer="", plan=plan)  # kept in the result if this falls back
        queries = [item_query(item, question, items) for item in items]
        by_question, *per_item = await ctx.retrieve_many([question, *queries], max(ctx.top_k, ctx.candidates_k // 2))
        best = await ctx.rerank(question, union(per_item), len(items))
        # The question's own top passages (never less evidence than plain RAG), every item's best passage
        # (no item goes unanswered because the others rank higher), and the item passages closest to the question.
        sources = ctx.book.add(union([by_question[: ctx.top_k], [hits[0] for hits in per_item if hits], best]))
        numbers = {s.passage_id: s.number for s in sources}
        aspects = [
            Aspect(label=item, query=query, source_numbers=[numbers[h.passage_id] for h in hits if h.passage_id in numbers])
            for item, query, hits in zip(items, queries, per_item)
        ]
        per_item_sentences = 2 if len(items) == 2 else 1
        label, cue = _RELATION[plan.purpose]
        task = WriteTask(
            role="answer",
            prompt=COMPARISON_ANSWER,
            values={
                "question": question,
                "purpose": plan.purpose,
                "items": "; ".join(items),
                "purpose_instruction": PURPOSE_INSTRUCTIONS[plan.purpose],
            },
            sources=sources,
            extract=Extract(
                (
                    *(Section(query=query, label=item, sentences=per_item_sentences, about=(item,)) for item, query in zip(items, queries)),
                    Section(query=question, label=label, sentences=1, cue=cue, optional=True, about=tuple(items)),
                ),
                layout="bullets",
                header=f"Comparing {', '.join(items)} ({plan.purpose}):",
            ),
        )
        return StrategyOutput(answer=await ctx.write_answer(task), plan=plan, aspects=aspects)
