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
from typedrag.jsonlog import json_row, numbered_lines


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
        for number, line in _lines(file):
            try:
                question = _parse(json_row(line), file.stem, number)
            except (ValueError, KeyError, TypeError) as error:
                raise DatasetError(f"{file}:{number}: {_said(error)}") from None
            if question.id in seen:
                raise DatasetError(f"{file}:{number}: duplicate question id {question.id!r}")
            seen.add(question.id)
            questions.append(question)
    return questions


def _lines(path: Path):
    """`numbered_lines`, a line that is not UTF-8 a DatasetError naming it."""
    try:
        yield from numbered_lines(path)
    except ValueError as error:
        raise DatasetError(str(error)) from None


def _said(error: Exception) -> str:
    """What is wrong with a row, in one line ("'question'" for a missing key says too little)."""
    if isinstance(error, KeyError):
        return f"the row has no {error.args[0]!r} field"
    return " ".join(str(error).split())[:300]


def load_questions(path: Path) -> list[EvalQuestion]:
    """Questions to compare, from one file: JSONL rows as `load_dataset` reads them but with references
    optional (ids default to the content id `typedrag ask --file` uses), or a .txt file, one per line."""
    from typedrag.batch import content_id

    path = Path(path)
    if not path.is_file():
        raise DatasetError(
            f"no question file at {path}: give a .jsonl file ({{question, id?, type?, references?}} per line) or a .txt file with one question per line"
        )
    questions: list[EvalQuestion] = []
    seen: set[str] = set()
    for number, line in _lines(path):
        if path.suffix != ".jsonl":
            text = " ".join(line.split())
            question = EvalQuestion(content_id(text), text, path.stem, ())
        else:
            try:
                row = json_row(line)
                if not isinstance(row, dict):
                    raise ValueError("expected a JSON object with a `question` field")
                if isinstance(row.get("question"), str) and row.get("id") is None:
                    row = {**row, "id": content_id(row["question"])}
                question = _parse(row, path.stem, number, need_references=False)
            except (ValueError, KeyError, TypeError) as error:
                raise DatasetError(f"{path}:{number}: {_said(error)}") from None
        if not question.text.strip():
            raise DatasetError(f"{path}:{number}: the question is empty")
        if question.id in seen:
            raise DatasetError(f"{path}:{number}: duplicate question id {question.id!r}")
        seen.add(question.id)
        questions.append(question)
    return questions


def _parse(row: dict, source: str, number: int, need_references: bool = True) -> EvalQuestion:
    """One row, every field of the kind it must be: a malformed one fails here, before any model is called,
    not after every question was answered and judged (a number as `type` ended `eval compare` there)."""
    if not isinstance(row, dict):
        raise ValueError("expected a JSON object")
    if "question_text" in row:  # Wiki-NFQA
        texts, grades = _kind(row, "answer_list", list), _kind(row, "answer_label", list)
        if len(texts) != len(grades):
            raise ValueError("answer_list and answer_label differ in length")
        question_id = _kind(row, "question_id", (str, int))
        return EvalQuestion(
            str(question_id), _kind(row, "question_text", str), source, _references(zip(texts, grades), need_references)
        )
    if "question" in row:
        references = _kind(row, "references", (list, type(None))) or []
        if not all(isinstance(r, dict) for r in references):
            raise ValueError("`references` must be a list of objects {text, grade}")
        pairs = [(r["text"], r["grade"]) for r in references]
        question_id = _kind(row, "id", (str, int, type(None)))
        gold = _kind(row, "type", (str, type(None)))
        question_id = str(question_id if question_id is not None and question_id != "" else f"{source}-{number}")
        return EvalQuestion(question_id, _kind(row, "question", str), source, _references(pairs, need_references), gold)
    raise ValueError("row has neither `question_text` (Wiki-NFQA) nor `question` (generic format)")


_KIND_NAMES = {str: "text", int: "a whole number", list: "a list", type(None): "null"}


def _kind(row: dict, key: str, kinds: type | tuple[type, ...]):
    """`row[key]` when it is of one of `kinds` (a bool is no number), else a ValueError saying what it must be."""
    value = row[key] if not isinstance(kinds, tuple) or type(None) not in kinds else row.get(key)
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        wanted = " or ".join(_KIND_NAMES.get(kind, kind.__name__) for kind in kinds)
        raise ValueError(f"`{key}` must be {wanted}, not {type(value).__name__} {str(json.dumps(value))[:60]}")
    return value


def _references(pairs, needed: bool = True) -> tuple[Reference, ...]:
    pairs = list(pairs)
    if not all(
        isinstance(text, str) and isinstance(grade, int) and not isinstance(grade, bool) for text, grade in pairs
    ):
        raise ValueError("a reference's `text` must be text and its `grade` a whole number")
    references = tuple(Reference(text, grade) for text, grade in pairs if text.strip())
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
