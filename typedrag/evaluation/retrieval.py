"""`typedrag eval retrieval`: how well an index finds what your questions need, on your own documents.

Questions come as JSONL, one object a line: `question` (required), `id`, `type` (an NF-CATS label; else the
shipped classifier's), and what counts as found, if known:
- `relevant`: passage ids (`doc#3`) or document ids (`doc`, any of its passages counts), or a list of
  groups of them where any one passage of a group will do (`[["a#0", "b#2"], ["c#1"]]`): recall@k is the share
  of groups with a passage in the top k, MRR the reciprocal rank of the first, nDCG@k counts each group once,
  at its first passage;
- `key_terms` (or `groups`, as in bench/data/keyterms*.jsonl): groups of alternative words; the top k "hold the
  key terms" when every group has an alternative in their text (case-insensitive).
A question with neither is measured by its own key words (`terms of the question found` in the top k), and,
with `--judge MODEL`, by an LLM judge grading each passage 0 (unrelated), 1 (on topic) or 2 (answers it).

Each retrieval mode asked for (`--retrieval bm25,dense,hybrid`) is run on the same index and reported side
by side, overall and per question type: a table on the terminal and an HTML report.
"""

from __future__ import annotations

import html
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from typedrag.errors import QuestionError, UserError
from typedrag.jsonlog import json_row, numbered_lines
from typedrag.questions import clean_question
from typedrag.records import ScoredPassage
from typedrag.text import content_words, for_terminal

DEFAULT_K = 5


class RetrievalQuestion(BaseModel):
    """One line of the questions file."""

    question: str = Field(min_length=1)
    id: str | None = None
    type: str | None = None
    relevant: list[str | list[str]] = []
    key_terms: list[list[str]] = []

    @property
    def groups(self) -> list[list[str]]:
        """The relevant ids as groups, any one of a group counting."""
        return [[item] if isinstance(item, str) else list(item) for item in self.relevant]


def read_questions(path: Path) -> list[RetrievalQuestion]:
    """The questions of a JSONL file; `UserError` naming the line of the first bad one."""
    questions = []
    try:
        lines = list(numbered_lines(path))
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None
    except ValueError as error:  # a line that is not UTF-8, named
        raise UserError(str(error)) from None
    for number, line in lines:
        try:
            data = json_row(line)
            if isinstance(data, dict) and "groups" in data and "key_terms" not in data:
                data["key_terms"] = data.pop("groups")
            question = RetrievalQuestion.model_validate(data)
            # as long as `ask` takes one (typedrag.questions): an 11 MB question is refused, not embedded
            question = question.model_copy(
                update={"question": clean_question(question.question), "id": question.id or str(number)}
            )
        except (ValueError, QuestionError) as error:
            raise UserError(f"{path}:{number}: not a question ({' '.join(str(error).split())[:200]})") from None
        questions.append(question)
    if not questions:
        raise UserError(f"{path} holds no question")
    return questions


@dataclass
class Scored:
    """One question retrieved in one mode: the passages found and what they score."""

    question: RetrievalQuestion
    type: str
    hits: list[ScoredPassage]
    recall: float | None = None  # with relevant ids
    reciprocal_rank: float | None = None
    ndcg: float | None = None
    first_rank: int | None = None
    key_terms: float | None = None  # 1.0 when the top k hold every key-term group
    question_terms: float | None = None  # share of the question's own words found
    judged: list[int] = field(default_factory=list)  # the LLM judge's grades of the top k


def matches(hit: ScoredPassage, wanted: str) -> bool:
    return wanted in (hit.passage_id, hit.passage.doc_id)


def score(question: RetrievalQuestion, type_: str, hits: list[ScoredPassage], k: int) -> Scored:
    """A question's metrics from its ranked passages (the first `k` count)."""
    top = hits[:k]
    result = Scored(question, type_, top)
    groups = question.groups
    if groups:
        first_of = [
            next((rank for rank, hit in enumerate(top, 1) if any(matches(hit, w) for w in group)), None)
            for group in groups
        ]
        found = [rank for rank in first_of if rank is not None]
        result.recall = len(found) / len(groups)
        result.first_rank = min(found, default=None)
        result.reciprocal_rank = 1 / result.first_rank if result.first_rank else 0.0
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(groups), k)))
        result.ndcg = sum(1 / math.log2(rank + 1) for rank in found) / ideal
    text = " ".join(hit.passage.text.lower() for hit in top)
    if question.key_terms:
        result.key_terms = float(all(any(term.lower() in text for term in group) for group in question.key_terms))
    words = list(dict.fromkeys(w.lower() for w in content_words(question.question)))
    if words:
        result.question_terms = sum(w in text for w in words) / len(words)
    return result


@dataclass
class Report:
    """Every mode's scored questions, and how the run was made."""

    k: int
    index: str
    modes: dict[str, list[Scored]]  # mode (the retriever's name) -> one Scored per question
    judge: str | None = None

    def rows(self) -> list[dict[str, Any]]:
        """One summary row per mode and question type (type "all" first)."""
        out = []
        for mode, scored in self.modes.items():
            by_type: dict[str, list[Scored]] = defaultdict(list)
            for item in scored:
                by_type["all"].append(item)
                by_type[item.type].append(item)
            for type_ in ["all", *sorted(t for t in by_type if t != "all")]:
                out.append({"mode": mode, "type": type_, **summarise(by_type[type_])})
        return out


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def summarise(scored: list[Scored]) -> dict[str, Any]:
    judged = [s for s in scored if s.judged]
    return {
        "questions": len(scored),
        "recall": _mean([s.recall for s in scored]),
        "mrr": _mean([s.reciprocal_rank for s in scored]),
        "ndcg": _mean([s.ndcg for s in scored]),
        "key_terms": _mean([s.key_terms for s in scored]),
        "question_terms": _mean([s.question_terms for s in scored]),
        "judged_relevant": _mean([sum(g > 0 for g in s.judged) / len(s.judged) for s in judged]) if judged else None,
        "judged_answering": _mean([sum(g == 2 for g in s.judged) / len(s.judged) for s in judged]) if judged else None,
    }


COLUMNS = {  # summary key -> heading (shown only when some row has a value); "k" is the cut-off
    "recall": "recall@k",
    "mrr": "MRR",
    "ndcg": "nDCG@k",
    "key_terms": "key terms",
    "question_terms": "own words",
    "judged_relevant": "judge: relevant",
    "judged_answering": "judge: answers",
}
EXPLAINED = (
    "recall@k: the share of a question's relevant groups with a passage in the top k; MRR: 1 / the rank of the first; "
    "nDCG@k: each group counted once, at its first passage; key terms: questions whose top k hold every key-term group; "
    "own words: the share of the question's own words the top k hold; judge: the share of the top k an LLM graded "
    "relevant (1 or 2) or answering (2)."
)


def _heading(key: str, k: int) -> str:
    return COLUMNS[key].replace("@k", f"@{k}")


def evaluate(
    questions: list[RetrievalQuestion],
    retrievers: dict[str, Any],
    k: int,
    classify: Callable[[list[str]], list[str]] | None = None,
    index: str = "",
) -> Report:
    """Search every question with every retriever (`name -> Retriever`) and score what each found, SEARCH_BATCH
    questions at a time: a retriever searches a call's queries together (the dense leg as one matrix of queries by
    passages), so 100,000 questions in one call held 4.8 GB; only each question's top `k` is kept."""
    types = [q.type for q in questions]
    unknown = [i for i, t in enumerate(types) if not t]
    if unknown and classify is not None:
        for start in range(0, len(unknown), SEARCH_BATCH):
            batch = unknown[start : start + SEARCH_BATCH]
            for i, label in zip(batch, classify([questions[i].question for i in batch])):
                types[i] = label
    modes: dict[str, list[Scored]] = {}
    for name, retriever in retrievers.items():
        modes[name] = []
        for start in range(0, len(questions), SEARCH_BATCH):
            batch = questions[start : start + SEARCH_BATCH]
            found = retriever.search_many([q.question for q in batch], k)
            kinds = types[start : start + SEARCH_BATCH]
            modes[name] += [score(q, str(t or "unknown").upper(), hits, k) for q, t, hits in zip(batch, kinds, found)]
    return Report(k, index, modes)


SEARCH_BATCH = 256  # questions per search call in `evaluate`: memory bounded by the batch, not the file


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def print_table(report: Report, console) -> None:
    """One table per retrieval mode: a row per question type, "all" first."""
    from rich.table import Table
    from rich.text import Text

    rows = report.rows()
    shown = [key for key in COLUMNS if any(row[key] is not None for row in rows)]
    for mode in report.modes:
        table = Table(title=Text(for_terminal(f"{mode} · top {report.k}")), title_justify="left")
        table.add_column("type", no_wrap=True)
        table.add_column("n", justify="right")
        for key in shown:
            table.add_column(_heading(key, report.k), justify="right")
        for row in (r for r in rows if r["mode"] == mode):  # a type comes from the file: shown as text, never markup
            table.add_row(Text(for_terminal(row["type"])), str(row["questions"]), *(_cell(row[key]) for key in shown))
        console.print(table)
    console.print(EXPLAINED, style="dim")


def write_html(report: Report, path: Path) -> None:
    """A self-contained page that fits a 1,280-pixel window: the summary table, then each question with the passages
    every mode found (each linked to its document when that is a file on this machine), and a filter that keeps
    only the questions the modes disagree on."""
    e = html.escape
    rows = report.rows()
    shown = [key for key in COLUMNS if any(row[key] is not None for row in rows)]
    head = "".join(f"<th>{e(_heading(key, report.k))}</th>" for key in shown)
    body = "".join(
        f"<tr class='{'all' if row['type'] == 'all' else ''}'><td>{e(row['mode'])}</td><td>{e(row['type'])}</td>"
        f"<td>{row['questions']}</td>" + "".join(f"<td>{_cell(row[key])}</td>" for key in shown) + "</tr>"
        for row in rows
    )
    modes = list(report.modes)
    link = document_links(report.index)
    details, disagreeing = [], 0
    questions = next(iter(report.modes.values()), [])
    for i, question in enumerate(questions):
        items = [report.modes[mode][i] for mode in modes]
        cells = []
        for item in items:
            marks = []
            for rank, hit in enumerate(item.hits, 1):
                good = any(matches(hit, w) for g in item.question.groups for w in g)
                grade = f" · judge {item.judged[rank - 1]}" if len(item.judged) >= rank else ""
                name = e(hit.passage.title or hit.passage.doc_id)
                url = link(hit)
                title = f"<a href='{e(url)}'>{name}</a>" if url else name
                marks.append(
                    f"<li class='{'hit' if good else ''}'><b>{title}</b> "
                    f"<small>{e(hit.passage_id)}{grade}</small><br>{e(' '.join(hit.passage.text.split()[:40]))}…</li>"
                )
            cells.append(f"<td><div class='verdict'>{e('; '.join(_verdict(item)))}</div><ol>{''.join(marks)}</ol></td>")
        differ = disagree(items)
        disagreeing += differ
        kind = "disagree" if differ else "agree"
        details.append(
            f"<tr class='{kind}'><th colspan='{len(modes)}'>{e(question.question.id or '')} · {e(question.type)} · "
            f"{e(question.question.question)}</th></tr><tr class='{kind}'>{''.join(cells)}</tr>"
        )
    judge = f"; judged by {e(report.judge)}" if report.judge else ""
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>typedrag retrieval report</title>
<style>body{{font:14px/1.45 system-ui,sans-serif;margin:2em;max-width:1400px}}table{{border-collapse:collapse;margin-bottom:2em;max-width:100%}}
td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left;overflow-wrap:anywhere}}tr.all td{{font-weight:600;background:#f4f4f4}}
table.questions{{width:100%;table-layout:fixed}}ol{{margin:0;padding-left:1.4em}}li{{margin-bottom:4px}}li.hit{{background:#e6f4e6}}
.verdict{{color:#555;margin-bottom:4px}}small{{color:#777}}#disagree:checked~table.questions tr.agree{{display:none}}</style></head><body>
<h1>Retrieval on {e(report.index)}</h1>
<p>{len(questions)} questions, top {report.k} passages per question{judge}. Modes: {e(", ".join(modes))}.
{e(EXPLAINED)}</p>
<table><tr><th>mode</th><th>type</th><th>questions</th>{head}</tr>{body}</table>
<h2>Questions</h2><p>Relevant passages are shaded; a passage's title links to its document where that is a file here.</p>
<input type="checkbox" id="disagree"> <label for="disagree">only where the modes disagree ({disagreeing} of {len(questions)}
questions: a different verdict, or, with nothing to judge by, a different first passage)</label>
<table class="questions"><tr>{"".join(f"<th>{e(m)}</th>" for m in modes)}</tr>{"".join(details)}</table></body></html>"""
    path.write_text(page, encoding="utf-8")


def _verdict(item: Scored) -> list[str]:
    verdict = []
    if item.recall is not None:
        verdict.append(f"recall {item.recall:.2f}, first at {item.first_rank or '–'}")
    if item.key_terms is not None:
        verdict.append("key terms held" if item.key_terms else "key terms missing")
    if item.question_terms is not None:
        verdict.append(f"question's words {item.question_terms:.0%}")
    return verdict


def disagree(items: Sequence[Scored]) -> bool:
    """Whether the modes' results for one question differ: in what they are judged by (recall and first rank, key
    terms, the judge's grades), or, with none of those, in the passage each put first."""
    outcomes = {(s.recall, s.first_rank, s.key_terms, tuple(s.judged)) for s in items}
    if any(any(value not in (None, ()) for value in outcome) for outcome in outcomes):
        return len(outcomes) > 1
    return len({s.hits[0].passage_id if s.hits else None for s in items}) > 1


def document_links(index: str) -> Callable[[ScoredPassage], str | None]:
    """A passage's document as a `file:` URL (a PDF's at its page), when the index's manifest names the folder or
    file it was read from and the document is a file there; None for others (a JSONL record, a Milvus index)."""
    try:
        manifest = json.loads((Path(index) / "manifest.json").read_text(encoding="utf-8"))
        roots = [
            Path(entry["source"])
            for entry in manifest["corpus"]["sources"]
            if isinstance(entry, dict) and "source" in entry
        ]
    except (OSError, ValueError, KeyError, TypeError):
        roots = []

    def link(hit: ScoredPassage) -> str | None:
        doc = hit.passage.doc_id
        if doc.startswith(("http://", "https://")):
            return doc
        for root in roots:
            file = root / doc if root.is_dir() else root if root.name == doc else None
            if file is not None and file.is_file():
                page = f"#page={hit.passage.page}" if hit.passage.page and file.suffix.lower() == ".pdf" else ""
                return file.resolve().as_uri() + page
        return None

    return link


def write_json(report: Report, path: Path) -> None:
    data = {
        "k": report.k,
        "index": report.index,
        "judge": report.judge,
        "summary": report.rows(),
        "questions": {
            mode: [
                {
                    "id": s.question.id,
                    "type": s.type,
                    "recall": s.recall,
                    "reciprocal_rank": s.reciprocal_rank,
                    "ndcg": s.ndcg,
                    "key_terms": s.key_terms,
                    "question_terms": s.question_terms,
                    "judged": s.judged,
                    "passages": [h.passage_id for h in s.hits],
                }
                for s in scored
            ]
            for mode, scored in report.modes.items()
        },
    }
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


class PassageGrade(BaseModel):
    """An LLM judge's grade of one passage for a question."""

    grade: int = Field(
        ge=0,
        le=2,
        description="0: unrelated, 1: on the topic but does not answer, 2: answers the question or part of it",
    )


def _judge_prompt():
    from typedrag.prompts import PLANNER, Prompt

    return Prompt(
        "judge:retrieval",
        "You grade how relevant a passage is to a question, for a search engine's evaluation. " + PLANNER,
        "{question}\n\n{passage}\n\nGrade the passage: 2 if it answers the question or a part of it, 1 if it is on the "
        'question\'s topic without answering it, 0 if it is unrelated. Reply as JSON: {{"grade": 0, 1 or 2}}.',
    )


class LLMRelevanceJudge:
    """Grades each retrieved passage with a chat model (cached like every call; a reply that fails its schema
    twice counts as grade 0 and is reported as a judge failure)."""

    def __init__(self, model) -> None:
        self.model, self.name, self.failures = model, model.name, 0
        self.prompt = _judge_prompt()

    async def grade(self, question: str, hits: list[ScoredPassage]) -> list[int]:
        import asyncio

        from typedrag.errors import LLMError
        from typedrag.prompts import delimit

        async def one(hit: ScoredPassage) -> int:
            messages = self.prompt.messages(
                question=delimit("question", question),
                passage=delimit("passage", f"{hit.passage.title}: {hit.passage.text}"),
            )
            try:
                reply = await self.model.complete(messages, role="judge:retrieval", schema=PassageGrade, max_tokens=32)
                return PassageGrade.model_validate_json(reply.text).grade
            except (LLMError, ValueError):
                self.failures += 1
                return 0

        return list(await asyncio.gather(*(one(hit) for hit in hits)))

    async def grade_report(self, report: Report) -> None:
        """Every mode's passages graded (a passage two modes found is asked once: the cache answers the second)."""
        import asyncio

        for scored in report.modes.values():
            grades = await asyncio.gather(*(self.grade(item.question.question, item.hits) for item in scored))
            for item, judged in zip(scored, grades):
                item.judged = judged
        report.judge = self.name
