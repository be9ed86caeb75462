"""Key terms and abstention read from offline snapshots (scripts/offline_snapshot.py), with bench/bench_quality.py's
own measure: an answer holds a term of every key-term group its question does not already hold. Per corpus,
for rag and typed: key terms held, abstentions, typed answers whose text is plain RAG's; over the conversational
set, abstention on answerable and unanswerable turns. Given two snapshots, also how many answers changed.

    python scripts/snapshot_scores.py before.jsonl after.jsonl
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_quality import CORPORA, holds, scored_groups  # noqa: E402


def load(path: str) -> dict[tuple[str, str], dict]:
    return {(r["where"], r["method"]): r["result"] for r in map(json.loads, open(path, encoding="utf-8"))}


def report(snap: dict, items: dict, answerable: dict) -> None:
    t: collections.Counter = collections.Counter()
    for (where, method), r in snap.items():
        if where in items:
            groups = scored_groups(items[where])
            if not groups:
                continue
            corpus = where.split("/")[0]
            t[(corpus, method, "n")] += 1
            t[(corpus, method, "holds")] += holds(r["answer"], groups)
            t[(corpus, method, "abstained")] += r["abstained"]
            if method == "typed":
                t[(corpus, method, "same")] += r["answer"] == snap[(where, "rag")]["answer"]
        elif where in answerable:
            kind = "answerable" if answerable[where] else "unanswerable"
            t[("conversations", method, kind)] += 1
            t[("conversations", method, kind + " abstained")] += r["abstained"]
    print("| corpus | rag key terms | typed key terms | abstained rag / typed | typed text = rag's |")
    print("|---|---|---|---|---|")
    for c in CORPORA:
        n = t[(c.name, "rag", "n")]
        print(
            f"| {c.name} | {t[(c.name, 'rag', 'holds')]}/{n} | {t[(c.name, 'typed', 'holds')]}/{n} | "
            f"{t[(c.name, 'rag', 'abstained')]} / {t[(c.name, 'typed', 'abstained')]} | {t[(c.name, 'typed', 'same')]}/{n} |"
        )
    for method in ("rag", "typed"):
        a, an = t[("conversations", method, "answerable abstained")], t[("conversations", method, "answerable")]
        u, un = t[("conversations", method, "unanswerable abstained")], t[("conversations", method, "unanswerable")]
        print(
            f"conversations, {method}: abstained on {a}/{an} answerable turns ({a / max(an, 1):.1%}), {u}/{un} unanswerable ({u / max(un, 1):.1%})"
        )


def main() -> None:
    items = {}
    for corpus in CORPORA:
        for line in corpus.keyterms.read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                items[f"{corpus.name}/{item['id']}"] = item
    answerable = {}
    for line in (ROOT / "bench" / "data" / "conversations.jsonl").read_text(encoding="utf-8").splitlines():
        conversation = json.loads(line)
        for i, turn in enumerate(conversation["turns"]):
            answerable[f"conversation/{conversation['id']}/{i}"] = bool(turn["answers"])
    snaps = [load(path) for path in sys.argv[1:]]
    for path, snap in zip(sys.argv[1:], snaps):
        print(f"\n{path}\n")
        report(snap, items, answerable)
    if len(snaps) == 2:
        old, new = snaps
        changed = collections.Counter(
            (k[0].split("/")[0], k[1]) for k in old if k in new and old[k]["answer"] != new[k]["answer"]
        )
        print(f"\nchanged answers: {sum(changed.values())} of {len(old)}: {dict(sorted(changed.items()))}")


if __name__ == "__main__":
    main()
