"""A run killed mid-way (SIGKILL, plus a torn last line) resumes with no lost and no duplicated rows."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from test_eval import judge_or_answer, write_dataset

from typedrag.testing.openai_stub import ChatRequest, OpenAIStubServer, Reply

ROOT = Path(__file__).resolve().parents[1]
CLI = "import typer; from typedrag.evaluation.command import eval_command; typer.run(eval_command)"
QUESTIONS, METHODS, ROUNDS = 6, ("llm", "rag", "typed"), 2


def slow(request: ChatRequest) -> Reply:
    reply = judge_or_answer(request)
    reply.delay = 0.15  # slow enough to kill the run half-way
    return reply


def complete_lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return text.split("\n")[:-1]  # a torn tail has no newline yet


def test_killed_run_resumes_without_losing_or_duplicating(tmp_path, small_index):
    dataset, out, cache = write_dataset(tmp_path / "data", QUESTIONS), tmp_path / "run", tmp_path / "cache"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "TYPEDRAG_CACHE_DIR": str(cache),
    }
    with OpenAIStubServer(slow) as server:
        command = [
            sys.executable, "-c", CLI, "--dataset", str(dataset), "--index", str(small_index), "--out", str(out),
            "--methods", ",".join(METHODS), "--llm", "gen", "--base-url", server.base_url,
            "--judge", "judge", "--judge-base-url", server.base_url,
            "--rounds", str(ROUNDS), "--concurrency", "2", "--no-progress",
        ]  # fmt: skip
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while len(complete_lines(out / "verdicts.jsonl")) < 4:
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline, "the first run wrote no verdicts in time"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stderr.close()

        before = {name: complete_lines(out / name) for name in ("answers.jsonl", "verdicts.jsonl")}
        assert len(before["verdicts.jsonl"]) < QUESTIONS * len(METHODS) * ROUNDS, "the run finished before the kill"
        for name in before:  # a torn write: half a record with no newline
            with (out / name).open("a", encoding="utf-8") as f:
                f.write('{"question_id": "q0", "method": "rag", "ans')

        rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr

        answers = [json.loads(line) for line in complete_lines(out / "answers.jsonl")]
        verdicts = [json.loads(line) for line in complete_lines(out / "verdicts.jsonl")]
        expected = Counter((f"q{i}", m) for i in range(QUESTIONS) for m in METHODS)
        assert Counter((a["question_id"], a["method"]) for a in answers) == expected
        assert Counter((v["question_id"], v["method"], v["round"]) for v in verdicts) == Counter(
            (q, m, r) for q, m in expected for r in range(1, ROUNDS + 1)
        )
        assert (out / "answers.jsonl").read_text(encoding="utf-8").endswith("}\n")
        for name, lines in before.items():  # what was written before the crash is kept, not redone
            assert complete_lines(out / name)[: len(lines)] == lines
        summary = json.loads((out / "summary.json").read_text())
        assert all(stats["scored"] == QUESTIONS for stats in summary["per_method"].values())

        # A third run with the LLM cache wiped must find everything done and call nothing.
        shutil.rmtree(cache)
        sent = len(server.requests)
        third = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert third.returncode == 0, third.stderr
        assert len(server.requests) == sent
        assert len(complete_lines(out / "answers.jsonl")) == len(answers)
