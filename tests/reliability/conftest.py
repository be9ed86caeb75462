"""Helpers shared by the reliability suite: models and pipelines on the loopback stub, the CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from typedrag.engines.llm_engine import LLMEngine
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.pipeline import Pipeline

TIMEOUT = (
    0.5  # seconds per attempt, for the faults that are hangs (a reply 10x later, a drip): short, so they cost little
)
PATIENT = 30.0  # seconds per attempt for every other fault: a loaded machine never turns a bad body into a timeout
RETRIES = 1


def stub_model(base_url: str, **kwargs) -> OpenAIChatModel:
    kwargs.setdefault("timeout", PATIENT)
    kwargs.setdefault("max_retries", RETRIES)
    return OpenAIChatModel(model="stub", base_url=base_url, api_key="sk-reliability", **kwargs)


def stub_pipeline(base_url: str, retriever, **kwargs) -> Pipeline:
    return Pipeline(LLMEngine(stub_model(base_url, **kwargs)), retriever)


def run_cli(
    *args: str | bytes, env: dict[str, str] | None = None, cwd=None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """`typedrag ARGS` in a fresh process, with no TYPEDRAG_*/OPENAI_* settings leaking in from outside."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "typedrag.cli", *args],
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        cwd=cwd,
        timeout=timeout,
    )


def wait_until_serving(process: subprocess.Popen, port: int) -> None:
    """Wait until the server `process` started on `port` says it is ready (GET /readyz is 200), however loaded the
    machine: the test fails if the process ends first, never on the clock (a 90 s deadline failed at load 20)."""
    while True:
        assert process.poll() is None, f"the server exited before it was ready: {process.communicate()[1][-2000:]}"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=None).status_code == 200:
                return
        except httpx.TransportError:  # not listening yet
            pass
        time.sleep(0.2)


def assert_clean_failure(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit code 2 and an `error:` message on stderr mentioning every fragment, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: "), proc.stderr
    squashed = "".join(proc.stderr.split())  # the console may wrap a long message, even inside a path
    for fragment in fragments:
        assert "".join(fragment.split()) in squashed, (fragment, proc.stderr)
