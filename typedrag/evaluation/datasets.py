"""Evaluation questions with graded reference answers, from Wiki-NFQA or a generic JSONL file.

Wiki-NFQA rows: `question_id`, `question_text`, `answer_list`, `answer_label` (3 = best ... 0).
Generic rows: `question`, optional `id`, optional `type`, `references`: [{"text", "grade"}] with
any integer grades, higher = better. In both, the source dataset is the file's stem, and
references with empty text are dropped (a row must keep at least one).

`load_questions` reads the same files for `eval compare`, where references are optional, and also a
.txt file of one question per line (ids as `typedrag ask --file` gives them).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from typedrag.errors import DatasetError


@dataclass(frozen=True)
class Reference:
    """A graded reference answer (higher grade = better)."""

    text: str
    grade: int


@dataclass(frozen=True)
class EvalQuestion:
    """A question with its graded references, the source file it came from and, if given, its gold type."""

    id: str
    text: str
    source: str
    references: tuple[Reference, ...]
    gold_type: str | None = None  # only the generic format can carry one


def load_dataset(path: Path) -> list[EvalQuestion]:
    """All questions in `path` (one .jsonl file, or every .jsonl file in a directory, sorted by name)."""
    path = Path(path)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise DatasetError(f"no dataset at {path}: give a .jsonl file or a directory of them")
    questions: list[EvalQuestion] = []
    seen: set[str] = set()
    for file in files:
        with file.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    question = _parse(json.loads(line), file.stem, number)
                except (ValueError, KeyError, TypeError) as error:
                    raise DatasetError(f"{file}:{number}: {error}") from None
                if question.id in seen:
                    raise DatasetError(f"{file}:{number}: duplicate question id {question.id!r}")
                seen.add(question.id)
                questions.append(question)
    return questions


def load_questions(path: Path) -> list[EvalQuestion]:
    """Questions to compare, from one file: JSONL rows as `load_dataset` reads them but with references
    optional (ids default to the content id `typedrag ask --file` uses), or a .txt file, one per line."""
    from typedrag.batch import content_id

    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"no question file at {path}: give a .jsonl file ({{question, id?, type?, references?}} per line) or a .txt file with one question per line")
    questions: list[EvalQuestion] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            if path.suffix != ".jsonl":
                text = " ".join(line.split())
                question = EvalQuestion(content_id(text), text, path.stem, ())
            else:
                try:
                    row = json.loads(line)
                    if not isinstance(row, dict):
                        raise ValueError("expected a JSON object with a `question` field")
                    if "question" in row and row.get("id") is None:
                        row = {**row, "id": content_id(str(row["question"]))}
                    question = _parse(row, path.stem, number, need_references=False)
                except (ValueError, KeyError, TypeError) as error:
                    raise DatasetError(f"{path}:{number}: {error}") from None
            if not question.text.strip():
                raise DatasetError(f"{path}:{number}: the question is empty")
            if question.id in seen:
                raise DatasetError(f"{path}:{number}: duplicate question id {question.id!r}")
            seen.add(question.id)
            questions.append(question)
    return questions


def _parse(row: dict, source: str, number: int, need_references: bool = True) -> EvalQuestion:
    if "question_text" in row:  # Wiki-NFQA
        texts, grades = row["answer_list"], row["answer_label"]
        if len(texts) != len(grades):
            raise ValueError("answer_list and answer_label differ in length")
        return EvalQuestion(str(row["question_id"]), row["question_text"], source, _references(zip(texts, grades), need_references))
    if "question" in row:
        pairs = [(r["text"], r["grade"]) for r in row.get("references") or []]
        question_id = str(row.get("id") or f"{source}-{number}")
        return EvalQuestion(question_id, str(row["question"]), source, _references(pairs, need_references), row.get("type"))
    raise ValueError("row has neither `question_text` (Wiki-NFQA) nor `question` (generic format)")


def _references(pairs, needed: bool = True) -> tuple[Reference, ...]:
    references = tuple(Reference(str(text), int(grade)) for text, grade in pairs if str(text).strip())
    if not references and needed:
        raise ValueError(
            "no reference answer with text (generic rows need `references`: [{text, grade}, ...]; "
            "to compare two methods on questions without references, use `typedrag eval compare`)"
        )
    return references


def stratified_sample(questions: list[EvalQuestion], limit: int | None, seed: int) -> list[EvalQuestion]:
    """The first `limit` questions of a seeded shuffle, stratified over source files.

    Each source gets a share of `limit` proportional to its size (largest remainder, ties to the
    bigger source), filled from its own shuffle seeded by (seed, source). The same arguments always
    give the same questions, and every source is represented as evenly as the limit allows.
    """
    if limit is None or limit >= len(questions):
        return list(questions)
    by_source: dict[str, list[EvalQuestion]] = {}
    for question in questions:
        by_source.setdefault(question.source, []).append(question)
    quotas = {s: limit * len(qs) // len(questions) for s, qs in by_source.items()}
    remainders = sorted(by_source, key=lambda s: (-(limit * len(by_source[s]) % len(questions)), -len(by_source[s]), s))
    for source in remainders[: limit - sum(quotas.values())]:
        quotas[source] += 1
    chosen: list[EvalQuestion] = []
    for source in sorted(by_source):
        pool = list(by_source[source])
        random.Random(f"{seed}:{source}").shuffle(pool)
        chosen.extend(pool[: quotas[source]])
    return chosen
