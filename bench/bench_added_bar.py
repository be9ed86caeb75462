"""How sure the reader must be before an offline typed answer adds a sentence under its role's label.

Leave one corpus out over the shared reader labels (the reader trained on four corpora, scored on the fifth,
as `python -m typedrag.reader.train` reports it): for the questions of each decomposing type, the sentences the
reader reads as answering at a chance of at least BAR in that type's role (a cause for REASON, a step for
INSTRUCTION, for/against for DEBATE, advice for EXPERIENCE, a relation or an item point for COMPARISON), and
how many of them answer in that role by the labels (label 2, the labelled role) and how many are noise (label 0).
Cells read `right/added n noise`. OfflineSettings.added_bar was chosen on wikipedia-demo (the corpus the offline
engine is tuned on) and is reported on the others.

    python bench/bench_added_bar.py --labels ../shared/data/reader-labels/pairs.jsonl
"""

from __future__ import annotations

import argparse
from pathlib import Path

from typedrag.reader.train import Pairs, fit, load_pairs, predict

WANTED = {
    "REASON": {"cause"},
    "INSTRUCTION": {"step"},
    "DEBATE": {"for", "against"},
    "EXPERIENCE": {"advice"},
    "COMPARISON": {"relates", "item"},
}
BARS = (0.23, 0.30, 0.35, 0.40, 0.45, 0.50, 0.60)
TUNED_ON = "wikipedia-demo"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--labels", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/reader-labels/pairs.jsonl"
    )
    args = parser.parse_args()
    rows = load_pairs([args.labels])
    pairs = Pairs(rows)
    scored = []
    for corpus in sorted({r["corpus"] for r in rows}):
        test = [i for i, r in enumerate(rows) if r["corpus"] == corpus]
        model = fit(*pairs.subset([i for i, r in enumerate(rows) if r["corpus"] != corpus]))
        held, x, role_input = pairs.subset(test)
        answers, _, roles = predict(model, x, role_input)
        scored += [(r, float(a), role) for r, a, role in zip(held, answers, roles) if r.get("type") in WANTED]
    print("| corpus | " + " | ".join(f"bar {b:.2f}" for b in BARS) + " |")
    print("|---|" + "---|" * len(BARS))
    groups = sorted({r["corpus"] for r, _, _ in scored}) + ["all but " + TUNED_ON]
    for group in groups:
        mine = [
            (r, a, role)
            for r, a, role in scored
            if r["corpus"] == group or (group.startswith("all but") and r["corpus"] != TUNED_ON)
        ]
        cells = []
        for bar in BARS:
            added = [r for r, a, role in mine if a >= bar and role in WANTED[r["type"]]]
            right = sum(r["label"] == 2 and r["role"] in WANTED[r["type"]] for r in added)
            noise = sum(r["label"] == 0 for r in added)
            cells.append(f"{right}/{len(added)} n{noise}")
        print(f"| {group}{' (tuned on)' if group == TUNED_ON else ''} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
