"""The conversational set (data/conversations.jsonl) and the passages judged since it was written
(data/conversations-judged.jsonl), so every benchmark reads them the same way.

The set's answering passages were found by its writer with typedrag's own search and grep; a search that
finds another passage stating the same thing was counted a miss. Pooled judging (as TREC does) closes that
gap: every passage a benchmarked run put in a turn's top five, for a part of the answer it missed, was shown
to a judge who did not know which run found it, beside a passage known to state that part; the ones judged
to state it are added to that part's passages. CONVERSATIONS.md says how, and docs/lab/2026-12-03-conversation-recall.md reports recall
both ways.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
CONVERSATIONS = DATA / "conversations.jsonl"
JUDGED = DATA / "conversations-judged.jsonl"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load(path: Path = CONVERSATIONS, judged: bool = False) -> list[dict]:
    """The conversations; with `judged`, each answer group also holds the passages judged since to state it."""
    conversations = read_jsonl(path)
    if not judged:
        return conversations
    added: dict[tuple[str, int, int], list[dict]] = {}
    for entry in read_jsonl(JUDGED):
        added.setdefault((entry["conversation"], entry["turn"], entry["group"]), []).append(
            {"id": entry["id"], "quote": entry["quote"], "judged": entry["pool"]}
        )
    conversations = copy.deepcopy(conversations)
    for conversation in conversations:
        for number, turn in enumerate(conversation["turns"]):
            for index, group in enumerate(turn["answers"]):
                known = {passage["id"] for passage in group}
                group.extend(p for p in added.get((conversation["id"], number, index), []) if p["id"] not in known)
    return conversations
