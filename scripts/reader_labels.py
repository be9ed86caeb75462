"""Reader labels by helper sessions: cut candidates into shards, merge the shards' labels, report agreement.

    python scripts/reader_labels.py shards --candidates C/*.jsonl --questions Q/all.jsonl --out SHARDS \\
        [--per-shard 25] [--double 0.06] [--seed 55] [--append]
    python scripts/reader_labels.py merge --shards SHARDS --candidates C/*.jsonl --out pairs.jsonl \\
        [--questions Q/all.jsonl] [--partial]
    python scripts/reader_labels.py agreement --shards SHARDS [--json]

Candidates are what scripts/reader_candidates.py writes (one pair a line, with a `pid`). `shards` writes
SHARDS/shard-NN.jsonl (one pair a line: pid, qid, question, type, title, section, sentence, and empty `label` and
`role`; a question's pairs together), and SHARDS/manifest.json: which questions each shard holds, and which are
there a second time. `--append` adds the questions of new candidates as new shards, numbered on, and leaves
the shards made before as they are (their labels refer to them). A share `--double` of the questions, spread over the corpora, is put in a second shard, so that
two different labellers label it. A labeller writes SHARDS/shard-NN.labels.jsonl: `{"pid", "label", "role"}`, one
line per pair of its shard.

`merge` writes one pairs file in the shared format (`qid, corpus, question, type, passage_id, title, section,
sentence, label, role`, ../shared/data/reader-labels) with what the candidates know besides (pid, block,
item_order, source_rank, page), `answerable` from `--questions` and, for a question labelled twice, the second label (`label_2`,
`role_2`). A question's label is the one of its first shard. It checks every shard's labels: each pair of the
shard labelled exactly once, no pid the shard does not hold, `label` 0, 1 or 2, `role` one of the rubric's (and
"none" when the label is 0). It prints what is missing or wrong and exits 1 if anything is, unless `--partial`
(then missing labels are only reported; a wrong one still fails).

`agreement` compares the two labels of each doubly labelled pair: exact agreement on `label`, agreement on
"answers" (2) against the rest, Cohen's kappa for both, and agreement on `role` where both say 2.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

LABELS = (0, 1, 2)
ROLES = ("definition", "cause", "consequence", "step", "relates", "item", "for", "against", "advice", "fact", "none")
SHARD_FIELDS = ("pid", "qid", "question", "type", "title", "section", "sentence")
PAIR_FIELDS = ("qid", "corpus", "question", "type", "passage_id", "title", "section", "sentence", "label", "role")
EXTRA_FIELDS = ("pid", "block", "item_order", "source_rank", "page")


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    """Written whole to a temporary file beside `path`, then renamed over it: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, 0o644)  # mkstemp makes it 0600: labellers and the merge may run as other users
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def read_candidates(paths: Iterable[Path]) -> dict[str, dict]:
    """Every pair of the candidate files by pid (reader_candidates.py's per-question NAME.meta.jsonl are skipped)."""
    pairs: dict[str, dict] = {}
    for path in paths:
        if path.name.endswith(".meta.jsonl"):
            continue
        for row in read_jsonl(path):
            if row["pid"] in pairs:
                raise SystemExit(f"{path}: pair {row['pid']} is in two candidate files")
            pairs[row["pid"]] = row
    return pairs


# --- shards ---------------------------------------------------------------------------------------------------


def make_shards(
    pairs: dict[str, dict], questions: dict[str, dict], *, per_shard: int, double: float, seed: int, start: int = 1
) -> tuple[dict[str, list[str]], dict[str, list[str]], list[str]]:
    """Which questions each shard holds (`first` and `second` copies, by shard name) and the doubly labelled qids.

    Questions are shuffled (seeded) and dealt out in order, so a shard mixes corpora; the doubly labelled ones
    are drawn per corpus in proportion (at least one per corpus) and each is dealt to a second shard, never its
    first, the shards taking them in turn. Shards are numbered from `start`."""
    rng = random.Random(seed)
    qids = sorted({pair["qid"] for pair in pairs.values()})
    missing = [qid for qid in qids if qid not in questions]
    if missing:
        raise SystemExit(f"{len(missing)} questions of the candidates are not in the question file: {missing[:5]}")
    rng.shuffle(qids)
    by_corpus: dict[str, list[str]] = defaultdict(list)
    for qid in qids:
        by_corpus[questions[qid]["corpus"]].append(qid)
    doubled = []
    for corpus in sorted(by_corpus):
        members = by_corpus[corpus]
        doubled += members[: max(1, round(len(members) * double))] if double > 0 else []
    slots = len(qids) + len(doubled)
    count = max(1, round(slots / per_shard))
    names = [f"shard-{n:02d}" for n in range(start, start + count)]
    first: dict[str, list[str]] = {name: [] for name in names}
    for n, qid in enumerate(qids):
        first[names[n * count // len(qids)]].append(qid)
    home = {qid: name for name, members in first.items() for qid in members}
    second: dict[str, list[str]] = {name: [] for name in names}
    # Each doubled question goes to the least loaded shard that is not its own (ties: the next after its own).
    for qid in doubled:
        start = names.index(home[qid])
        order = [names[(start + k) % count] for k in range(1, count)]
        if not order:
            raise SystemExit("a question labelled twice needs two shards at least")
        target = min(order, key=lambda name: len(first[name]) + len(second[name]))
        second[target].append(qid)
    return first, second, doubled


def shard_rows(qids: list[str], pairs_by_question: dict[str, list[dict]], rng: random.Random) -> list[dict]:
    """The shard's lines: its questions in a shuffled order, each question's pairs together in candidate order."""
    order = list(qids)
    rng.shuffle(order)
    rows = []
    for qid in order:
        for pair in pairs_by_question[qid]:
            rows.append({**{key: pair.get(key) for key in SHARD_FIELDS}, "label": None, "role": None})
    return rows


def cmd_shards(args: argparse.Namespace) -> int:
    pairs = read_candidates(args.candidates)
    questions = {row["qid"]: row for row in read_jsonl(args.questions)}
    manifest_path = args.out / "manifest.json"
    manifest: dict = {"seed": args.seed, "per_shard": args.per_shard, "double": [], "shards": {}}
    if manifest_path.exists():
        if not args.append:
            raise SystemExit(
                f"{args.out} has shards already (labels may refer to them): --append adds new questions as new shards"
            )
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        sharded = {qid for entry in manifest["shards"].values() for qid in entry["first"]}
        pairs = {pid: pair for pid, pair in pairs.items() if pair["qid"] not in sharded}
        if not pairs:
            print(f"every question of the candidates is in a shard of {args.out} already")
            return 0
    start = len(manifest["shards"]) + 1
    first, second, doubled = make_shards(
        pairs, questions, per_shard=args.per_shard, double=args.double, seed=args.seed, start=start
    )
    by_question: dict[str, list[dict]] = defaultdict(list)
    for pair in pairs.values():
        by_question[pair["qid"]].append(pair)
    rng = random.Random(f"{args.seed}:order:{start}")
    args.out.mkdir(parents=True, exist_ok=True)
    manifest["double"] = manifest["double"] + doubled
    for name in first:
        rows = shard_rows(first[name] + second[name], by_question, rng)
        write_jsonl(args.out / f"{name}.jsonl", rows)
        manifest["shards"][name] = {"first": sorted(first[name]), "second": sorted(second[name]), "pairs": len(rows)}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    total = sum(manifest["shards"][name]["pairs"] for name in first)
    print(
        f"{len(first)} shards ({min(first)} to {max(first)}), {len(pairs)} pairs of {len(by_question)} questions "
        f"({total} to label with {len(doubled)} questions labelled twice) -> {args.out}"
    )
    return 0


# --- merge ----------------------------------------------------------------------------------------------------


@dataclass
class ShardLabels:
    """What one shard's labels file says, checked against the shard."""

    name: str
    labels: dict[str, dict] = field(default_factory=dict)  # pid -> {"label", "role"}
    missing: list[str] = field(default_factory=list)  # pids of the shard with no label
    errors: list[str] = field(default_factory=list)  # what is wrong in the file
    absent: bool = False  # no labels file at all


def check_label(label, role) -> str | None:
    """What is wrong with a (label, role), None when it is valid."""
    if isinstance(label, bool) or label not in LABELS:
        return f"label {label!r} is not 0, 1 or 2"
    if role not in ROLES:
        return f"role {role!r} is not one of the rubric's"
    if label == 0 and role != "none":
        return f"label 0 with role {role!r} (a noise sentence plays no role: 'none')"
    return None


def read_shard_labels(shards: Path, name: str) -> ShardLabels:
    result = ShardLabels(name)
    expected = [row["pid"] for row in read_jsonl(shards / f"{name}.jsonl")]
    path = shards / f"{name}.labels.jsonl"
    if not path.exists():
        result.absent, result.missing = True, expected
        return result
    wanted = set(expected)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            result.errors.append(f"{where}: not JSON ({error.msg})")
            continue
        pid = row.get("pid") if isinstance(row, dict) else None
        if pid not in wanted:
            result.errors.append(f"{where}: pid {pid!r} is not a pair of {name}")
            continue
        if pid in result.labels:
            result.errors.append(f"{where}: pid {pid} labelled a second time")
            continue
        problem = check_label(row.get("label"), row.get("role"))
        if problem:
            result.errors.append(f"{where}: {pid}: {problem}")
            continue
        result.labels[pid] = {"label": row["label"], "role": row["role"]}
    result.missing = [pid for pid in expected if pid not in result.labels]
    return result


def read_all_labels(shards: Path) -> tuple[dict, dict[str, ShardLabels]]:
    manifest = json.loads((shards / "manifest.json").read_text(encoding="utf-8"))
    return manifest, {name: read_shard_labels(shards, name) for name in manifest["shards"]}


def report(checked: dict[str, ShardLabels], out=None) -> tuple[int, int]:
    """Print each shard's state; the number of missing labels and of errors."""
    out = out or sys.stdout
    missing = errors = 0
    for name, shard in checked.items():
        total = len(shard.labels) + len(shard.missing)
        state = "no labels file" if shard.absent else f"{len(shard.labels)} of {total} labelled"
        if shard.errors:
            state += f", {len(shard.errors)} errors"
        print(f"{name}: {state}", file=out)
        for error in shard.errors[:20]:
            print(f"  {error}", file=out)
        if len(shard.errors) > 20:
            print(f"  ... {len(shard.errors) - 20} more", file=out)
        if shard.missing and not shard.absent:
            print(f"  missing: {', '.join(shard.missing[:5])}{' ...' if len(shard.missing) > 5 else ''}", file=out)
        missing += len(shard.missing)
        errors += len(shard.errors)
    return missing, errors


def merged_pairs(
    manifest: dict,
    checked: dict[str, ShardLabels],
    candidates: dict[str, dict],
    questions: dict[str, dict] | None = None,
) -> list[dict]:
    """Every labelled pair of every question's first shard, in the shared format, with a second label if any, and
    (given the question file) whether the question's writer expected the documents to answer it."""
    home = {qid: name for name, entry in manifest["shards"].items() for qid in entry["first"]}
    again = {qid: name for name, entry in manifest["shards"].items() for qid in entry["second"]}
    pids_of: dict[str, list[str]] = defaultdict(list)
    for pid, pair in candidates.items():
        pids_of[pair["qid"]].append(pid)
    rows = []
    for qid in sorted(home):
        first = checked[home[qid]].labels
        second = checked[again[qid]].labels if qid in again else {}
        for pid in pids_of[qid]:
            if pid not in first:
                continue
            pair = candidates[pid]
            row = {key: pair.get(key) for key in PAIR_FIELDS if key not in ("label", "role")}
            row.update(first[pid])
            row.update({key: pair.get(key) for key in EXTRA_FIELDS})
            if questions is not None and "answerable" in questions.get(qid, {}):
                row["answerable"] = questions[qid]["answerable"]
            row["shard"] = home[qid]
            if pid in second:
                row.update({"label_2": second[pid]["label"], "role_2": second[pid]["role"], "shard_2": again[qid]})
            rows.append(row)
    return rows


def cmd_merge(args: argparse.Namespace) -> int:
    manifest, checked = read_all_labels(args.shards)
    candidates = read_candidates(args.candidates)
    shard_pids = {row["pid"] for name in manifest["shards"] for row in read_jsonl(args.shards / f"{name}.jsonl")}
    unknown = sorted(shard_pids - set(candidates))
    missing, errors = report(checked)
    if unknown:
        print(f"{len(unknown)} pairs of the shards are in no candidate file: {', '.join(unknown[:5])}")
        errors += len(unknown)
    questions = {row["qid"]: row for row in read_jsonl(args.questions)} if args.questions else None
    rows = merged_pairs(manifest, checked, candidates, questions)
    write_jsonl(args.out, rows)
    counts = Counter(row["label"] for row in rows)
    print(
        f"{len(rows)} pairs of {len({row['qid'] for row in rows})} questions -> {args.out} "
        f"(label 2: {counts[2]}, 1: {counts[1]}, 0: {counts[0]}); {missing} labels missing, {errors} errors"
    )
    if errors or (missing and not args.partial):
        return 1
    return 0


# --- agreement ------------------------------------------------------------------------------------------------


def cohen_kappa(a: list, b: list) -> float | None:
    """Cohen's kappa of two raters over the same items; None when chance agreement is total (one class only)."""
    if len(a) != len(b) or not a:
        raise ValueError("two equally long, non-empty lists of ratings")
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if expected == 1:
        return None
    return (observed - expected) / (1 - expected)


def agreement(manifest: dict, checked: dict[str, ShardLabels]) -> dict:
    """Both labels of every doubly labelled pair, compared."""
    home = {qid: name for name, entry in manifest["shards"].items() for qid in entry["first"]}
    again = {qid: name for name, entry in manifest["shards"].items() for qid in entry["second"]}
    a, b, roles_both_2, questions = [], [], [], set()
    for qid, name in sorted(again.items()):
        first, second = checked[home[qid]].labels, checked[name].labels
        for pid in sorted(set(first) & set(second)):
            if not pid.startswith(f"{qid}:"):
                continue
            a.append(first[pid]["label"])
            b.append(second[pid]["label"])
            questions.add(qid)
            if first[pid]["label"] == 2 and second[pid]["label"] == 2:
                roles_both_2.append(first[pid]["role"] == second[pid]["role"])
    result: dict = {"questions": len(questions), "questions_doubled": len(again), "pairs": len(a)}
    if not a:
        return result
    answers_a, answers_b = [x == 2 for x in a], [x == 2 for x in b]
    result.update(
        {
            "exact": sum(x == y for x, y in zip(a, b)) / len(a),
            "kappa": cohen_kappa(a, b),
            "answers_vs_rest": sum(x == y for x, y in zip(answers_a, answers_b)) / len(a),
            "answers_kappa": cohen_kappa(answers_a, answers_b),
            "role_when_both_2": (sum(roles_both_2) / len(roles_both_2)) if roles_both_2 else None,
            "both_2": len(roles_both_2),
            "confusion": {f"{x}-{y}": n for (x, y), n in sorted(Counter(zip(a, b)).items())},
        }
    )
    return result


def cmd_agreement(args: argparse.Namespace) -> int:
    manifest, checked = read_all_labels(args.shards)
    result = agreement(manifest, checked)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(
        f"{result['pairs']} pairs of {result['questions']} questions labelled twice "
        f"(of {result['questions_doubled']} put in two shards)"
    )
    if result["pairs"]:

        def number(x):
            return "n/a" if x is None else f"{x:.3f}"

        print(f"exact agreement on label: {number(result['exact'])}; Cohen's kappa {number(result['kappa'])}")
        print(
            f"agreement on 2 (answers) vs rest: {number(result['answers_vs_rest'])}; kappa {number(result['answers_kappa'])}"
        )
        print(f"same role where both say 2: {number(result['role_when_both_2'])} of {result['both_2']}")
        print("label pairs (first-second): " + ", ".join(f"{k} {v}" for k, v in result["confusion"].items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    shards = commands.add_parser("shards", help="cut candidates into shards for labellers")
    shards.add_argument("--candidates", type=Path, nargs="+", required=True)
    shards.add_argument("--questions", type=Path, required=True)
    shards.add_argument("--out", type=Path, required=True)
    shards.add_argument("--per-shard", type=int, default=25, help="questions per shard, about")
    shards.add_argument("--double", type=float, default=0.06, help="share of questions labelled twice")
    shards.add_argument("--seed", type=int, default=55)
    shards.add_argument("--append", action="store_true", help="add the questions not yet in OUT's shards as new shards")
    merge = commands.add_parser("merge", help="the shards' labels as one pairs file, checked")
    merge.add_argument("--shards", type=Path, required=True)
    merge.add_argument("--candidates", type=Path, nargs="+", required=True)
    merge.add_argument("--out", type=Path, required=True)
    merge.add_argument("--questions", type=Path, help="the question file: adds `answerable` (the writer's guess)")
    merge.add_argument("--partial", action="store_true", help="missing labels are reported, not an error")
    agree = commands.add_parser("agreement", help="agreement on the questions labelled twice")
    agree.add_argument("--shards", type=Path, required=True)
    agree.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    return {"shards": cmd_shards, "merge": cmd_merge, "agreement": cmd_agreement}[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
