"""The count of meta filler: sentences of an answer about what its sources do not say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from typedrag.evaluation.filler import meta_sentences

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "sentence",
    [
        "The sources do not cover caching or bulk operations.",
        "The documentation doesn't say how long it takes [2].",
        "The provided passages cannot describe how space is returned.",
        "This is not covered in the manual.",
        "There is no information in the sources about wal_buffers.",
        "The sources lack details on partitioning.",
        "These sources do not explicitly state which is faster.",
        "The given context provides no guidance on choosing a size.",
        "Which composer wrote the opera, and where he worked, is not covered.",
    ],
)
def test_a_sentence_on_what_the_sources_do_not_say_is_counted(sentence):
    assert meta_sentences(f"VACUUM FULL rewrites the table [1]. {sentence} Use VACUUM routinely [2].") == [
        sentence.replace(" [2]", "")
    ]


@pytest.mark.parametrize(
    "sentence",
    [
        "VACUUM does not lock the table [1].",
        "jsonb stores the documents in a decomposed binary form, not as text [2].",
        "The manual recommends VACUUM, not VACUUM FULL, for routine use [4].",
        "Use select_related to avoid one query per row [3].",
        "A document store lacks joins.",
    ],
)
def test_a_claim_about_the_subject_is_not_counted(sentence):
    assert meta_sentences(sentence) == []


def test_the_bench_counts_them_per_method_and_type(tmp_path):
    """bench_compare.py filler reads `answers` output: meta sentences of answers that are no abstention, abstentions
    and the model's own sentences, per method and type."""
    rows = {
        "rag": [
            ("q1", "COMPARISON", "A differs [1]. The sources do not say which is faster.", False, []),
            ("q2", "EXPERIENCE", "The documents do not answer this.", True, []),
        ],
        "typed": [
            ("q1", "COMPARISON", "A differs [1].", False, ["B is faster."]),
            ("q2", "EXPERIENCE", "Use COPY [2].", False, []),
        ],
    }
    for method, answers in rows.items():
        path = tmp_path / "postgresql" / f"{method}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text(
            "".join(
                json.dumps(
                    {
                        "id": i,
                        "question": "?",
                        "type": t,
                        "answer": a,
                        "result": {
                            "answer": a,
                            "abstained": abstained,
                            "unsourced": {"sentences": own} if own else None,
                            "usage": {"calls": 2},
                        },
                    }
                )
                + "\n"
                for i, t, a, abstained, own in answers
            )
        )
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_compare.py"), "filler", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT)},
    ).stdout
    assert "| rag | all | 2 | 1 | 1 (1) | 0 (0) | 2.0 |" in out
    assert (
        "| typed | all | 2 | 0 | 0 (0) | 1 (1) | 2.0 |" in out
        and "| typed | comparison | 1 | 0 | 0 (0) | 1 (1) | 2.0 |" in out
    )
