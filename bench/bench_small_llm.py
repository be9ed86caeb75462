"""The LLM path with a small model: do plans validate, do aspects survive, do citations hold?

Runs two questions per type (or --per-type N) from key-term sets over two or more corpora, each question
through Typed-RAG (forced to its labelled type, so every type's plan is exercised) and plain RAG, with any
model: a GGUF through llama.cpp (`--llm local:PATH`, one generation thread) or any OpenAI-compatible
endpoint. Prints per type:
  - plans valid first time, after repair, or failed (then plain RAG, recorded);
  - aspects kept and dropped, with the reasons;
  - citations: answers citing a source, markers removed for naming no source, sentences attributed;
  - key-term containment, typed against rag (all groups of the question's key terms in the answer);
  - falls back to plain RAG; time per answer.
With --rerun the same questions are asked again and the share of calls served from the cache is printed.
With --layouts numbered,tags the answer prompts are also run with the older tagged source layout
(`<source id=n title=...>`), to compare how often each gets cited.

    python bench/bench_small_llm.py --llm local:/path/qwen2.5-0.5b-instruct-q4_k_m.gguf \\
        --corpus demo-index=bench/data/keyterms.jsonl --corpus py-index=bench/data/keyterms-python-docs.jsonl --rerun
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

import typedrag.engines.llm_engine as llm_engine  # noqa: E402
from typedrag.config import load_settings  # noqa: E402
from typedrag.factory import Resources, build_pipeline  # noqa: E402
from typedrag.llm.base import StructuredOutcome  # noqa: E402
from typedrag.prompts import delimit  # noqa: E402

TYPES = ("EVIDENCE-BASED", "COMPARISON", "EXPERIENCE", "REASON", "INSTRUCTION", "DEBATE")
DECOMPOSING = ("REASON", "INSTRUCTION", "DEBATE")
_MARKER = re.compile(r"\[(\d{1,3})\]")


def tagged_sources(sources: list) -> str:
    """The source layout before 2026-12-01: each passage in a <source> tag (kept here only to measure it)."""
    return "\n".join(delimit("source", s.text[:1200], id=s.number, title=s.title) for s in sources)


@contextmanager
def layout(name: str):
    real = llm_engine.format_sources
    if name == "tags":
        llm_engine.format_sources = tagged_sources
    try:
        yield
    finally:
        llm_engine.format_sources = real


def pick(path: Path, per_type: int) -> list[dict]:
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    chosen: list[dict] = []
    for kind in TYPES:
        chosen += [item for item in items if item["type"] == kind][:per_type]
    return chosen


def contains(answer: str, groups: list[list[str]]) -> bool:
    text = answer.lower()
    return all(any(term.lower() in text for term in group) for group in groups)


def plan_outcome(result) -> str | None:
    plans = [c for c in result.llm_calls if c.role.startswith("plan:")]
    if not plans:
        return None
    return {StructuredOutcome.OK: "first time", StructuredOutcome.REPAIRED: "after repair"}.get(
        plans[0].structured, "failed"
    )


def citation_facts(result) -> dict:
    numbers = {s.number for s in result.sources}
    cited = [int(n) for n in _MARKER.findall(result.answer)]
    removed = sum(
        int(m.group(1)) for f in result.fallbacks for m in [re.search(r"removed (\d+) citation markers", f.reason)] if m
    )
    attributed = sum(
        int(m.group(1))
        for f in result.fallbacks
        for m in [re.search(r"; (\d+) of \d+ sentences attributed", f.reason)]
        if m
    )
    return {
        "cites": bool(cited),
        "outside": sum(n not in numbers for n in cited),
        "removed": removed,
        "attributed": attributed,
        "self_cited": bool(cited)
        and not any(f.step == "citations" and "cited none" in f.reason for f in result.fallbacks),
    }


async def run_corpus(index: Path, items: list[dict], args, resources: Resources) -> list[dict]:
    settings = load_settings(
        {"index": str(index), "llm.model": args.llm, "llm.base_url": args.base_url, "llm.timeout": args.timeout}
    )
    pipeline = build_pipeline(settings, resources, need_classifier=False)
    rows = []
    for number, item in enumerate(items, 1):
        row = {"corpus": index.name, "id": item["id"], "type": item["type"], "question": item["question"]}
        for method in ("typed", "rag"):
            started = time.perf_counter()
            result = await pipeline.answer(item["question"], method, item["type"] if method == "typed" else None)
            row[method] = {
                "seconds": round(time.perf_counter() - started, 1),
                "strategy": result.strategy,
                "contains": contains(result.answer, item["groups"]),
                "plan": plan_outcome(result),
                "aspects": [(a.label, a.error) for a in result.aspects if a.label != "overview" or a.error],
                "fallbacks": [f"{f.step}: {f.reason}" for f in result.fallbacks],
                "calls": len(result.llm_calls),
                "cached": sum(c.cached for c in result.llm_calls),
                "queued_ms": sum(c.queued_ms for c in result.llm_calls),
                "in_flight_ms": sum(c.latency_ms for c in result.llm_calls),
                "answer": result.answer,
                **citation_facts(result),
            }
        rows.append(row)
        print(
            f"  {index.name} {number}/{len(items)} {item['type']}: typed {row['typed']['strategy']} "
            f"{row['typed']['seconds']} s, rag {row['rag']['seconds']} s",
            file=sys.stderr,
            flush=True,
        )
    return rows


def pct(hits: int, total: int) -> str:
    return f"{hits}/{total}" if total else "–"


def report(rows: list[dict], title: str) -> list[str]:
    lines = [
        f"### {title}",
        "",
        "| type | n | plan first / repaired / failed | aspects kept / dropped | typed falls back | "
        "answers citing (typed, rag) | markers removed | sentences attributed | key terms typed / rag | s per typed / rag |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_type = defaultdict(list)
    for row in rows:
        by_type[row["type"]].append(row)
        by_type["all"].append(row)
        if row["type"] in DECOMPOSING:
            by_type["decomposing (reason, instruction, debate)"].append(row)
    for kind in [*TYPES, "decomposing (reason, instruction, debate)", "all"]:
        members = by_type.get(kind, [])
        if not members:
            continue
        n = len(members)
        plans = Counter(r["typed"]["plan"] for r in members if r["typed"]["plan"])
        aspects = [a for r in members for a in r["typed"]["aspects"]]
        kept = sum(error is None for _, error in aspects)
        fell = sum(r["typed"]["strategy"] == "rag" for r in members)
        cites = (
            f"{pct(sum(r['typed']['cites'] for r in members), n)}, {pct(sum(r['rag']['cites'] for r in members), n)}"
        )
        removed = sum(r[m]["removed"] for r in members for m in ("typed", "rag"))
        attributed = sum(r[m]["attributed"] for r in members for m in ("typed", "rag"))
        terms = f"{pct(sum(r['typed']['contains'] for r in members), n)} / {pct(sum(r['rag']['contains'] for r in members), n)}"
        seconds = f"{sum(r['typed']['seconds'] for r in members) / n:.0f} / {sum(r['rag']['seconds'] for r in members) / n:.0f}"
        lines.append(
            f"| {kind} | {n} | {plans['first time']} / {plans['after repair']} / {plans['failed']} | {kept} / {len(aspects) - kept} | "
            f"{pct(fell, n)} | {cites} | {removed} | {attributed} | {terms} | {seconds} |"
        )
    reasons = Counter(error for r in rows for _, error in r["typed"]["aspects"] if error)
    if reasons:
        lines += [
            "",
            "Aspects dropped, by reason: "
            + "; ".join(f"{count} × {reason}" for reason, count in reasons.most_common()),
        ]
    outside = sum(r[m]["outside"] for r in rows for m in ("typed", "rag"))
    lines += ["", f"Markers outside the sources left in any answer: {outside}."]
    return lines


def served_from_cache(rows: list[dict]) -> str:
    calls = sum(r[m]["calls"] for r in rows for m in ("typed", "rag"))
    cached = sum(r[m]["cached"] for r in rows for m in ("typed", "rag"))
    return f"{cached} of {calls} calls served from the cache"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llm", required=True, help="local:PATH.gguf, or a model name at --base-url")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--corpus", action="append", required=True, help="INDEX=KEYTERMS.jsonl (give at least two)")
    parser.add_argument("--per-type", type=int, default=2)
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per LLM request (a small CPU model is slow)"
    )
    parser.add_argument("--rerun", action="store_true", help="ask everything again and report the cache hits")
    parser.add_argument("--layouts", default="numbered", help="comma list of source layouts: numbered, tags")
    parser.add_argument("--dump", type=Path, default=None)
    args = parser.parse_args()
    print(machine_line())
    print(f"model: {args.llm}{' at ' + args.base_url if args.base_url else ''}")
    corpora = [(Path(spec.split("=", 1)[0]), pick(Path(spec.split("=", 1)[1]), args.per_type)) for spec in args.corpus]
    dump, lines = [], []
    for name in args.layouts.split(","):
        with layout(name):
            rows = []
            resources = Resources()
            try:
                for index, items in corpora:
                    rows += await resources.run(run_corpus(index, items, args, resources))
                if args.rerun:
                    again = []
                    for index, items in corpora:
                        again += await resources.run(run_corpus(index, items, args, resources))
            finally:
                resources.close()
        lines += report(rows, f"source layout: {name}") + [""]
        # A hit is a request made before: in this pass (plain RAG asks what a decomposing type's overview
        # asked) or in an earlier run, whose replies this pass then replays (TYPEDRAG_CACHE_DIR=<new dir> to measure).
        lines += [f"First pass ({name}): {served_from_cache(rows)}.", ""]
        for corpus in dict.fromkeys(r["corpus"] for r in rows):
            lines += report([r for r in rows if r["corpus"] == corpus], f"{name}, corpus {corpus}") + [""]
        if args.rerun:
            lines += [f"Rerun ({name}): {served_from_cache(again)}.", ""]
        dump += [{"layout": name, **r} for r in rows]
    print("\n".join(lines))
    if args.dump:
        args.dump.write_text("".join(json.dumps(r) + "\n" for r in dump), encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(main())
