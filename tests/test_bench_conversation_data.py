"""The conversational set's judged passages (bench/data/conversations-judged.jsonl) name real answer groups and
only ever add to them: a benchmark that reads the set with them cannot score a turn lower than without."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _conversation_data import JUDGED, load, read_jsonl  # noqa: E402


def test_every_judged_passage_names_an_answer_group_of_the_set():
    conversations = {c["id"]: c for c in load()}
    for entry in read_jsonl(JUDGED):
        turns = conversations[entry["conversation"]]["turns"]
        assert entry["turn"] < len(turns), entry
        answers = turns[entry["turn"]]["answers"]
        assert entry["group"] < len(answers), f"judged passage for an unanswerable turn or a missing group: {entry}"
        assert entry["id"] and len(entry["quote"]) <= 60 and entry["pool"], entry


def test_judged_passages_are_added_to_their_group_and_nothing_is_taken_away():
    written, judged = load(), load(judged=True)
    entries = read_jsonl(JUDGED)
    assert entries, "the judged file is empty"
    added = 0
    for before, after in zip(written, judged, strict=True):
        for number, (turn, turn_after) in enumerate(zip(before["turns"], after["turns"], strict=True)):
            assert len(turn["answers"]) == len(turn_after["answers"])
            for index, (group, group_after) in enumerate(zip(turn["answers"], turn_after["answers"], strict=True)):
                assert group_after[: len(group)] == group
                expected = {
                    e["id"]
                    for e in entries
                    if (e["conversation"], e["turn"], e["group"]) == (before["id"], number, index)
                }
                assert {p["id"] for p in group_after[len(group) :]} == expected - {p["id"] for p in group}
                added += len(group_after) - len(group)
    assert added == len({(e["conversation"], e["turn"], e["group"], e["id"]) for e in entries})
