"""Answer quality, typed vs plain RAG, in one run: does Typed-RAG earn its decomposition?

Prints, side by side for `rag` and `typed`:
  a. Wiki-NFQA (all 945 questions by default) over an index of the shared Wikipedia corpus: the share of
     answers containing the source dataset's short answer (normalised; any alias of a list counts), and of
     those also found in the retrieved passages ("grounded": not just echoed from the question, as a
     comparison answer naming both items of "A or B?" would), per predicted type and per source, beside
     the retrieval ceiling (the short answer anywhere in the
     passages that method retrieved) and the mean answer length in words;
  b. proxy MPR per type (embedding-similarity placement among the graded references; a proxy, not an
     LLM judge);
  c. the key-term set (bench/data/keyterms.jsonl) over the demo index: the share of answers that contain
     at least one term of every key-term group, the type decided by the classifier as for a user;
  d. aspect diversity of multi-aspect typed answers: two aspects with identical or >= 50%-overlapping
     sub-answers, and two aspects with identical passage sets.

    python bench/bench_quality.py --index /tmp/enwiki-index --demo-index demo-index
    python bench/bench_quality.py ... --llm MODEL --base-url URL      # the same with any OpenAI-compatible endpoint

Wiki-NFQA is non-factoid by construction, so its questions are routed to the likeliest non-factoid
type (as the paper and `typedrag eval` do); the key-term set uses the default routing.
"""

from __future__ import annotations

import argparse
import asyncio
import ast
import json
import re
import string
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

from typedrag.config import load_settings  # noqa: E402
from typedrag.evaluation.datasets import load_dataset  # noqa: E402
from typedrag.evaluation.judges import ProxyJudge  # noqa: E402
from typedrag.evaluation.linkage import select_references  # noqa: E402
from typedrag.evaluation.metrics import percentile_rank  # noqa: E402
from typedrag.factory import Resources, build_pipeline  # noqa: E402
from typedrag.strategies.decomposed import repeats  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
KEYTERMS = ROOT / "bench" / "data" / "keyterms.jsonl"
DECOMPOSING = ("COMPARISON", "EXPERIENCE", "REASON", "INSTRUCTION", "DEBATE")
METHODS = ("rag", "typed")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans({c: " " for c in string.punctuation})


def normalise(text: str) -> str:
    """Lower case, punctuation and articles dropped, whitespace collapsed, padded for whole-word matching."""
    return f" {' '.join(_ARTICLES.sub(' ', text.lower().translate(_PUNCTUATION)).split())} "


def aliases(ground_truth: str) -> list[str]:
    """The short answer's aliases: TriviaQA and some NQ rows hold a stringified Python list."""
    text = ground_truth.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            value = ast.literal_eval(text)  # data file of the benchmark, never model output
            if isinstance(value, list):
                return [str(v) for v in value if str(v).strip()]
        except (ValueError, SyntaxError):
            pass
    return [text]


def contains(text: str, names: list[str]) -> bool:
    haystack = normalise(text)
    return any(len(n) > 2 and n in haystack for n in (normalise(a) for a in names))


def ground_truths(dataset: Path) -> dict[str, list[str]]:
    truths = {}
    for file in sorted(dataset.glob("*.jsonl")):
        for line in file.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            truth = (row.get("answer_dict", {}).get("ground_truth") or {}).get("answer1")
            if truth:
                truths[str(row["question_id"])] = aliases(str(truth))
    return truths


async def answer_all(pipeline, items: list[tuple[str, str]], concurrency: int) -> dict[tuple[str, str], object]:
    """(id, method) -> AnswerResult; the type is decided once per question and shared by both methods."""
    limit = asyncio.Semaphore(concurrency)
    results: dict[tuple[str, str], object] = {}
    done = 0

    async def one(item_id: str, question: str) -> None:
        nonlocal done
        async with limit:
            decision = await pipeline.decide_type(question)
            for method in METHODS:
                results[(item_id, method)] = await pipeline.answer(question, method, decision=decision)
            done += 1
            if done % 50 == 0:
                print(f"  {done}/{len(items)} questions", file=sys.stderr, flush=True)

    await asyncio.gather(*(one(i, q) for i, q in items))
    return results


def pct(hits: int, total: int) -> str:
    return f"{100 * hits / total:5.1f}% ({hits}/{total})" if total else "   –"


def diversity(results) -> dict[str, int]:
    """Multi-aspect typed answers, and those with repeated sub-answers or identical passage sets."""
    counts = {"multi_aspect": 0, "repeated_answers": 0, "identical_passages": 0}
    for result in results:
        live = [a for a in result.aspects if a.error is None and a.answer]
        if len(live) < 2:
            continue
        counts["multi_aspect"] += 1
        pairs = [(a, b) for i, a in enumerate(live) for b in live[i + 1 :]]
        counts["repeated_answers"] += any(a.answer == b.answer or repeats(a.answer, b.answer) for a, b in pairs)
        counts["identical_passages"] += any(sorted(a.source_numbers) == sorted(b.source_numbers) for a, b in pairs)
    return counts


async def wiki_nfqa(args, resources: Resources) -> dict:
    settings = load_settings({"index": str(args.index), "assume_non_factoid": True, "llm.model": args.llm, "llm.base_url": args.base_url})
    pipeline = build_pipeline(settings, resources)
    dataset = load_dataset(args.dataset)
    if args.limit:
        from typedrag.evaluation.datasets import stratified_sample

        dataset = stratified_sample(dataset, args.limit, seed=0)
    truths = ground_truths(args.dataset)
    questions = [q for q in dataset if q.id in truths]
    started = time.perf_counter()
    results = await answer_all(pipeline, [(q.id, q.text) for q in questions], args.concurrency)
    seconds = time.perf_counter() - started
    judge = ProxyJudge()
    rows = []
    for q in questions:
        row = {"id": q.id, "source": q.source, "type": results[(q.id, "typed")].type.type}
        for method in METHODS:
            result = results[(q.id, method)]
            references = select_references(q)
            verdict = await judge.place(q.text, references, result.answer, 1)
            answered = contains(result.answer, truths[q.id])
            retrieved = contains(" ".join(s.text for s in result.sources), truths[q.id])
            row[method] = {
                "contains": answered,
                "grounded": answered and retrieved,  # not by echoing the question (2wiki: "A or B?")
                "ceiling": retrieved,
                "words": len(result.answer.split()),
                "mpr": percentile_rank(verdict.position, len(references)),
                "strategy": result.strategy,
            }
        rows.append(row)
    return {"rows": rows, "seconds": seconds, "typed_results": [results[(q.id, "typed")] for q in questions],
            "engine": pipeline.engine.name}


def report_wiki(data: dict) -> list[str]:
    rows = data["rows"]
    lines = [f"## a. Wiki-NFQA: {len(rows)} questions, answered by {data['engine']} ({data['seconds']:.0f} s for both methods)", ""]
    lines += ["| group | n | rag contains | typed contains | rag grounded | typed grounded | rag ceiling | typed ceiling | rag words | typed words | rag proxy-MPR | typed proxy-MPR |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups["all"].append(row)
        groups[f"type {row['type']}"].append(row)
        groups[f"source {row['source']}"].append(row)
        if row["type"] in DECOMPOSING:
            groups["decomposing types (5)"].append(row)
    order = ["all", "decomposing types (5)"] + sorted(k for k in groups if k.startswith("type ")) + sorted(
        k for k in groups if k.startswith("source ")
    )
    for key in order:
        members = groups[key]
        n = len(members)
        cells = [key, str(n)]
        for field in ("contains", "grounded", "ceiling"):
            for method in METHODS:
                cells.append(pct(sum(r[method][field] for r in members), n))
        for method in METHODS:
            cells.append(f"{sum(r[method]['words'] for r in members) / n:.0f}")
        for method in METHODS:
            cells.append(f"{sum(r[method]['mpr'] for r in members) / n:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    rag_words = sum(r["rag"]["words"] for r in rows) / len(rows)
    typed_words = sum(r["typed"]["words"] for r in rows) / len(rows)
    lines += ["", f"Mean answer length: typed / rag = {typed_words / rag_words:.2f}x (all questions)."]
    return lines


async def keyterms(args, resources: Resources) -> dict:
    settings = load_settings({"index": str(args.demo_index), "llm.model": args.llm, "llm.base_url": args.base_url})
    pipeline = build_pipeline(settings, resources)
    items = [json.loads(line) for line in KEYTERMS.read_text(encoding="utf-8").splitlines() if line.strip()]
    results = await answer_all(pipeline, [(it["id"], it["question"]) for it in items], args.concurrency)
    rows = []
    for item in items:
        row = {"id": item["id"], "type": item["type"], "predicted": results[(item["id"], "typed")].type.type}
        for method in METHODS:
            text = results[(item["id"], method)].answer.lower()
            row[method] = all(any(term.lower() in text for term in group) for group in item["groups"])
        rows.append(row)
    return {"rows": rows, "typed_results": [results[(it["id"], "typed")] for it in items], "results": results, "items": items,
            "engine": pipeline.engine.name}


def report_keyterms(data: dict) -> list[str]:
    rows = data["rows"]
    lines = [f"## c. Key-term set: {len(rows)} questions over the demo index, answered by {data['engine']} (type by the classifier)", ""]
    lines += ["| labelled type | n | routed as labelled | rag all groups | typed all groups |", "|---|---|---|---|---|"]
    by_type: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_type[row["type"]].append(row)
        by_type["all"].append(row)
    for key in ["all"] + sorted(k for k in by_type if k != "all"):
        members = by_type[key]
        n = len(members)
        routed = sum(r["predicted"] == r["type"] for r in members)
        lines.append(f"| {key} | {n} | {pct(routed, n)} | {pct(sum(r['rag'] for r in members), n)} | {pct(sum(r['typed'] for r in members), n)} |")
    return lines


def report_diversity(name: str, results) -> list[str]:
    counts = diversity(results)
    n = counts["multi_aspect"]
    return [
        f"- {name}: {n} multi-aspect typed answers; repeated (identical or >= 50% overlapping) sub-answers in "
        f"{pct(counts['repeated_answers'], n)}; identical passage sets in {pct(counts['identical_passages'], n)}"
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, help="index of ../shared/data/corpora/enwiki-2015-core.jsonl.gz")
    parser.add_argument("--demo-index", type=Path, help="index of demo:vital-articles (for the key-term set)")
    parser.add_argument("--dataset", type=Path, default=SHARED / "wiki-nfqa")
    parser.add_argument("--limit", type=int, default=None, help="Wiki-NFQA questions (default: all 945)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--llm", default=None, help="model name at --base-url (default: the offline engine)")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--dump", type=Path, default=None, help="write every row as JSONL here")
    args = parser.parse_args()
    print(machine_line())
    lines: list[str] = []
    resources = Resources()
    diversity_lines = ["## d. Aspect diversity", ""]
    dump = []
    try:
        if args.index:
            wiki = await resources.run(wiki_nfqa(args, resources))
            lines += report_wiki(wiki) + [""]
            diversity_lines += report_diversity("Wiki-NFQA", wiki["typed_results"])
            dump += [{"set": "wiki-nfqa", **r} for r in wiki["rows"]]
        if args.demo_index:
            kt = await resources.run(keyterms(args, resources))
            lines += report_keyterms(kt) + [""]
            diversity_lines += report_diversity("key-term set", kt["typed_results"])
            dump += [{"set": "keyterms", **r} for r in kt["rows"]]
    finally:
        resources.close()
    print("\n".join(lines + diversity_lines))
    if args.dump:
        args.dump.write_text("".join(json.dumps(r) + "\n" for r in dump), encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(main())
