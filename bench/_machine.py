"""The machine a benchmark ran on, printed at the top of every benchmark's output, and the LLM stub
the latency benchmarks run against."""

from __future__ import annotations

import multiprocessing
import os
import platform
import subprocess
from contextlib import contextmanager
from datetime import datetime, timezone


def machine_line() -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = "?"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            mem = f"{int(f.readline().split()[1]) / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{now} · {cpu} · {os.cpu_count()} cores · {mem} · Python {platform.python_version()} · commit {commit or '?'}"
    )


@contextmanager
def stub_in_own_process(responder, **options):
    """The loopback OpenAI stub in a forked process of its own; yields its base URL.

    A real LLM server runs apart from its client. In-process, the stub's HTTP handling takes the GIL
    from the pipeline being timed and shows up as pipeline overhead. Fork it before heavy libraries
    (ONNX Runtime, tantivy) start their threads.
    """
    from typedrag.testing.openai_stub import OpenAIStubServer

    context = multiprocessing.get_context("fork")
    urls, stop = context.Queue(), context.Event()

    def serve() -> None:
        with OpenAIStubServer(responder, **options) as server:
            urls.put(server.base_url)
            stop.wait()

    process = context.Process(target=serve, daemon=True)
    process.start()
    try:
        yield urls.get(timeout=60)
    finally:
        stop.set()
        process.join(10)
