"""`typedrag eval compare` on two real manuals: plain RAG against Typed-RAG, judged blind pairwise.

    python bench/bench_compare.py index --indexes-dir /tmp/manuals
    python bench/bench_compare.py run --indexes-dir /tmp/manuals --out-dir /tmp/cmp --stub
    python bench/bench_compare.py run --indexes-dir /tmp/manuals --out-dir /tmp/cmp \\
        --llm probe-model --base-url http://127.0.0.1:18555/v1 --llm-timeout 5000 --concurrency 3 --llm-concurrency 6
    python bench/bench_compare.py blind --out-dir /tmp/cmp --to /tmp/blind
    python bench/bench_compare.py agreement --out-dir /tmp/cmp --blind /tmp/blind

Without `eval compare`'s own judge (a separate blind judge reads the pairs), each method answers on its own, every
question forced to its file's type, resumable; then the sentences about what the sources do not say are counted:

    python bench/bench_compare.py answers --indexes-dir /tmp/manuals --out-dir /tmp/ans --methods rag,typed \\
        --llm probe-model --base-url http://127.0.0.1:18555/v1 --llm-timeout 5000 [--knowledge labelled]
    python bench/bench_compare.py filler --out-dir /tmp/ans
    python bench/bench_compare.py blind --out-dir /tmp/ans --to /tmp/blind --a rag --b typed

Questions: bench/data/compare-manuals.jsonl (38, written for this run: PostgreSQL 15 and Python 3.11 manuals,
three of each type per manual and four debates, two where the manual recommends one side and two it leaves
open). Its `docs` and `expect` fields say where the answer is and what it holds, for a person checking the
answers; the question files given to `eval compare` carry only id, question and type.

`--stub` runs the loopback OpenAI stub (typedrag.testing.openai_stub) as generator and judge: a check that the
whole path runs on real manuals, not a quality figure. With llm_probe (../shared/tools/llm_probe), helper
sessions play the model and the judge. `blind` writes the answers for ../shared/tools/blind_judge.py (a
separate blind judgment by another reader); `agreement` compares eval compare's verdicts with it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "bench" / "data" / "compare-manuals.jsonl"
MANUALS = {
    "postgresql": Path("/usr/share/doc/postgresql-doc-15/html"),  # Debian package postgresql-doc-15
    "python": Path("/usr/share/doc/python3.11/html"),  # Debian package python3.11-doc
}


def question_files(out_dir: Path) -> dict[str, Path]:
    """One question file per manual, with only what a user's file holds (no expected answers)."""
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    files = {}
    for manual in MANUALS:
        path = out_dir / f"questions-{manual}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "".join(
                json.dumps({k: r[k] for k in ("id", "question", "type")}) + "\n" for r in rows if r["manual"] == manual
            ),
            encoding="utf-8",
        )
        files[manual] = path
    return files


def merging_stub():
    """The stub's replies, except that a typed plan's merge (aggregator, mediator) joins its partial answers, as a
    model would, instead of the stub's one-line answer: so typed and plain RAG differ and the judge is asked."""
    import re

    from typedrag.testing.openai_stub import Reply, default_content

    def responder(request):
        system = request.messages[0]["content"] if request.messages else ""
        if request.schema_name is None and ("partial answers" in system or "mediator" in system):
            parts = re.findall(r"<partial[^>]*>\n(.*?)\n</partial>", request.last_user, re.S)
            return Reply(content=" ".join(parts) or default_content(request))
        return Reply(content=default_content(request))

    return responder


def typedrag(*args: str, env: dict | None = None) -> None:
    command = [sys.executable, "-m", "typedrag.cli", *args]
    print("$ typedrag " + " ".join(args), flush=True)
    subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def index(args: argparse.Namespace) -> None:
    for manual, source in MANUALS.items():
        if not source.is_dir():
            raise SystemExit(f"{source} is missing: apt-get install postgresql-doc-15 python3.11-doc")
        typedrag("index", str(source), "--index", str(args.indexes_dir / manual))


def run(args: argparse.Namespace) -> None:
    files = question_files(args.out_dir)
    stub = None
    if args.stub:
        sys.path.insert(0, str(ROOT))
        from typedrag.testing.openai_stub import OpenAIStubServer

        stub = OpenAIStubServer(merging_stub()).__enter__()
        args.llm, args.base_url = "stub-model", stub.base_url
    try:
        for manual, questions in files.items():
            command = [
                "eval",
                "compare",
                str(questions),
                "--index",
                str(args.indexes_dir / manual),
                "--out",
                str(args.out_dir / manual),
                "--a",
                "rag",
                "--b",
                "typed",
                "--concurrency",
                str(args.concurrency),
                "--no-progress",
            ]
            if args.llm:
                command += ["--llm", args.llm] + (["--base-url", args.base_url] if args.base_url else [])
            if args.judge:
                command += ["--judge", args.judge] + (
                    ["--judge-base-url", args.judge_base_url] if args.judge_base_url else []
                )
            if args.llm_timeout:
                command += ["--llm-timeout", str(args.llm_timeout)]
            if args.llm_concurrency:
                command += ["--llm-concurrency", str(args.llm_concurrency)]
            env = {"TYPEDRAG_API_KEY": os.environ.get("TYPEDRAG_API_KEY", "not-needed")}
            if args.cache_dir:
                env["TYPEDRAG_CACHE_DIR"] = str(args.cache_dir)
            typedrag(*command, env=env)
    finally:
        if stub is not None:
            print(
                f"stub requests: {len(stub.requests)} "
                f"({sum(r.schema_name == 'PairVerdict' for r in stub.requests)} pairwise judgments)"
            )
            stub.__exit__(None, None, None)


def answers(args: argparse.Namespace) -> None:
    """Each method's answers to every question of each manual, its type forced as the file gives it, in
    OUT/MANUAL/METHOD.jsonl ({id, question, type, answer: what a reader reads, result}); a rerun adds what is missing."""
    import asyncio

    sys.path.insert(0, str(ROOT))
    from typedrag.config import load_settings
    from typedrag.factory import Resources, build_pipeline

    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    overrides = {
        "llm.model": args.llm,
        "llm.base_url": args.base_url,
        "llm.timeout": args.llm_timeout,
        "llm.concurrency": args.llm_concurrency,
        "knowledge": args.knowledge,
    }
    resources = Resources()

    async def run_manual(manual: str) -> None:
        settings = load_settings({**overrides, "index": str(args.indexes_dir / manual)})
        pipeline = build_pipeline(settings, resources, need_classifier=False)
        limit = asyncio.Semaphore(args.concurrency)
        for method in args.methods.split(","):
            path = args.out_dir / manual / f"{method}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            done = {json.loads(line)["id"] for line in path.read_text().splitlines()} if path.exists() else set()

            async def one(row: dict) -> None:
                async with limit:
                    result = await pipeline.answer(row["question"], method, row["type"] if method == "typed" else None)
                with path.open("a", encoding="utf-8") as out:
                    out.write(
                        json.dumps(
                            {
                                "id": row["id"],
                                "question": row["question"],
                                "type": row["type"],
                                "answer": result.reply,
                                "result": result.model_dump(mode="json"),
                            }
                        )
                        + "\n"
                    )
                print(f"{manual} {method} {row['id']}: {result.strategy}, {result.usage.calls} calls", flush=True)

            await asyncio.gather(*(one(r) for r in rows if r["manual"] == manual and r["id"] not in done))

    try:
        for manual in MANUALS:
            asyncio.run(resources.run(run_manual(manual)))
    finally:
        resources.close()


def filler(args: argparse.Namespace) -> None:
    """Per method and type: answers, abstentions, sentences about what the sources do not say (in answers that
    are no abstention: typedrag.evaluation.filler.meta_sentences), sentences of the model's own (labelled)."""
    import collections

    sys.path.insert(0, str(ROOT))
    from typedrag.evaluation.filler import meta_sentences

    counts: dict = collections.defaultdict(lambda: collections.Counter())
    for path in sorted(args.out_dir.glob("*/*.jsonl")):
        method = path.stem
        for line in path.read_text().splitlines():
            row = json.loads(line)
            result = row["result"]
            for group in (row["type"], "all"):
                tally = counts[(method, group)]
                tally["answers"] += 1
                tally["abstained"] += result["abstained"]
                meta = [] if result["abstained"] else meta_sentences(result["answer"])
                tally["meta"] += len(meta)
                tally["with meta"] += bool(meta)
                tally["unsourced"] += len((result.get("unsourced") or {}).get("sentences", []))
                tally["with unsourced"] += bool((result.get("unsourced") or {}).get("sentences"))
                tally["calls"] += result["usage"]["calls"]
                if args.show and meta:
                    print(f"  {method} {row['id']}: {' | '.join(meta)}")
    print(
        "| method | type | answers | abstained | meta sentences (answers with any) | unsourced sentences (answers with any) | calls per answer |"
    )
    print("|---|---|---|---|---|---|---|")
    for (method, group), t in sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][1] != "all", kv[0][1])):
        print(
            f"| {method} | {group.lower()} | {t['answers']} | {t['abstained']} | {t['meta']} ({t['with meta']}) | "
            f"{t['unsourced']} ({t['with unsourced']}) | {t['calls'] / max(t['answers'], 1):.1f} |"
        )


def blind(args: argparse.Namespace) -> None:
    """Per manual: QUESTIONS.jsonl, A.jsonl (rag) and B.jsonl (typed) as blind_judge.py prepare reads them."""
    for manual in MANUALS:
        if (args.out_dir / manual / f"{args.a}.jsonl").exists():  # `answers` output: one file per method
            target = args.to / manual
            target.mkdir(parents=True, exist_ok=True)
            rows = {
                name: [
                    json.loads(line) for line in (args.out_dir / manual / f"{method}.jsonl").read_text().splitlines()
                ]
                for name, method in (("A", args.a), ("B", args.b))
            }
            (target / "questions.jsonl").write_text(
                "".join(
                    json.dumps({"id": r["id"], "question": r["question"], "type": r["type"]}) + "\n"
                    for r in sorted(rows["A"], key=lambda r: r["id"])
                )
            )
            for name, found in rows.items():
                (target / f"{name}.jsonl").write_text(
                    "".join(json.dumps({"id": r["id"], "answer": r["answer"]}) + "\n" for r in found)
                )
            print(
                f"python ../shared/tools/blind_judge.py prepare {target}/questions.jsonl {target}/A.jsonl {target}/B.jsonl {target}/judged"
            )
            continue
        answers = [json.loads(line) for line in (args.out_dir / manual / "answers.jsonl").read_text().splitlines()]
        target = args.to / manual
        target.mkdir(parents=True, exist_ok=True)
        questions = {a["question_id"]: a["question"] for a in answers}
        types = {
            json.loads(line)["id"]: json.loads(line)["type"]
            for line in (args.out_dir / f"questions-{manual}.jsonl").read_text().splitlines()
        }
        (target / "questions.jsonl").write_text(
            "".join(json.dumps({"id": q, "question": t, "type": types.get(q)}) + "\n" for q, t in questions.items())
        )
        for system, name in (("rag", "A"), ("typed", "B")):
            (target / f"{name}.jsonl").write_text(
                "".join(
                    json.dumps({"id": a["question_id"], "answer": a["answer"]}) + "\n"
                    for a in answers
                    if a["system"] == system
                )
            )
        print(
            f"python ../shared/tools/blind_judge.py prepare {target}/questions.jsonl {target}/A.jsonl {target}/B.jsonl {target}/judged"
        )


def agreement(args: argparse.Namespace) -> None:
    """How often eval compare's outcome equals the separate blind judgment's, per manual and overall."""
    same = total = decided_same = decided = 0
    for manual in MANUALS:
        summary = json.loads((args.out_dir / manual / "summary.json").read_text())
        ours = {item["id"]: item["outcome"] for item in summary["items"]}
        judged = args.blind / manual / "judged"
        key = json.loads((judged / "key.json").read_text())
        theirs = {}
        for line in (judged / "verdicts.jsonl").read_text().splitlines():
            verdict = json.loads(line)
            shown_a = key[str(verdict["id"])]["A"]  # "a" (rag) or "b" (typed), as blind_judge.py drew it
            winner = verdict["winner"]
            theirs[str(verdict["id"])] = (
                "tie" if winner == "tie" else shown_a if winner == "A" else ("b" if shown_a == "a" else "a")
            )
        common = [q for q in theirs if ours.get(q) in ("a", "b", "tie")]
        agree = sum(ours[q] == theirs[q] for q in common)
        both = [q for q in common if ours[q] != "tie" and theirs[q] != "tie"]
        print(
            f"{manual}: {agree}/{len(common)} items agree; where both chose a side {sum(ours[q] == theirs[q] for q in both)}/{len(both)}"
        )
        same, total = same + agree, total + len(common)
        decided_same, decided = decided_same + sum(ours[q] == theirs[q] for q in both), decided + len(both)
    print(f"overall: {same}/{total} = {same / max(total, 1):.2f}; where both chose a side {decided_same}/{decided}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("index")
    p.add_argument("--indexes-dir", type=Path, required=True)
    p = sub.add_parser("run")
    p.add_argument("--indexes-dir", type=Path, required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--stub", action="store_true", help="the loopback OpenAI stub as generator and judge")
    p.add_argument("--llm")
    p.add_argument("--base-url")
    p.add_argument("--judge")
    p.add_argument("--judge-base-url")
    p.add_argument("--llm-timeout", type=float)
    p.add_argument("--llm-concurrency", type=int)
    p.add_argument("--concurrency", type=int, default=3)
    p.add_argument("--cache-dir", type=Path)
    p = sub.add_parser("answers")
    p.add_argument("--indexes-dir", type=Path, required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--methods", default="rag,typed")
    p.add_argument("--llm")
    p.add_argument("--base-url")
    p.add_argument("--llm-timeout", type=float)
    p.add_argument("--llm-concurrency", type=int)
    p.add_argument("--concurrency", type=int, default=3)
    p.add_argument("--knowledge", choices=("documents", "labelled"))
    p = sub.add_parser("filler")
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--show", action="store_true", help="print each sentence counted")
    p = sub.add_parser("blind")
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--to", type=Path, required=True)
    p.add_argument("--a", default="rag", help="with `answers` output: the method shown as A")
    p.add_argument("--b", default="typed")
    p = sub.add_parser("agreement")
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--blind", type=Path, required=True)
    args = parser.parse_args()
    {"index": index, "run": run, "answers": answers, "filler": filler, "blind": blind, "agreement": agreement}[
        args.command
    ](args)


if __name__ == "__main__":
    main()
