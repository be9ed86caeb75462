"""The labeller's tool for one shard of reader labels (issue 55; see LABELLER.md beside the shards).

    python3 label_tool.py claim                      # take the first free shard: mkdir shards/shard-NN.claim
    python3 label_tool.py next shard-NN              # the next question with unlabelled pairs, numbered
    python3 label_tool.py save shard-NN QID <<'EOF'  # one line per pair of QID: "NUMBER LABEL ROLE"
    1 2 cause
    2 0 none
    EOF
    python3 label_tool.py show shard-NN QID          # a question again (with the labels saved for it)
    python3 label_tool.py status shard-NN

Standard library only, and it reads nothing but the shard and its own labels file. `save` checks that every pair of
the question is given exactly once with a label 0, 1 or 2 and a role of the rubric ("none" when the label is 0),
then rewrites shard-NN.labels.jsonl whole through a temporary file and a rename, so a stop at any moment leaves
either the old or the new file; saving a question again replaces its labels. The shards folder is the one this
file is in, or $LABEL_SHARDS.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

LABELS = (0, 1, 2)
ROLES = ("definition", "cause", "consequence", "step", "relates", "item", "for", "against", "advice", "fact", "none")
SHARDS = Path(os.environ.get("LABEL_SHARDS") or Path(__file__).resolve().parent / "shards")


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def shard_path(name: str) -> Path:
    path = SHARDS / f"{name}.jsonl"
    if not name.startswith("shard-") or not path.is_file():
        fail(f"no shard {name!r} in {SHARDS}")
    return path


def read_shard(name: str) -> list[dict]:
    return [json.loads(line) for line in shard_path(name).read_text(encoding="utf-8").splitlines() if line.strip()]


def read_labels(name: str) -> dict[str, dict]:
    path = SHARDS / f"{name}.labels.jsonl"
    if not path.exists():
        return {}
    labels = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            labels[row["pid"]] = {"label": row["label"], "role": row["role"]}
    return labels


def write_labels(name: str, rows: list[dict], labels: dict[str, dict]) -> None:
    """The labels in the shard's order, written to a temporary file and renamed over the labels file."""
    path = SHARDS / f"{name}.labels.jsonl"
    handle, temporary = tempfile.mkstemp(dir=SHARDS, prefix=f".{name}.labels.", suffix=".tmp")
    try:
        os.fchmod(handle, 0o644)  # mkstemp makes it 0600: the merge may run as another user
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            for row in rows:
                if row["pid"] in labels:
                    out.write(json.dumps({"pid": row["pid"], **labels[row["pid"]]}, ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def questions_of(rows: list[dict]) -> list[str]:
    order: list[str] = []
    for row in rows:
        if row["qid"] not in order:
            order.append(row["qid"])
    return order


def print_question(rows: list[dict], qid: str, labels: dict[str, dict]) -> None:
    pairs = [row for row in rows if row["qid"] == qid]
    if not pairs:
        fail(f"no question {qid!r} in this shard")
    print(f"QUESTION {qid} ({pairs[0]['type'] or 'type unknown'}): {pairs[0]['question']}")
    for number, row in enumerate(pairs, 1):
        where = " › ".join(part for part in (row["title"], row["section"]) if part)
        saved = labels.get(row["pid"])
        mark = f"   [saved: {saved['label']} {saved['role']}]" if saved else ""
        print(f"{number}. ({where})\n   {row['sentence']}{mark}")
    print(f"-- {len(pairs)} pairs; save with: save <shard> {qid}, one line per pair: NUMBER LABEL ROLE")


def progress(name: str, rows: list[dict], labels: dict[str, dict]) -> str:
    qids = questions_of(rows)
    done = [qid for qid in qids if all(row["pid"] in labels for row in rows if row["qid"] == qid)]
    given = [labels[r["pid"]]["label"] for r in rows if r["pid"] in labels]
    counts = ", ".join(f"{label}: {given.count(label)}" for label in (2, 1, 0))
    return f"{name}: {len(done)} of {len(qids)} questions, {len(given)} of {len(rows)} pairs labelled ({counts})"


def cmd_claim() -> None:
    for path in sorted(SHARDS.glob("shard-??.jsonl")):
        name = path.stem
        try:
            (SHARDS / f"{name}.claim").mkdir()
        except FileExistsError:
            continue
        print(name)
        return
    fail("every shard is claimed")


def cmd_next(name: str) -> None:
    rows, labels = read_shard(name), read_labels(name)
    for qid in questions_of(rows):
        if any(row["pid"] not in labels for row in rows if row["qid"] == qid):
            print(progress(name, rows, labels))
            print_question(rows, qid, labels)
            return
    print(progress(name, rows, labels))
    print("DONE: every pair of this shard is labelled")


def cmd_save(name: str, qid: str, text: str) -> None:
    rows, labels = read_shard(name), read_labels(name)
    pairs = [row for row in rows if row["qid"] == qid]
    if not pairs:
        fail(f"no question {qid!r} in {name}")
    given: dict[int, dict] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 3:
            fail(f"line {number} {line!r}: want NUMBER LABEL ROLE")
        try:
            index, label = int(parts[0]), int(parts[1])
        except ValueError:
            fail(f"line {number} {line!r}: NUMBER and LABEL are whole numbers")
        role = parts[2]
        if not 1 <= index <= len(pairs):
            fail(f"line {number}: there is no pair {index} (this question has {len(pairs)})")
        if index in given:
            fail(f"line {number}: pair {index} given twice")
        if label not in LABELS:
            fail(f"line {number}: label {label} is not 0, 1 or 2")
        if role not in ROLES:
            fail(f"line {number}: role {role!r} is none of {', '.join(ROLES)}")
        if label == 0 and role != "none":
            fail(f"line {number}: a label 0 takes role none")
        given[index] = {"label": label, "role": role}
    missing = [str(i) for i in range(1, len(pairs) + 1) if i not in given]
    if missing:
        fail(f"pairs {', '.join(missing)} of {qid} have no label; nothing saved")
    for index, row in enumerate(pairs, 1):
        labels[row["pid"]] = given[index]
    write_labels(name, rows, labels)
    print(f"saved {len(pairs)} labels of {qid}. " + progress(name, rows, labels))


def main(argv: list[str]) -> None:
    if not argv:
        fail("commands: claim | next SHARD | save SHARD QID | show SHARD QID | status SHARD")
    command, rest = argv[0], argv[1:]
    if command == "claim" and not rest:
        cmd_claim()
    elif command == "next" and len(rest) == 1:
        cmd_next(rest[0])
    elif command == "save" and len(rest) == 2:
        cmd_save(rest[0], rest[1], sys.stdin.read())
    elif command == "show" and len(rest) == 2:
        rows = read_shard(rest[0])
        print_question(rows, rest[1], read_labels(rest[0]))
    elif command == "status" and len(rest) == 1:
        rows = read_shard(rest[0])
        print(progress(rest[0], rows, read_labels(rest[0])))
    else:
        fail(f"unknown command or wrong arguments: {' '.join(argv)}")


if __name__ == "__main__":
    main(sys.argv[1:])
