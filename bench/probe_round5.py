"""The fifth hostile round's probes (issue 42, and items 9, 10, 12 of issue 41), run against whichever typedrag is
on PYTHONPATH, so the same command gives the "before" and "after" columns of docs/lab/2026-12-02-hostile-5.md:

    PYTHONPATH=/path/to/checkout python bench/probe_round5.py [--only NAME ...]

Each probe prints one line: its name and what it saw. The probes start real `typedrag serve` processes on
loopback, a real OTLP receiver (typedrag.testing.otlp_receiver) and the OpenAI stub; nothing leaves the
machine. Durations are wall-clock on a shared 2-core machine: medians of a few runs, read as orders of size.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import shutil
import signal
import socket
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

DOCUMENTS = [
    (
        "rome",
        "Decline of the Western Roman Empire",
        "Historians list many causes for the fall of the Western Roman Empire. "
        "Economic troubles, including heavy taxation and inflation, weakened the state. Repeated invasions by Germanic tribes "
        "put pressure on the frontiers. Political instability undermined central authority.",
    ),
    (
        "bread",
        "Bread making",
        "To bake bread, first mix flour, water, salt and yeast into a dough. Knead the dough until it "
        "is smooth. Let it rise in a warm place, shape the loaf, then bake it in a hot oven.",
    ),
]
QUESTION = "Why did the Western Roman Empire fall?"
SECRET = "sk-probe-SECRET-0042"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def env_for(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_", "OTEL_"))}
    return {**clean, **extra}


class Serve:
    """`typedrag serve --llm offline` in a child process, its stderr kept in a file."""

    def __init__(self, index: Path, workdir: Path, **env: str) -> None:
        self.port = free_port()
        self.log = workdir / f"serve-{self.port}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "typedrag.cli", "serve", "--index", str(index), "--port", str(self.port), "--llm", "offline"],
            stdout=subprocess.DEVNULL, stderr=self.log.open("w"), env=env_for(**env),
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}"

    def ready(self) -> int:
        """The /readyz status once the server answers, or the exit code (negative) if it ended first."""
        while True:
            if self.process.poll() is not None:
                return -1000 - self.process.returncode
            try:
                return httpx.get(f"{self.url}/readyz", timeout=10).status_code
            except httpx.TransportError:
                time.sleep(0.2)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self, sig: int = signal.SIGTERM) -> str:
        self.process.send_signal(sig)
        self.process.wait(120)
        return self.log.read_text()


def build_index(workdir: Path) -> Path:
    from typedrag.index import build_index as build

    corpus = workdir / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in DOCUMENTS))
    build([corpus], workdir / "index", passage_words=40, show_progress=False)
    return workdir / "index"


# ---------------------------------------------------------------- the probes


def methods(index: Path, workdir: Path) -> str:
    """D1: 200 requests, each with its own random 8 KB method, then one scrape."""
    serve = Serve(index, workdir)
    serve.ready()
    for _ in range(200):
        method = "".join(random.choices(string.ascii_uppercase, k=8192))
        with socket.create_connection(("127.0.0.1", serve.port)) as sock:
            sock.sendall(f"{method} /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
            while sock.recv(65536):
                pass
    started = time.perf_counter()
    scrape = httpx.get(f"{serve.url}/metrics", timeout=300)
    seconds = time.perf_counter() - started
    peak = serve.rss_mb()
    serve.stop()
    return f"scrape {len(scrape.content) / 1e6:.2f} MB in {seconds:.2f} s, peak RSS {peak:.0f} MB"


def deep_json(index: Path, workdir: Path) -> str:
    """D2: 50 requests whose `type` is nested 600 deep (~1.2 KB each)."""
    serve = Serve(index, workdir)
    serve.ready()
    before = serve.log.stat().st_size
    body = '{"question": "Why is the sky blue?", "type": ' + "[" * 600 + "]" * 600 + "}"
    statuses = Counter(
        httpx.post(f"{serve.url}/v1/answer", content=body, headers={"content-type": "application/json"}).status_code
        for _ in range(50)
    )
    time.sleep(0.5)
    grown = serve.log.stat().st_size - before
    serve.stop()
    return f"statuses {dict(statuses)}, log +{grown / 50 / 1000:.1f} KB per request"


def spans_text(index: Path, workdir: Path) -> str:
    """D3: with text off, spans holding an endpoint's error body, or a model's not-in-sources restatement."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from typedrag import Pipeline
    from typedrag.engines.llm_engine import LLMEngine
    from typedrag.index import open_retriever
    from typedrag.llm.openai_chat import OpenAIChatModel
    from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_responder

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    def text_of(spans) -> str:
        out = []
        for s in spans:
            out += [s.name, s.status.description or "", json.dumps(dict(s.attributes), default=str)]
            out += [json.dumps(dict(e.attributes), default=str) for e in s.events]
        return "\n".join(out)

    def restating(request):
        if request.schema_name is None and "not_in_sources" in request.prompt:
            return Reply(content='{"not_in_sources": "RESTATED why Rome fell"}')
        return default_responder(request)

    found = []
    for responder, marker, method in ((lambda r: Reply(status=400, content="SECRET-BODY from the endpoint"), "SECRET-BODY", "typed"),
                                      (restating, "RESTATED", "rag")):  # fmt: skip
        exporter.clear()
        with OpenAIStubServer(responder) as stub:
            model = OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0, timeout=30)
            try:
                asyncio.run(Pipeline(LLMEngine(model), open_retriever(index)).answer(QUESTION, method=method))
            except Exception:
                pass
        spans = exporter.get_finished_spans()
        found.append(f"{marker}: {sum(marker in text_of([s]) for s in spans)} of {len(spans)} spans")
    return "; ".join(found)


def header_secret(index: Path, workdir: Path) -> str:
    """D4: a malformed OTEL_EXPORTER_OTLP_HEADERS holding a bearer token, for `ask` and for `serve`."""
    from typedrag.testing.otlp_receiver import OTLPReceiver

    with OTLPReceiver() as receiver:
        otel = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization: Bearer {SECRET}",
        }
        asked = subprocess.run([sys.executable, "-m", "typedrag.cli", "ask", QUESTION, "--index", str(index), "--method", "rag"],
                               capture_output=True, text=True, env=env_for(**otel), cwd=workdir)  # fmt: skip
        serve = Serve(index, workdir, **otel)
        serve.ready()
        log = serve.stop()
    return f"ask stderr: {asked.stderr.count(SECRET)} times; serve log: {log.count(SECRET)} times"


def reader_model(index: Path, workdir: Path) -> str:
    """D5: the reader model missing (serve, /readyz, an answer) and tampered with its checksum made to match."""
    import hashlib

    import numpy as np

    from typedrag.reader import MODEL_DIR, MODEL_FILE

    results = []
    broken = workdir / "reader-missing"
    shutil.copytree(MODEL_DIR, broken)
    (broken / MODEL_FILE).unlink()
    # serve with the default model hidden: run it with a sitecustomize that points the reader at the copy
    hook = workdir / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(
        "import os, typedrag.engines.offline as o, typedrag.reader as r\n"
        "o.default_reader = lambda: r.Reader(__import__('pathlib').Path(os.environ['PROBE_READER']))\n"
    )
    serve = Serve(index, workdir, PYTHONPATH=f"{hook}:{os.environ.get('PYTHONPATH', '')}", PROBE_READER=str(broken))
    ready = serve.ready()
    if ready > 0:
        answer = httpx.post(f"{serve.url}/v1/answer", json={"question": QUESTION}, timeout=120).status_code
        results.append(f"missing: /readyz {ready}, answer {answer}")
        serve.stop()
    else:
        results.append(
            f"missing: serve exited {-(ready + 1000)}: {serve.log.read_text().strip().splitlines()[-1][:120]}"
        )
    for name, change in (("NaN leaves", "a['answers.value'][0][a['answers.leaf'][0]] = np.nan"),
                         ("cycle", "a['on_topic.left'][0, 0] = a['on_topic.right'][0, 0] = 0")):  # fmt: skip
        folder = workdir / f"reader-{name.replace(' ', '-')}"
        shutil.copytree(MODEL_DIR, folder)
        with np.load(folder / MODEL_FILE) as stored:
            a = {k: stored[k].copy() for k in stored.files}
        exec(change, {"a": a, "np": np})
        buffer = io.BytesIO()
        np.savez(buffer, **a)
        (folder / MODEL_FILE).write_bytes(buffer.getvalue())
        meta = json.loads((folder / "meta.json").read_text())
        meta["sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
        (folder / "meta.json").write_text(json.dumps(meta))
        code = (f"from typedrag.reader import Reader; r = Reader(__import__('pathlib').Path({str(folder)!r})); "
                f"print(r.read({QUESTION!r}, [('Rome', 'Taxes and invasions weakened the Western Roman Empire.')])[0])")  # fmt: skip
        try:
            out = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env_for()
            )
            said = (out.stdout.strip() or out.stderr.strip().splitlines()[-1])[:110]
        except subprocess.TimeoutExpired:
            said = "still reading after 60 s (killed)"
        results.append(f"{name}: {said}")
    return "; ".join(results)


def vanished_file(index: Path, workdir: Path) -> str:
    """D6: a swap file under the folder vanishes between being listed and being measured, as the manifest is written."""
    import typedrag.index.tantivy.build as tantivy_build
    from typedrag.index.tantivy import sync_index

    docs, target = workdir / "docs", workdir / "synced"
    docs.mkdir(exist_ok=True)
    (docs / "a.txt").write_text("The okapi lives in the rainforest of the Congo.\n")
    sync_index([docs], target, show_progress=False)
    (docs / "b.txt").write_text("The quokka lives on Rottnest Island.\n")
    swap = docs / ".b.txt.swp"
    swap.write_bytes(b"b0VIM")
    real_manifest, real_stat, active = tantivy_build._manifest, os.stat, [False]

    def manifest(*args, **kwargs):
        active[0] = True
        try:
            return real_manifest(*args, **kwargs)
        finally:
            active[0] = False

    def stat(path, *args, **kwargs):
        result = real_stat(path, *args, **kwargs)
        if active[0] and isinstance(path, (str, os.PathLike)) and Path(path) == swap:
            swap.unlink(missing_ok=True)
        return result

    tantivy_build._manifest, os.stat = manifest, stat
    try:
        summary = sync_index([docs], target, show_progress=False)
        return f"synced: added {summary.added}, {summary.documents} documents"
    except Exception as error:
        return f"{type(error).__name__}: {str(error).replace(str(workdir), '...')}"
    finally:
        tantivy_build._manifest, os.stat = real_manifest, real_stat


def sigterm(index: Path, workdir: Path) -> str:
    """D12: three answers, then SIGTERM, the batch exporter's own interval out of reach (1 h)."""
    from typedrag.testing.otlp_receiver import OTLPReceiver

    with OTLPReceiver() as receiver:
        serve = Serve(index, workdir, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="3600000")
        serve.ready()
        for _ in range(3):
            httpx.post(f"{serve.url}/v1/answer", json={"question": QUESTION, "method": "rag"}, timeout=120)
        serve.stop(signal.SIGTERM)
        answers = sum(span.name == "typedrag.answer" for span in receiver.spans)
    return f"{answers} of 3 answers' traces received"


class SilentCollector:
    def __init__(self) -> None:
        self.release = threading.Event()
        release = self.release

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                release.wait()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


def exit_delay(index: Path, workdir: Path) -> str:
    """Also seen: `typedrag ask` with the collector down (a closed port) or silent, against no tracing (median of 3)."""
    silent = SilentCollector()
    down = f"http://127.0.0.1:{free_port()}"

    def run(**otel: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "typedrag.cli", "ask", QUESTION, "--index", str(index), "--method", "rag"],
                       capture_output=True, env=env_for(**otel), cwd=workdir, timeout=600)  # fmt: skip
        return time.perf_counter() - started

    try:
        plain = statistics.median(run() for _ in range(3))
        refused = statistics.median(run(OTEL_EXPORTER_OTLP_ENDPOINT=down) for _ in range(3))
        hung = statistics.median(run(OTEL_EXPORTER_OTLP_ENDPOINT=silent.endpoint) for _ in range(3))
    finally:
        silent.close()
    return f"no tracing {plain:.1f} s; collector down +{refused - plain:.1f} s; collector silent +{hung - plain:.1f} s"


def static_route(index: Path, workdir: Path) -> str:
    """Issue 41 #9: the page's script, then the route label it was counted under."""
    serve = Serve(index, workdir)
    serve.ready()
    httpx.get(f"{serve.url}/static/app.js")
    lines = [line for line in httpx.get(f"{serve.url}/metrics").text.splitlines()
             if line.startswith("typedrag_http_requests_total") and 'method="GET"' in line and "/readyz" not in line and "/metrics" not in line]  # fmt: skip
    serve.stop()
    return "; ".join(lines)


def genai_attributes(index: Path, workdir: Path) -> str:
    """Issue 41 #10: what a model call's span and a retrieval span say."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from typedrag import Pipeline
    from typedrag.engines.llm_engine import LLMEngine
    from typedrag.index import open_retriever
    from typedrag.llm.openai_chat import OpenAIChatModel
    from typedrag.testing.openai_stub import OpenAIStubServer

    exporter = InMemorySpanExporter()
    if not hasattr(trace.get_tracer_provider(), "add_span_processor"):
        trace.set_tracer_provider(TracerProvider())
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))
    with OpenAIStubServer() as stub:
        model = OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0, timeout=30)
        asyncio.run(Pipeline(LLMEngine(model), open_retriever(index)).answer(QUESTION, method="rag"))
    spans = exporter.get_finished_spans()
    chat = next(s for s in spans if s.name == "chat stub").attributes
    retrieve = next(s for s in spans if s.name == "typedrag.retrieve").attributes
    return (f"chat: response.id={chat.get('gen_ai.response.id')}, response.model={chat.get('gen_ai.response.model')}; "
            f"retrieve: operation.name={retrieve.get('gen_ai.operation.name')}, retrieval.top_k={retrieve.get('gen_ai.retrieval.top_k')}")  # fmt: skip


def chat_openai_usage(index: Path, workdir: Path) -> str:
    """Issue 41 #12: LangChain's ChatOpenAI streaming against serve, as users write it (no stream_usage)."""
    from langchain_openai import ChatOpenAI

    serve = Serve(index, workdir)
    serve.ready()
    seen = []
    for asks in (None, True):
        chunks = list(
            ChatOpenAI(model="typedrag-rag", base_url=f"{serve.url}/v1", api_key="x", stream_usage=asks).stream(
                QUESTION
            )
        )
        whole = chunks[0]
        for chunk in chunks[1:]:
            whole += chunk
        seen.append(f"stream_usage={asks}: usage_metadata={whole.usage_metadata}")
    serve.stop()
    return "; ".join(seen)


PROBES = {f.__name__: f for f in (methods, deep_json, spans_text, header_secret, reader_model, vanished_file, sigterm,
                                  exit_delay, static_route, genai_attributes, chat_openai_usage)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(PROBES), help="run these probes only")
    args = parser.parse_args()
    import typedrag

    print(f"# typedrag from {Path(typedrag.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        index = build_index(workdir)
        for name in args.only or PROBES:
            try:
                print(f"{name}: {PROBES[name](index, workdir)}", flush=True)
            except Exception as error:  # a probe that breaks says so and the others still run
                print(f"{name}: probe failed: {type(error).__name__}: {str(error)[:200]}", flush=True)


if __name__ == "__main__":
    main()
