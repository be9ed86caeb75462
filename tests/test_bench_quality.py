"""The answer-quality benchmark's LLM path (`--llm/--base-url`), end to end against the loopback stub."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import require_shared_data

from typedrag.testing.openai_stub import OpenAIStubServer

ROOT = Path(__file__).resolve().parents[1]


def test_quality_benchmark_runs_against_an_openai_compatible_endpoint(small_index, tmp_path):
    require_shared_data()  # the Wiki-NFQA questions
    with OpenAIStubServer() as stub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))}
        run = subprocess.run(
            [
                sys.executable,
                "bench/bench_quality.py",
                "--index",
                str(small_index),
                "--demo-index",
                str(small_index),
                "--limit",
                "12",
                "--llm",
                "stub-model",
                "--base-url",
                stub.base_url,
                "--dump",
                str(tmp_path / "rows.jsonl"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            env={**env, "TYPEDRAG_CACHE_DIR": str(tmp_path / "cache")},
        )
        requests = list(stub.requests)
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout
    assert "answered by openai-compatible:stub-model@127.0.0.1" in out  # the endpoint, not the offline engine
    assert (
        "## a. Wiki-NFQA: 12 questions" in out
        and "### wikipedia-demo: encyclopedia, one lead per article — 66 questions" in out
    )
    assert "| all | " in out and "## d. Aspect diversity" in out and "tuned on this corpus" in out
    rows = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert len(rows) == 12 + 66
    answers = [r for r in requests if r.schema_name is None]
    assert len(answers) >= 2 * (12 + 66)  # every answer of both methods was written by the endpoint
    assert any(r.schema_name for r in requests)  # and the typed plans were asked of it too
