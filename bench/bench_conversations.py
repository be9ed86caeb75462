"""Conversations through `typedrag serve`'s OpenAI-compatible endpoint: does a follow-up find its passages,
and does typedrag abstain when no document answers?

For every conversation of the dev set (bench/data/conversations.jsonl, described in CONVERSATIONS.md)
each user turn is sent twice to /v1/chat/completions of a `typedrag serve` started on the conversation's
index (offline engine unless --llm): with the whole conversation so far (earlier user turns and the
answers typedrag gave them, as a chat client sends them), and as the last turn alone. Prints, per split:
  - recall@5: the share of a turn's answering passages among the answer's first five sources (a passage
    counts by its id, or by the opening it was written down with, should re-indexing have moved it),
    whole conversation against last turn alone, over answerable turns (and over follow-ups only);
  - abstention: the share of answerable and of unanswerable turns on which the answer says the documents
    do not answer (`typedrag.abstained`).

    python bench/bench_conversations.py --index demo=/tmp/demo-index --index python=/tmp/py-index \\
        --index handbook=/tmp/handbook-index --index postgres=/tmp/pg-index --out runs/conversations.jsonl

Indexes: `typedrag index demo:vital-articles`, /usr/share/doc/python3.11/html, .../debian-handbook/html/en-US
and /usr/share/doc/postgresql-doc-15/html, each with the default passage size.

`--answerable CORPUS=FILE` (repeatable) also asks every question of a key-term set (bench/data/keyterms*.jsonl,
answerable by construction) alone, and prints how often the answer abstains: the bar's cost on single questions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _conversation_data import CONVERSATIONS as DATA  # noqa: E402
from _conversation_data import load  # noqa: E402
from _machine import machine_line  # noqa: E402
from _serve import free_port  # noqa: E402

TOP = 5


@contextmanager
def serving(index: str, extra: list[str]):
    """`typedrag serve` on `index` in a process of its own (this checkout's code), until the block ends."""
    port = free_port()
    root = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    command = [
        sys.executable,
        "-m",
        "typedrag.cli",
        "serve",
        "--index",
        index,
        "--port",
        str(port),
        "--log-level",
        "warning",
        *extra,
    ]
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            if server.poll() is not None:
                raise SystemExit(f"typedrag serve exited: {server.stderr.read()[-2000:]}")
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise SystemExit("typedrag serve did not get ready in 300 s")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def ask(client: httpx.Client, url: str, model: str, messages: list[dict]) -> dict:
    response = client.post(f"{url}/v1/chat/completions", json={"model": model, "messages": messages}, timeout=600)
    response.raise_for_status()
    return response.json()


def found(groups: list[list[dict]], sources: list[dict]) -> float:
    """The share of answer groups with a passage among `sources` (by id, or by the opening it was written with)."""
    ids = {s["passage_id"] for s in sources}
    texts = [" ".join(s["text"].split()) for s in sources]
    hit = sum(any(a["id"] in ids or any(a["quote"] in t for t in texts) for a in group) for group in groups)
    return hit / len(groups)


def run(conversations: list[dict], indexes: dict[str, str], model: str, extra: list[str], out) -> list[dict]:
    """Each conversation through `serve`: recall against the set as written, and the first five sources both ways
    (`report` scores them against the judged passages too)."""
    rows = []
    for corpus in sorted({c["corpus"] for c in conversations}):
        if corpus not in indexes:
            raise SystemExit(f"no index for corpus {corpus!r}: pass --index {corpus}=PATH")
        with serving(indexes[corpus], extra) as url, httpx.Client() as client:
            for conversation in (c for c in conversations if c["corpus"] == corpus):
                messages: list[dict] = []
                for number, turn in enumerate(conversation["turns"]):
                    messages.append({"role": "user", "content": turn["user"]})
                    whole = ask(client, url, model, messages)
                    alone = ask(client, url, model, [messages[-1]]) if number else whole
                    reply, trace, alone_trace = (
                        whole["choices"][0]["message"]["content"],
                        whole["typedrag"],
                        alone["typedrag"],
                    )
                    messages.append({"role": "assistant", "content": reply})
                    row = {
                        "conversation": conversation["id"],
                        "split": conversation["split"],
                        "turn": number,
                        "user": turn["user"],
                        "answerable": bool(turn["answers"]),
                        "recall_whole": found(turn["answers"], trace["sources"][:TOP]) if turn["answers"] else None,
                        "recall_alone": found(turn["answers"], alone_trace["sources"][:TOP])
                        if turn["answers"]
                        else None,
                        "abstained_whole": trace["abstained"],
                        "abstained_alone": alone_trace["abstained"],
                        "standalone": trace.get("standalone_question"),
                        "searched": trace.get("searched"),
                        "rewritten": bool((trace.get("rewrite") or {}).get("rewritten")),
                        "sources": [s["passage_id"] for s in trace["sources"][:TOP]],
                        "sources_alone": [s["passage_id"] for s in alone_trace["sources"][:TOP]],
                        "type": (trace.get("type") or {}).get("type"),
                        "strategy": trace["strategy"],
                        "seconds": trace["timings_ms"].get("total", 0) / 1000,
                        "fallbacks": [f"{f['step']}: {f['reason']}" for f in trace.get("fallbacks", [])],
                    }
                    rows.append(row)
                    if out is not None:
                        out.write(json.dumps(row, ensure_ascii=False) + "\n")
                        out.flush()
                    print(
                        f"  {conversation['id']}[{number}] recall {row['recall_whole']} (alone {row['recall_alone']}) "
                        f"abstained {row['abstained_whole']}",
                        file=sys.stderr,
                    )
    return rows


def abstentions_on_answerable(sets: dict[str, Path], indexes: dict[str, str], model: str, extra: list[str]) -> None:
    """The share of each key-term set's questions (all answerable) whose answer abstains, asked alone."""
    for corpus, path in sets.items():
        questions = [
            json.loads(line)["question"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        with serving(indexes[corpus], extra) as url, httpx.Client() as client:
            abstained = [
                ask(client, url, model, [{"role": "user", "content": q}])["typedrag"]["abstained"] for q in questions
            ]
        print(
            f"answerable single questions, {path.name} ({corpus}): abstained on {sum(abstained)} of {len(abstained)} "
            f"({mean(abstained):.2f})"
        )


def calibrate(conversations: list[dict], indexes: dict[str, str], sets: dict[str, Path], out: Path) -> None:
    """The bars' inputs, in process, with every bar off: for each turn of the conversations (each with the
    conversation before it, as the chat endpoint reads it) and each key-term question (asked alone), the final
    writing step's best-sentence relevance and the reader's best chance. `--choose` then picks the bars."""
    import asyncio

    import typedrag.abstain as abstain
    import typedrag.strategies.base as base
    from typedrag.classify import load_default_classifier
    from typedrag.conversation import Conversation
    from typedrag.engines.offline import OfflineEngine
    from typedrag.engines.offline import answers as offline_answers
    from typedrag.index import open_retriever
    from typedrag.pipeline import Pipeline

    seen: dict[str, float] = {}
    real_support, real_answer = abstain.support, offline_answers.answer

    def support(question, texts, embedder=None, bar=abstain.SUPPORT_BAR):
        judged = real_support(question, texts, embedder, bar)
        seen["relevance"] = judged.score  # the last call is the final writing step's
        return judged

    def answer(task, reader, settings):
        written = real_answer(task, reader, settings)
        seen["reader"] = written.best
        return written

    base.support = support
    import typedrag.engines.offline as offline_engine

    offline_engine.answer = answer
    abstain.SUPPORT_BAR = -1.0
    base.READER_BAR = -1.0
    classifier = load_default_classifier()
    with out.open("w", encoding="utf-8") as sink:
        for corpus, index in indexes.items():
            pipeline = Pipeline(engine=OfflineEngine(), retriever=open_retriever(index), classifier=classifier)
            print(f"{corpus}: {pipeline.retriever.name}", file=sys.stderr)

            async def run_corpus() -> None:
                for conversation in (c for c in conversations if c["corpus"] == corpus):
                    chat = Conversation(pipeline)
                    for number, turn in enumerate(conversation["turns"]):
                        seen.clear()
                        result = await chat.ask(turn["user"])
                        row = {
                            "set": "conversation",
                            "split": conversation["split"],
                            "corpus": corpus,
                            "id": f"{conversation['id']}[{number}]",
                            "answerable": bool(turn["answers"]),
                            "type": (result.type.type if result.type else None),
                            **seen,
                        }
                        sink.write(json.dumps(row) + "\n")
                if corpus in sets:
                    for line in sets[corpus].read_text(encoding="utf-8").splitlines():
                        if line.strip():
                            item = json.loads(line)
                            seen.clear()
                            result = await pipeline.answer(item["question"])
                            row = {
                                "set": "keyterms",
                                "corpus": corpus,
                                "id": item["id"],
                                "answerable": True,
                                "type": (result.type.type if result.type else None),
                                **seen,
                            }
                            sink.write(json.dumps(row) + "\n")

            asyncio.run(run_corpus())


def choose(path: Path) -> None:
    """Abstention on tune-half turns and key-term questions for candidate bars, as docs/lab/2026-12-02-abstention.md chose them."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    tune = [r for r in rows if r["set"] == "keyterms" or r.get("split") == "tune"]
    print(
        f"{len(tune)} rows: {sum(r['answerable'] for r in tune)} answerable, {sum(not r['answerable'] for r in tune)} not"
    )
    for support_bar in (0.40, 0.44, 0.46, 0.48, 0.50, 0.52, 0.55):
        for reader_bar in (0.10, 0.13, 0.15, 0.17, 0.20):

            def abstains(r):
                bar = {"EXPERIENCE": support_bar - 0.14, "DEBATE": support_bar - 0.06}.get(r["type"], support_bar)
                return r.get("relevance", 1) < bar or r.get("reader", 1) < reader_bar

            answerable = [abstains(r) for r in tune if r["answerable"]]
            unanswerable = [abstains(r) for r in tune if not r["answerable"]]
            print(
                f"support {support_bar:.2f} reader {reader_bar:.2f}: abstains on {mean(answerable):.3f} of answerable, "
                f"{mean(unanswerable):.3f} of unanswerable"
            )


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def report(rows: list[dict]) -> None:
    """The table against the set as written, then (rows that keep both runs' sources) against the judged passages
    as they are now, so a run is scored again when a pool is added."""
    table(rows, "as written")
    if rows and "sources_alone" in rows[0]:
        turns = {c["id"]: c["turns"] for c in load(judged=True)}

        def judged(recall: float | None, row: dict, ids: list[str]) -> float | None:
            if recall is None:
                return None
            groups = turns[row["conversation"]][row["turn"]]["answers"]
            # by id; a source found by its quote at run time (the index built again) still counts
            return max(recall, sum(any(p["id"] in ids for p in group) for group in groups) / len(groups))

        table(
            [
                {
                    **r,
                    "recall_whole": judged(r["recall_whole"], r, r["sources"]),
                    "recall_alone": judged(r["recall_alone"], r, r["sources_alone"]),
                }
                for r in rows
            ],
            "with the passages judged since (data/conversations-judged.jsonl)",
        )


def table(rows: list[dict], gold: str) -> None:
    print(f"recall@5 against the answering passages {gold}:")
    by_split = defaultdict(list)
    for row in rows:
        by_split[row["split"]].append(row)
        by_split["all"].append(row)
    print(
        f"{'split':6} {'conv':>4} {'turns':>5} {'ans':>4} {'unans':>5} | {'recall@5 conv':>13} {'last turn':>9} {'gain':>6} | "
        f"{'follow-ups: conv':>16} {'last':>6} | {'abstain: ans':>12} {'unans':>6} | {'s/turn':>6}"
    )
    for split in ("tune", "test", "all"):
        rs = by_split.get(split, [])
        if not rs:
            continue
        answerable = [r for r in rs if r["answerable"]]
        unanswerable = [r for r in rs if not r["answerable"]]
        follow = [r for r in answerable if r["turn"] > 0]
        whole, alone = mean([r["recall_whole"] for r in answerable]), mean([r["recall_alone"] for r in answerable])
        print(
            f"{split:6} {len({r['conversation'] for r in rs}):>4} {len(rs):>5} {len(answerable):>4} {len(unanswerable):>5} | "
            f"{whole:>13.3f} {alone:>9.3f} {whole - alone:>+6.3f} | "
            f"{mean([r['recall_whole'] for r in follow]):>16.3f} {mean([r['recall_alone'] for r in follow]):>6.3f} | "
            f"{mean([r['abstained_whole'] for r in answerable]):>12.2f} {mean([r['abstained_whole'] for r in unanswerable]):>6.2f} | "
            f"{mean([r['seconds'] for r in rs]):>6.2f}"
        )
    follow_ups = [r for r in rows if r["turn"] > 0]
    if follow_ups and "rewritten" in follow_ups[0]:
        read = [r for r in follow_ups if r["rewritten"]]
        print(
            f"follow-ups read with the conversation's subject: {len(read)} of {len(follow_ups)} "
            f"(answerable {sum(r['answerable'] for r in read)}, unanswerable {sum(not r['answerable'] for r in read)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--index", action="append", default=[], metavar="CORPUS=PATH", help="the index of each corpus in the data"
    )
    parser.add_argument("--split", choices=("tune", "test", "all"), default="all")
    parser.add_argument("--model", default="typedrag-typed", help="typedrag-typed (default) or typedrag-rag")
    parser.add_argument("--llm", help="serve with this --llm (default: the offline engine)")
    parser.add_argument("--base-url", help="serve with this --base-url")
    parser.add_argument(
        "--retrieval", help="serve with this --retrieval (bm25, dense, hybrid; default: as each index was built)"
    )
    parser.add_argument("--out", type=Path, help="also write one JSON line per turn here")
    parser.add_argument(
        "--answerable",
        action="append",
        default=[],
        metavar="CORPUS=FILE",
        help="also ask each question of this key-term set alone and count abstentions",
    )
    parser.add_argument("--skip-conversations", action="store_true", help="with --answerable: only that")
    parser.add_argument("--report", type=Path, help="only print the table of an earlier --out file")
    parser.add_argument(
        "--calibrate", type=Path, help="in process, bars off: write each turn's bar inputs here (JSONL)"
    )
    parser.add_argument("--choose", type=Path, help="print abstention for candidate bars from a --calibrate file")
    args = parser.parse_args()
    print(machine_line())
    if args.choose is not None:
        choose(args.choose)
        return
    if args.calibrate is not None:
        conversations = [
            json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        sets = {c: Path(f) for c, f in (item.split("=", 1) for item in args.answerable)}
        calibrate(conversations, dict(item.split("=", 1) for item in args.index), sets, args.calibrate)
        return
    if args.report is not None:
        report([json.loads(line) for line in args.report.read_text(encoding="utf-8").splitlines() if line.strip()])
        return
    indexes = dict(item.split("=", 1) for item in args.index)
    conversations = [c for c in load(args.data) if args.split == "all" or c["split"] == args.split]
    extra = [
        *(["--llm", args.llm] if args.llm else []),
        *(["--base-url", args.base_url] if args.base_url else []),
        *(["--retrieval", args.retrieval] if args.retrieval else []),
    ]
    if args.answerable:
        abstentions_on_answerable(
            {c: Path(f) for c, f in (item.split("=", 1) for item in args.answerable)}, indexes, args.model, extra
        )
    if args.skip_conversations:
        return
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") if args.out is not None else open(os.devnull, "w") as out:
        rows = run(conversations, indexes, args.model, extra, out)
    report(rows)


if __name__ == "__main__":
    main()
