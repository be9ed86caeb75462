"""scripts/reader_labels.py (issue 55): shards for labelling helpers, the merge that checks their labels, and the
agreement on the questions labelled twice, on a small synthetic set of candidates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import reader_labels  # noqa: E402

CORPORA = ("alpha-docs", "beta-docs", "gamma-docs")


def write_jsonl(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def labelling(tmp_path):
    """Candidates of 12 questions over three corpora (3 pairs each, the last question of gamma with none), their
    question file, and shards of about 3 questions with a quarter of the questions labelled twice."""
    questions, pairs = [], []
    for corpus in CORPORA:
        for n in range(1, 5):
            qid = f"{corpus[:2]}-{n:03d}"
            questions.append(
                {"qid": qid, "corpus": corpus, "type": "REASON", "question": f"why {qid}?", "answerable": n != 4}
            )
            for k in range(3):
                pairs.append(
                    {
                        "pid": f"{qid}:{k:010x}",
                        "qid": qid,
                        "corpus": corpus,
                        "question": f"why {qid}?",
                        "type": "REASON",
                        "passage_id": f"page.html#{k}",
                        "title": "Page",
                        "section": "A › B",
                        "sentence": f"Sentence {k} of {qid} here.",
                        "block": "item" if k == 1 else "prose",
                        "item_order": None,
                        "source_rank": k + 1,
                        "page": None,
                    }
                )
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    write_jsonl(candidates / "all.jsonl", pairs)
    write_jsonl(candidates / "all.meta.jsonl", [{"qid": q["qid"], "pairs": 3} for q in questions])  # skipped
    write_jsonl(tmp_path / "questions.jsonl", questions)
    shards = tmp_path / "shards"
    code = reader_labels.main(
        [
            "shards",
            "--candidates",
            *map(str, candidates.iterdir()),
            "--questions",
            str(tmp_path / "questions.jsonl"),
            "--out",
            str(shards),
            "--per-shard",
            "3",
            "--double",
            "0.25",
        ]
    )
    assert code == 0
    return tmp_path, candidates, shards, pairs


def label_for(pid: str) -> dict:
    """A made-up but fixed label for a pair."""
    k = int(pid.rsplit(":", 1)[1], 16)
    return {"label": k, "role": ("none", "fact", "cause")[k]}


def label_everything(shards: Path, change=lambda name, pid, label: label) -> None:
    for path in sorted(shards.glob("shard-??.jsonl")):
        rows = [{"pid": row["pid"], **change(path.stem, row["pid"], label_for(row["pid"]))} for row in read_jsonl(path)]
        write_jsonl(path.with_name(f"{path.stem}.labels.jsonl"), rows)


def test_every_question_is_in_one_shard_and_the_doubled_ones_in_a_second_other_shard(labelling):
    _, _, shards, pairs = labelling
    manifest = json.loads((shards / "manifest.json").read_text())
    firsts = [qid for entry in manifest["shards"].values() for qid in entry["first"]]
    assert sorted(firsts) == sorted({p["qid"] for p in pairs})  # each question once as a first copy
    doubled = manifest["double"]
    assert len(doubled) == 3 and {qid[:2] for qid in doubled} == {"al", "be", "ga"}  # one per corpus at least
    for qid in doubled:
        (home,) = [name for name, entry in manifest["shards"].items() if qid in entry["first"]]
        (again,) = [name for name, entry in manifest["shards"].items() if qid in entry["second"]]
        assert home != again
    for name, entry in manifest["shards"].items():
        rows = read_jsonl(shards / f"{name}.jsonl")
        assert len(rows) == entry["pairs"] == 3 * len(entry["first"] + entry["second"])
        assert all(set(row) == {*reader_labels.SHARD_FIELDS, "label", "role"} for row in rows)
        assert all(row["label"] is None and row["role"] is None for row in rows)
        order = [row["qid"] for row in rows]
        assert order == sorted(order, key=order.index)  # a question's pairs together
        assert "corpus" not in rows[0] and "block" not in rows[0]  # a labeller judges the text alone


def test_shards_are_the_same_when_made_again(labelling, tmp_path):
    root, candidates, shards, _ = labelling
    again = tmp_path / "again"
    reader_labels.main(
        [
            "shards",
            "--candidates",
            *map(str, candidates.iterdir()),
            "--questions",
            str(root / "questions.jsonl"),
            "--out",
            str(again),
            "--per-shard",
            "3",
            "--double",
            "0.25",
        ]
    )
    for path in shards.iterdir():
        assert (again / path.name).read_bytes() == path.read_bytes()


def test_merge_writes_the_shared_format_with_the_second_label_of_doubled_questions(labelling, capsys):
    root, candidates, shards, pairs = labelling
    label_everything(shards)
    out = root / "pairs.jsonl"
    code = reader_labels.main(
        [
            "merge",
            "--shards",
            str(shards),
            "--candidates",
            *map(str, candidates.iterdir()),
            "--out",
            str(out),
            "--questions",
            str(root / "questions.jsonl"),
        ]
    )
    assert code == 0, capsys.readouterr().out
    rows = read_jsonl(out)
    assert len(rows) == len(pairs)  # each pair once, doubled or not
    assert list(rows[0])[:10] == list(reader_labels.PAIR_FIELDS)
    by_pid = {row["pid"]: row for row in rows}
    for pair in pairs:
        row = by_pid[pair["pid"]]
        assert (row["label"], row["role"]) == tuple(label_for(pair["pid"]).values())
        assert row["block"] == pair["block"] and row["source_rank"] == pair["source_rank"]
        assert row["answerable"] == (not pair["qid"].endswith("004"))
    doubled = set(json.loads((shards / "manifest.json").read_text())["double"])
    assert {row["qid"] for row in rows if "label_2" in row} == doubled
    assert "0 labels missing, 0 errors" in capsys.readouterr().out


def test_merge_reports_every_kind_of_bad_label_and_fails(labelling, capsys):
    root, candidates, shards, _ = labelling
    label_everything(shards)
    path = shards / "shard-01.labels.jsonl"
    rows = read_jsonl(path)
    first, second, third, fourth = rows[0]["pid"], rows[1]["pid"], rows[2]["pid"], rows[3]["pid"]
    lines = [
        json.dumps({"pid": first, "label": 3, "role": "fact"}),
        json.dumps({"pid": second, "label": 2, "role": "why"}),
        json.dumps({"pid": third, "label": 0, "role": "fact"}),
        json.dumps({"pid": fourth, "label": True, "role": "fact"}),
        json.dumps({"pid": "zz-001:0000000000", "label": 1, "role": "fact"}),
        "{not json",
        *[json.dumps(row) for row in rows[4:]],
        json.dumps(rows[-1]),  # the last pair twice
    ]
    path.write_text("\n".join(lines) + "\n")
    (shards / "shard-02.labels.jsonl").unlink()
    code = reader_labels.main(
        [
            "merge",
            "--shards",
            str(shards),
            "--candidates",
            *map(str, candidates.iterdir()),
            "--out",
            str(root / "pairs.jsonl"),
            "--partial",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1  # wrong labels fail even with --partial
    assert "label 3 is not 0, 1 or 2" in out and "role 'why' is not one of the rubric's" in out
    assert "label 0 with role 'fact'" in out and "label True is not 0, 1 or 2" in out
    assert "pid 'zz-001:0000000000' is not a pair of shard-01" in out and "not JSON" in out
    assert f"pid {rows[-1]['pid']} labelled a second time" in out
    assert "shard-02: no labels file" in out
    assert f"missing: {first}" in out  # the pairs whose line was wrong are still to be labelled
    merged = {row["pid"] for row in read_jsonl(root / "pairs.jsonl")}
    assert first not in merged and rows[-1]["pid"] in merged  # only valid labels are merged


def test_missing_labels_fail_the_merge_unless_partial(labelling, capsys):
    root, candidates, shards, _ = labelling
    label_everything(shards)
    path = shards / "shard-03.labels.jsonl"
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines()[:-2]))
    arguments = [
        "merge",
        "--shards",
        str(shards),
        "--candidates",
        *map(str, candidates.iterdir()),
        "--out",
        str(root / "p.jsonl"),
    ]
    assert reader_labels.main(arguments) == 1
    assert "2 labels missing, 0 errors" in capsys.readouterr().out
    assert reader_labels.main([*arguments, "--partial"]) == 0


def test_agreement_on_the_doubled_questions_matches_scikit_learn(labelling, capsys):
    _, _, shards, _ = labelling
    manifest = json.loads((shards / "manifest.json").read_text())
    seconds = {name for name, entry in manifest["shards"].items() if entry["second"]}
    doubled = manifest["double"]

    def second_opinion(name, pid, label):
        # In its second shard, the first pair of the first doubled question reads 1 where it was 0, and the
        # third pair of every doubled question 1 where it was 2.
        k = int(pid.rsplit(":", 1)[1], 16)
        if name in seconds and pid.split(":")[0] in manifest["shards"][name]["second"]:
            if k == 0 and pid.startswith(doubled[0]):
                return {"label": 1, "role": "fact"}
            if k == 2:
                return {"label": 1, "role": "fact"}
        return label

    label_everything(shards, second_opinion)
    manifest, checked = reader_labels.read_all_labels(shards)
    result = reader_labels.agreement(manifest, checked)
    first = [0, 1, 2] * 3  # kappa depends on the pairs of labels, not on their order
    second = [1, 1, 1] + [0, 1, 1] * 2
    assert result["questions"] == 3 and result["pairs"] == 9
    assert result["exact"] == pytest.approx(5 / 9)
    assert result["kappa"] == pytest.approx(cohen_kappa_score(first, second))
    assert result["answers_vs_rest"] == pytest.approx(6 / 9)
    assert result["answers_kappa"] == pytest.approx(
        cohen_kappa_score([x == 2 for x in first], [x == 2 for x in second])
    )
    assert result["both_2"] == 0 and result["role_when_both_2"] is None
    reader_labels.main(["agreement", "--shards", str(shards)])
    assert "9 pairs of 3 questions labelled twice" in capsys.readouterr().out


def test_cohen_kappa_of_a_textbook_table():
    # 50 items: both yes 20, yes/no 5, no/yes 10, both no 15 -> observed .7, chance .5, kappa .4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert reader_labels.cohen_kappa(a, b) == pytest.approx(0.4)
    assert reader_labels.cohen_kappa([1, 1], [1, 1]) is None  # one class only: kappa is undefined


def tool(shards: Path, *arguments: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "reader_label_tool.py"), *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "LABEL_SHARDS": str(shards)},
        timeout=60,
    )


def test_the_labellers_tool_saves_whole_questions_only_and_resumes_where_it_stopped(labelling, capsys):
    root, candidates, shards, _ = labelling
    assert tool(shards, "claim").stdout.strip() == "shard-01"
    assert tool(shards, "claim").stdout.strip() == "shard-02"  # shard-01's claim folder exists
    rows = read_jsonl(shards / "shard-01.jsonl")
    qid = rows[0]["qid"]
    shown = tool(shards, "next", "shard-01").stdout
    assert f"QUESTION {qid} (REASON): why {qid}?" in shown and f"1. (Page › A › B)\n   {rows[0]['sentence']}" in shown
    for wrong, message in [
        ("1 2 fact\n2 1 fact\n", "pairs 3 of"),
        ("1 2 fact\n2 1 fact\n3 0 fact\n", "label 0 takes role none"),
        ("1 2 fact\n1 1 fact\n3 0 none\n", "pair 1 given twice"),
        ("1 2 why\n2 1 fact\n3 0 none\n", "role 'why'"),
        ("1 5 fact\n2 1 fact\n3 0 none\n", "label 5"),
        ("1 2\n", "NUMBER LABEL ROLE"),
    ]:
        run = tool(shards, "save", "shard-01", qid, stdin=wrong)
        assert run.returncode == 2 and message in run.stderr
        assert not (shards / "shard-01.labels.jsonl").exists()  # nothing saved
    run = tool(shards, "save", "shard-01", qid, stdin="1 2 cause\n2 1 definition\n3 0 none\n")
    assert run.returncode == 0 and "1 of 3 questions, 3 of 9 pairs labelled (2: 1, 1: 1, 0: 1)" in run.stdout
    assert f"QUESTION {rows[3]['qid']}" in tool(shards, "next", "shard-01").stdout  # the next question
    tool(shards, "save", "shard-01", qid, stdin="1 1 fact\n2 1 definition\n3 0 none\n")  # saved again: replaced
    saved = read_jsonl(shards / "shard-01.labels.jsonl")
    assert saved == [
        {"pid": rows[0]["pid"], "label": 1, "role": "fact"},
        {"pid": rows[1]["pid"], "label": 1, "role": "definition"},
        {"pid": rows[2]["pid"], "label": 0, "role": "none"},
    ]
    for other in questions_in(rows)[1:]:
        tool(shards, "save", "shard-01", other, stdin="1 2 step\n2 1 fact\n3 0 none\n")
    assert "DONE" in tool(shards, "next", "shard-01").stdout
    manifest, checked = reader_labels.read_all_labels(shards)
    assert checked["shard-01"].missing == [] and checked["shard-01"].errors == []  # what merge reads


def questions_in(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(row["qid"] for row in rows))


def test_new_corpora_are_appended_as_new_shards_and_the_old_ones_stay_as_they_were(labelling, tmp_path):
    root, candidates, _, pairs = labelling
    early, later = tmp_path / "early.jsonl", tmp_path / "later.jsonl"
    write_jsonl(early, [p for p in pairs if p["corpus"] != "gamma-docs"])
    write_jsonl(later, [p for p in pairs if p["corpus"] == "gamma-docs"])
    shards = tmp_path / "batches"
    common = [
        "--questions",
        str(root / "questions.jsonl"),
        "--out",
        str(shards),
        "--per-shard",
        "3",
        "--double",
        "0.25",
    ]
    assert reader_labels.main(["shards", "--candidates", str(early), *common]) == 0
    before = {path.name: path.read_bytes() for path in shards.glob("shard-*.jsonl")}
    with pytest.raises(SystemExit, match="--append"):  # never cut shards anew under labels already written
        reader_labels.main(["shards", "--candidates", str(early), str(later), *common])
    assert reader_labels.main(["shards", "--candidates", str(early), str(later), *common, "--append"]) == 0
    assert {path.name: path.read_bytes() for path in shards.glob("shard-*.jsonl") if path.name in before} == before
    manifest = json.loads((shards / "manifest.json").read_text())
    added = sorted(set(manifest["shards"]) - {name[: -len(".jsonl")] for name in before})
    assert added and added[0] == f"shard-{len(before) + 1:02d}"
    firsts = [qid for entry in manifest["shards"].values() for qid in entry["first"]]
    assert sorted(firsts) == sorted({p["qid"] for p in pairs})
    assert all(manifest["shards"][name]["first"][0].startswith("ga-") for name in added)
    assert {qid[:2] for qid in manifest["double"]} == {"al", "be", "ga"}
    assert (
        reader_labels.main(["shards", "--candidates", str(early), str(later), *common, "--append"]) == 0
    )  # nothing new
