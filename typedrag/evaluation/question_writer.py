"""`eval questions`: an LLM writes questions of each non-factoid type from passages of the user's documents.

A user with documents but no question set can start `eval compare` with these. Passages are drawn from the
documents in one seeded pass (reservoir sampling: any corpus size, bounded memory); for each type the model
sees a few of them and writes questions, each naming the passage it is about. Replies are pydantic-validated
structured outputs (one repair, then a recorded failure); questions that repeat one already kept, word for
word or nearly (MiniLM cosine), are dropped. Each kept question also gets the shipped classifier's type,
so the file shows where the router would disagree with the type it was written for.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field, field_validator

from typedrag.corpus import chunk_document, iter_documents
from typedrag.embed import Embedder, default_embedder
from typedrag.errors import LLMError, RunError
from typedrag.jsonlog import json_row, numbered_lines
from typedrag.llm.base import ChatModel
from typedrag.prompts import PLANNER, Prompt, format_sources, reply_format
from typedrag.records import Passage

# The kinds a question can be written as: NF-CATS's non-factoid types, in our own words.
KINDS = {
    "EVIDENCE-BASED": "asks what something is, what it does or how it works: a description from the facts",
    "COMPARISON": "asks how two or more named things differ or resemble each other, or which of them suits a purpose better",
    "EXPERIENCE": "asks for advice, recommendations or good practices on a topic",
    "REASON": "asks why something happens, is done, or is the way it is",
    "INSTRUCTION": "asks how to do or achieve something: the steps or the method",
    "DEBATE": "asks whether something is a good idea, right or worth it: a question with arguments on more than one side",
}
NEAR_DUPLICATE = 0.9  # MiniLM cosine at or above which two questions ask the same thing
MIN_WORDS = 8  # passages shorter than this say too little to ask about
ATTEMPTS = 2  # requests per type at most: the second only when duplicates left the first short

WRITE_QUESTIONS = Prompt(
    "write_questions",
    "You write realistic questions that people who use a set of documents would ask about them. " + PLANNER,
    "Passages from the documents:\n{sources}\n\n"
    "Kind: {kind}: a question that {definition}.\n"
    "Write {count} questions of this kind that a user of these documents might ask, each about one passage above "
    "(give its number) and answerable at least in part from the documents. Word them the way people type "
    "questions, each different from the others; do not copy sentences from the passages.\n{reply_format}",
)


class WrittenQuestion(BaseModel):
    """One question and the number of the passage it is about."""

    question: str = Field(min_length=10, max_length=300, description="the question, as a user would type it")
    passage: int = Field(ge=1, description="the number of the passage it is about")

    @field_validator("question", mode="before")
    @classmethod
    def _one_line(cls, value: object) -> object:
        return " ".join(value.split()) if isinstance(value, str) else value

    @field_validator("question")
    @classmethod
    def _asks(cls, value: str) -> str:
        if not value.endswith("?"):
            raise ValueError("a question ends with a question mark")
        return value


class WrittenQuestions(BaseModel):
    """The model's reply: the questions it wrote."""

    questions: list[WrittenQuestion] = Field(min_length=1, max_length=20, description="the questions")


@dataclass
class WritingReport:
    """What a run wrote: rows added, and per type how many were dropped and why."""

    added: list[dict] = field(default_factory=list)
    kept_before: int = 0
    dropped: Counter = field(default_factory=Counter)  # reason -> count
    errors: list[str] = field(default_factory=list)


def sample_passages(sources: Iterable[Path | str], count: int, seed: int = 0) -> list[Passage]:
    """`count` passages drawn evenly from every passage of the documents (reservoir sampling, seeded)."""
    rng = random.Random(seed)
    chosen: list[Passage] = []
    seen = 0
    problems: list = []
    for document in iter_documents(sources, problems=problems):
        for passage in chunk_document(document):
            if len(passage.text.split()) < MIN_WORDS:
                continue
            seen += 1
            if len(chosen) < count:
                chosen.append(passage)
            else:
                slot = rng.randrange(seen)
                if slot < count:
                    chosen[slot] = passage
    rng.shuffle(chosen)
    return chosen


def normalised(question: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", question.lower()).split())


@dataclass
class _Numbered:
    """A passage as a prompt shows it (format_sources reads number, where and text)."""

    number: int
    where: str
    text: str


class QuestionWriter:
    """Writes questions of each kind with `model`, keeping them apart from each other and from `existing`."""

    def __init__(self, model: ChatModel, embedder: Embedder | None = None) -> None:
        self.model = model
        self.embedder = embedder or default_embedder()

    async def write(
        self, passages: Sequence[Passage], wanted: dict[str, int], existing: Sequence[dict], *, per_prompt: int = 4
    ) -> WritingReport:
        """For each kind, `wanted[kind]` new questions (fewer if the model keeps repeating itself)."""
        report = WritingReport(kept_before=len(existing))
        kept_texts = [row["question"] for row in existing]
        kept_vectors = self._vectors(kept_texts)
        taken = {str(row.get("id")) for row in existing}
        offset = len(existing)  # a top-up shows other passages than the run that wrote the file
        for kind, count in wanted.items():
            for attempt in range(ATTEMPTS):
                missing = count - sum(1 for row in report.added if row["type"] == kind)
                if missing <= 0:
                    break
                shown = [passages[(offset + i) % len(passages)] for i in range(per_prompt)]
                offset += per_prompt
                written = await self._ask(kind, shown, missing + (1 if attempt else 0), report)
                for item in written:
                    if item.passage > len(shown):
                        report.dropped["names no passage shown"] += 1
                        continue
                    vector = self._vectors([item.question])
                    if normalised(item.question) in {normalised(t) for t in kept_texts}:
                        report.dropped["repeats a question word for word"] += 1
                        continue
                    if len(kept_texts) and float((kept_vectors @ vector.T).max()) >= NEAR_DUPLICATE:
                        report.dropped["nearly repeats a kept question"] += 1
                        continue
                    if missing <= 0:
                        report.dropped["more than asked for"] += 1
                        continue
                    passage = shown[item.passage - 1]
                    question_id = _free_id(kind, taken)
                    taken.add(question_id)
                    report.added.append(
                        {
                            "id": question_id,
                            "question": item.question,
                            "type": kind,
                            "about": passage.passage_id,
                            "where": _where(passage),
                            "written_by": self.model.name,
                        }
                    )
                    kept_texts.append(item.question)
                    kept_vectors = np.vstack([kept_vectors, vector]) if len(kept_vectors) else vector
                    missing -= 1
        return report

    async def _ask(self, kind: str, shown: list[Passage], count: int, report: WritingReport) -> list[WrittenQuestion]:
        numbered = [_Numbered(i, _where(p), p.text) for i, p in enumerate(shown, 1)]
        messages = WRITE_QUESTIONS.messages(
            sources=format_sources(numbered),
            kind=kind,
            definition=KINDS[kind],
            count=str(count),
            reply_format=reply_format(WrittenQuestions),
        )
        try:
            completion = await self.model.complete(
                messages, role="write:questions", schema=WrittenQuestions, max_tokens=900, temperature=0.7
            )
        except LLMError as error:
            report.errors.append(f"{kind}: {error}")
            return []
        if completion.parsed is None:
            report.errors.append(f"{kind}: {completion.call.error}")
            return []
        return completion.parsed.questions

    def _vectors(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.asarray(self.embedder.embed(texts), dtype=np.float32)


def _free_id(kind: str, taken: set[str]) -> str:
    """The first `<kind>-NNN` id not taken yet (`evidence-001`, `reason-002`, ...)."""
    number = 1
    while f"{kind.lower().split('-')[0]}-{number:03d}" in taken:
        number += 1
    return f"{kind.lower().split('-')[0]}-{number:03d}"


def _where(passage: Passage) -> str:
    return f"{passage.title} › {passage.section}" if passage.section else passage.title


def read_existing(path: Path) -> list[dict]:
    """The questions already in `path` (none if it does not exist); RunError names a line that is not a question."""
    if not path.exists():
        return []
    rows = []
    try:
        lines = list(numbered_lines(path))
    except ValueError as error:  # a line that is not UTF-8, named
        raise RunError(f"{error}; give another --out") from None
    for number, line in lines:
        try:
            row = json_row(line)
        except ValueError:
            row = None
        if not isinstance(row, dict) or not isinstance(row.get("question"), str):
            raise RunError(f"{path}:{number} is not a question row ({{question, ...}}); give another --out")
        rows.append(row)
    return rows


def wanted_per_kind(kinds: Sequence[str], per_type: int, existing: Sequence[dict]) -> dict[str, int]:
    """How many more of each kind the file needs to hold `per_type` of it."""
    have = Counter(str(row.get("type", "")).upper() for row in existing)
    return {kind: max(0, per_type - have[kind]) for kind in kinds}


async def write_questions(
    model: ChatModel,
    sources: Sequence[Path | str],
    out: Path,
    *,
    kinds: Sequence[str] = tuple(KINDS),
    per_type: int = 4,
    seed: int = 0,
    classify=None,
) -> WritingReport:
    """Top the file `out` up to `per_type` questions of each kind; returns what was added and dropped."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise RunError(f"unknown question kinds {unknown}; choose from {', '.join(k.lower() for k in KINDS)}")
    existing = read_existing(out)
    wanted = wanted_per_kind(kinds, per_type, existing)
    if not any(wanted.values()):
        return WritingReport(kept_before=len(existing))
    passages = await asyncio.to_thread(sample_passages, sources, max(8, 4 * ATTEMPTS * len(kinds)), seed)
    if not passages:
        raise RunError("no passage to write questions about: the sources hold no readable text")
    report = await QuestionWriter(model).write(passages, wanted, existing)
    if classify is not None and report.added:
        predictions = await classify([row["question"] for row in report.added])
        for row, prediction in zip(report.added, predictions):
            row["classified_as"] = str(prediction.label)
    with out.open("a", encoding="utf-8") as file:
        for row in report.added:
            file.write(json.dumps(row, ensure_ascii=False) + "\n")
    return report
