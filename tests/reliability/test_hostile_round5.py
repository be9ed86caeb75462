"""Issue 42: the fifth hostile round's service, telemetry and data-safety defects, each against a real server,
a real index or a real exporter.

D1   /metrics: an HTTP method a client makes up is counted as "other", never as a label of its own.
D2   JSON nested hundreds deep is a 422, and no request writes a traceback that grows with its input.
D3   with text off, neither a model's not-in-sources restatement nor an endpoint's error body reaches a span.
D4   an OTEL_EXPORTER_OTLP_HEADERS value is never printed.
D5   a missing or damaged reader model is found at load: serve does not start (or is not ready), no NaN, no hang.
D6   a file or folder under the source that vanishes while the manifest is written loses no sync.
D12  SIGTERM: serve sends the spans of its last export interval before it ends.
Also a collector that does not answer does not hold a command at exit.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

import typedrag.engines.offline as offline_engine
import typedrag.index.tantivy.build as tantivy_build
from typedrag import OfflineEngine, Pipeline, telemetry
from typedrag.config import Settings
from typedrag.engines.llm_engine import LLMEngine
from typedrag.index import open_retriever
from typedrag.index.tantivy import sync_index
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.reader import MODEL_DIR, META_FILE, MODEL_FILE, Reader, ReaderUnavailable
from typedrag.server.app import create_app
from typedrag.server.logs import JsonFormatter
from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_responder
from typedrag.testing.otlp_receiver import OTLPReceiver

from otel_fixtures import by_name, no_provider, spans  # noqa: F401
from test_server import classifier, serving  # noqa: F401  (tests/ is on sys.path)

from .conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Why did the Western Roman Empire fall?"


def offline_app(index: Path, classifier, engine=None):
    return create_app(
        Settings(index=index, cache_dir=None),
        Pipeline(engine or OfflineEngine(), open_retriever(index), classifier=classifier),
    )


def scrape(url: str) -> dict:
    response = httpx.get(f"{url}/metrics")
    assert response.status_code == 200
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- D1: HTTP methods a client makes up -----------------------------------------------------------------------------


def test_methods_a_client_makes_up_are_counted_as_other_never_as_labels(small_index, classifier):
    made_up = [f"X{n:03d}{'Q' * 40}" for n in range(40)]
    with serving(offline_app(small_index, classifier)) as url:
        for method in made_up:
            assert httpx.request(method, f"{url}/healthz").status_code == 405
        assert httpx.request(made_up[0], f"{url}/no/such/page").status_code == 404
        body = httpx.get(f"{url}/metrics").text
        families = scrape(url)

    assert not any(method in body for method in made_up)
    methods = {
        s.labels["method"]
        for f in families.values()
        for s in f.samples
        if "method" in s.labels and f.name.startswith("typedrag_http")
    }
    assert methods <= {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "other"}
    counted = {
        tuple(sorted(s.labels.items())): s.value
        for s in families["typedrag_http_requests"].samples
        if s.name.endswith("_total")
    }
    assert counted[(("method", "other"), ("route", "/healthz"), ("status", "405"))] == len(made_up)
    assert counted[(("method", "other"), ("route", "unmatched"), ("status", "404"))] == 1


def test_a_made_up_method_names_no_span(spans):
    """Where typedrag opens the request span itself (FastAPI without native tracing, plain Starlette), a
    made-up method is "_OTHER", as FastAPI and the HTTP conventions have it, and the span is named "HTTP"."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from typedrag.server.metrics import RequestObserver, ServiceMetrics

    async def ok(request):
        return PlainTextResponse("ok")

    made_up = "BREW" + "Z" * 60
    metrics = ServiceMetrics()
    with serving(RequestObserver(Starlette(routes=[Route("/healthz", ok)]), metrics, trace_requests=True)) as url:
        assert httpx.request(made_up, f"{url}/healthz").status_code == 405
    (server,) = [s for s in spans.get_finished_spans() if s.kind.name == "SERVER"]
    assert server.name == "HTTP /healthz" and server.attributes["http.request.method"] == "_OTHER"
    assert made_up not in server.name
    assert (
        metrics.registry.get_sample_value(
            "typedrag_http_requests_total", {"route": "/healthz", "method": "other", "status": "405"}
        )
        == 1
    )


# --- D2: deep JSON --------------------------------------------------------------------------------------------------


@pytest.fixture
def server_log():
    """What the server logs while the test runs, as the JSON lines `serve` writes."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    root.removeHandler(handler)
    root.setLevel(level)


@pytest.mark.parametrize("depth", [40, 500, 1000, 5000])
def test_deeply_nested_json_is_a_422_and_logs_no_traceback(small_index, classifier, server_log, depth):
    nested = "[" * depth + "]" * depth
    bodies = [
        ("/v1/answer", '{"question": "Why is the sky blue?", "type": ' + nested + "}"),
        (
            "/v1/answer",
            '{"question": "Why is the sky blue?", "history": [{"role": "user", "content": ' + nested + "}]}",
        ),
        ("/v1/answer/stream", '{"question": ' + nested + "}"),
        (
            "/v1/chat/completions",
            '{"model": "typedrag-rag", "messages": [{"role": "user", "content": ' + nested + "}]}",
        ),
    ]
    with serving(offline_app(small_index, classifier)) as url:
        for path, body in bodies:
            response = httpx.post(f"{url}{path}", content=body, headers={"content-type": "application/json"})
            assert response.status_code == 422, (path, response.status_code, response.text[:300])
            assert len(response.content) < 4000  # the input is not echoed back whole
            assert "nested more than" in response.json()["error"]["message"]
    logged = server_log()
    assert not [entry for entry in logged if "error" in entry], [
        entry["message"] for entry in logged if "error" in entry
    ]


def test_an_unhandled_error_logs_a_bounded_traceback(small_index, classifier, server_log):
    """Whatever fails inside a request, its log line does not grow with the input (a RecursionError has a
    thousand frames)."""

    def down(value):  # two functions in turn, as a walk over deep input recurses: no repeated line to fold
        return [up(v) for v in value]

    def up(value):
        return down(value)

    class Recursing(OfflineEngine):
        async def write(self, task, trace, on_text=None):
            nested: list = []
            for _ in range(5000):
                nested = [nested]
            return down(nested)

    with serving(offline_app(small_index, classifier, Recursing())) as url:
        response = httpx.post(f"{url}/v1/answer", json={"question": QUESTION, "method": "rag"}, timeout=60)
        streamed = httpx.post(f"{url}/v1/answer/stream", json={"question": QUESTION, "method": "rag"}, timeout=60)
        chat = httpx.post(f"{url}/v1/chat/completions", timeout=60,
                          json={"model": "typedrag-rag", "stream": True, "messages": [{"role": "user", "content": QUESTION}]})  # fmt: skip
    assert response.status_code == 500 and "request id" in response.json()["error"]["message"]
    assert "event: error" in streamed.text and '"type": "server_error"' in chat.text
    logged = [entry for entry in server_log() if "error" in entry]
    assert len(logged) == 3
    for entry in logged:
        assert "RecursionError" in entry["error"] and len(entry["error"]) <= 10_000


# --- D3: text in spans with content off -----------------------------------------------------------------------------


def every_word_in(finished) -> str:
    """Span names, attributes, events (names and attributes) and status descriptions, as one string."""
    values = []
    for span in finished:
        values += [span.name, span.status.description or ""]
        values += [json.dumps(v, default=str) for v in span.attributes.values()]
        values += [f"{e.name} {json.dumps(dict(e.attributes), default=str)}" for e in span.events]
    return "\n".join(values)


def stub_pipeline(stub, small_index, classifier) -> Pipeline:
    model = OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0, timeout=30)
    return Pipeline(LLMEngine(model), open_retriever(small_index), classifier=classifier)


def test_an_endpoints_error_body_reaches_no_span(spans, small_index, classifier):
    with OpenAIStubServer(lambda request: Reply(status=400, content="SECRET-BODY the endpoint quoted back")) as stub:
        with pytest.raises(Exception):
            asyncio.run(stub_pipeline(stub, small_index, classifier).answer(QUESTION))
    finished = spans.get_finished_spans()
    assert by_name(finished)["chat stub"][0].attributes["error.type"] == "LLMError"
    assert any(e.name == "exception" for s in finished for e in s.events)  # the failure is still marked
    assert "SECRET-BODY" not in every_word_in(finished)


def test_a_models_not_in_sources_restatement_reaches_no_span(spans, small_index, classifier):
    def responder(request):
        if request.schema_name is None and "not_in_sources" in request.prompt:
            return Reply(content='{"not_in_sources": "why the RESTATED Roman question has no answer here"}')
        return default_responder(request)

    with OpenAIStubServer(responder) as stub:
        result = asyncio.run(stub_pipeline(stub, small_index, classifier).answer(QUESTION, method="rag"))
    assert result.abstained
    finished = spans.get_finished_spans()
    assert "RESTATED" not in every_word_in(finished)

    spans.clear()
    telemetry.record_content(True)  # opted in: the text is the user's to see
    with OpenAIStubServer(responder) as stub:
        asyncio.run(stub_pipeline(stub, small_index, classifier).answer(QUESTION, method="rag"))
    assert "RESTATED" in every_word_in(spans.get_finished_spans())


# --- D4: a secret in OTEL_EXPORTER_OTLP_HEADERS ---------------------------------------------------------------------

SECRET = "sk-round5-d4-SECRET-token"


def test_an_otlp_header_secret_is_never_printed_by_a_command(small_index, tmp_path):
    with OTLPReceiver() as receiver:
        for headers in (
            f"Authorization: Bearer {SECRET}",
            f"Authorization=Bearer {SECRET}",
            f"x-api-key={SECRET},broken {SECRET}",
        ):
            proc = run_cli("ask", QUESTION, "--index", str(small_index), "--method", "rag", cwd=tmp_path,
                           env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_EXPORTER_OTLP_HEADERS": headers})  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            assert SECRET not in proc.stderr and SECRET not in proc.stdout, proc.stderr


def test_what_the_otel_sdk_logs_shows_no_header_value_nor_endpoint_password(no_provider, caplog):
    """However a header is written, and a password in the endpoint's URL: masked in every SDK logger typedrag
    knows to quote its configuration or export failures."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://typedrag:pw-ENDPOINT-secret@127.0.0.1:9",
           "OTEL_EXPORTER_OTLP_HEADERS": f"api-key=Bearer%20{SECRET},Authorization: Bearer {SECRET}"}  # fmt: skip
    telemetry.configure_from_environment(env)
    for name in (
        "opentelemetry.util.re",
        "opentelemetry.exporter.otlp.common.http",
        "opentelemetry.sdk._shared_internal",
    ):
        logging.getLogger(name).warning("failed for %s at %s", f"Bearer {SECRET}", env["OTEL_EXPORTER_OTLP_ENDPOINT"])
    shown = "\n".join(record.getMessage() for record in caplog.records)
    assert "failed for ****" in shown and SECRET not in shown and "pw-ENDPOINT-secret" not in shown


def serve_with_otel(small_index: Path, port: int, endpoint: str, **env: str) -> subprocess.Popen:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_", "OTEL_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "typedrag.cli", "serve", "--index", str(small_index), "--port", str(port), "--llm", "offline"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**clean, "PYTHONPATH": str(ROOT), "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, **env},
    )  # fmt: skip


def wait_until_ready(process: subprocess.Popen, port: int) -> None:
    while True:
        assert process.poll() is None, process.communicate()[1]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        threading.Event().wait(0.2)


def test_an_otlp_header_secret_is_never_in_the_serve_log(small_index):
    port = free_port()
    with OTLPReceiver() as receiver:
        process = serve_with_otel(
            small_index, port, receiver.endpoint, OTEL_EXPORTER_OTLP_HEADERS=f"Authorization: Bearer {SECRET}"
        )
        try:
            wait_until_ready(process, port)
            assert (
                httpx.post(
                    f"http://127.0.0.1:{port}/v1/answer", json={"question": QUESTION, "method": "rag"}, timeout=120
                ).status_code
                == 200
            )
        finally:
            process.terminate()
            _, stderr = process.communicate(timeout=120)
    assert "Header format invalid" in stderr  # the SDK's own warning, still there for the operator
    assert SECRET not in stderr


# --- D12: SIGTERM ----------------------------------------------------------------------------------------------------


def test_sigterm_sends_the_spans_of_the_last_export_interval(small_index):
    port = free_port()
    with OTLPReceiver() as receiver:
        # no export happens on its own in this test's life: what arrives was sent at shutdown
        process = serve_with_otel(small_index, port, receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="3600000")
        try:
            wait_until_ready(process, port)
            for _ in range(3):
                response = httpx.post(
                    f"http://127.0.0.1:{port}/v1/answer", json={"question": QUESTION, "method": "rag"}, timeout=120
                )
                assert response.status_code == 200
            assert receiver.spans == []
        finally:
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=120)
        answers = [span for span in receiver.spans if span.name == "typedrag.answer"]
    assert process.returncode == -signal.SIGTERM, stderr  # it still ends as SIGTERM asks
    assert len(answers) == 3, stderr[-2000:]


# --- also seen: a collector that never answers -----------------------------------------------------------------------


class SilentCollector:
    """Accepts OTLP requests and never answers them (a collector hung, or a firewall that drops the replies)."""

    def __init__(self) -> None:
        self.release, self.requests = threading.Event(), 0
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                collector.requests += 1
                collector.release.wait()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def test_a_collector_that_never_answers_does_not_hold_a_command_at_exit(small_index, tmp_path):
    """The exporter is told to wait an hour (OTEL_EXPORTER_OTLP_TIMEOUT): the command still ends, says the
    traces were not sent, and its answer is whole."""
    collector = SilentCollector()
    try:
        proc = run_cli("ask", QUESTION, "--index", str(small_index), "--method", "rag", cwd=tmp_path, timeout=600,
                       env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_EXPORTER_OTLP_TIMEOUT": "3600"})  # fmt: skip
    finally:
        requests = collector.requests
        collector.close()
    assert proc.returncode == 0, proc.stderr
    assert "Sources" in proc.stdout and requests >= 1
    assert "warning: traces not sent" in proc.stderr


# --- D5: a missing or damaged reader model --------------------------------------------------------------------------


def copied_model(tmp_path: Path, change=None, meta_change=None) -> Path:
    """The shipped reader model copied, its arrays changed by `change(arrays)` and its checksum made to match:
    a tamper no checksum catches."""
    folder = tmp_path / "model"
    shutil.copytree(MODEL_DIR, folder)
    if change is not None:
        with np.load(folder / MODEL_FILE) as stored:
            arrays = {name: stored[name].copy() for name in stored.files}
        change(arrays)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        (folder / MODEL_FILE).write_bytes(buffer.getvalue())
    meta = json.loads((folder / META_FILE).read_text())
    meta["sha256"] = hashlib.sha256((folder / MODEL_FILE).read_bytes()).hexdigest()
    if meta_change is not None:
        meta_change(meta)
    (folder / META_FILE).write_text(json.dumps(meta))
    return folder


def nan_leaf(arrays):
    tree, node = map(int, np.argwhere(arrays["answers.leaf"])[0])
    arrays["answers.value"][tree, node] = np.nan


def cycle(arrays):
    tree, node = map(int, np.argwhere(~arrays["on_topic.leaf"])[1])
    arrays["on_topic.left"][tree, node] = 0  # back to the root


def self_loop(arrays):
    tree, node = map(int, np.argwhere(~arrays["answers.leaf"])[0])
    arrays["answers.right"][tree, node] = node


def past_the_end(arrays):
    tree, node = map(int, np.argwhere(~arrays["answers.leaf"])[0])
    arrays["answers.left"][tree, node] = arrays["answers.left"].shape[1] + 5


def unknown_feature(arrays):
    tree, node = map(int, np.argwhere(~arrays["answers.leaf"])[0])
    arrays["answers.feature"][tree, node] = 99


def nan_threshold(arrays):
    tree, node = map(int, np.argwhere(~arrays["answers.leaf"])[0])
    arrays["answers.threshold"][tree, node] = np.nan


def short_roles(arrays):
    arrays["roles.weights"] = arrays["roles.weights"][:, :5]


def nan_roles(arrays):
    arrays["roles.bias"][0] = np.nan


def missing_array(arrays):
    del arrays["on_topic.missing_left"]


def ragged(arrays):
    arrays["answers.value"] = arrays["answers.value"][:, :3]


def nan_bar(meta):
    meta["bars"]["answers"] = float("nan")


@pytest.mark.parametrize(
    "change, meta_change",
    [(nan_leaf, None), (cycle, None), (self_loop, None), (past_the_end, None), (unknown_feature, None), (nan_threshold, None),
     (short_roles, None), (nan_roles, None), (missing_array, None), (ragged, None), (None, nan_bar)],
    ids=lambda f: getattr(f, "__name__", "-"),
)  # fmt: skip
def test_a_tampered_reader_model_is_refused_at_load(tmp_path, change, meta_change):
    folder = copied_model(tmp_path, change, meta_change)
    with pytest.raises(ReaderUnavailable, match="reader model .* damaged|reader model description .* damaged"):
        Reader(folder)


def test_a_missing_corrupt_or_mismatched_reader_model_is_refused_at_load(tmp_path):
    folder = copied_model(tmp_path)
    Reader(folder)  # the copy itself loads
    (folder / MODEL_FILE).write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(ReaderUnavailable, match="sha256"):
        Reader(folder)
    meta = json.loads((folder / META_FILE).read_text())
    meta["sha256"] = hashlib.sha256(b"PK\x03\x04 not a zip").hexdigest()
    (folder / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(ReaderUnavailable, match="damaged"):
        Reader(folder)
    (folder / MODEL_FILE).unlink()
    with pytest.raises(ReaderUnavailable, match="missing"):
        Reader(folder)
    (folder / META_FILE).write_text("{not json")
    with pytest.raises(ReaderUnavailable, match="damaged"):
        Reader(folder)


def test_a_server_whose_reader_model_is_missing_is_not_ready_and_says_why(
    small_index, classifier, tmp_path, monkeypatch
):
    broken = copied_model(tmp_path)
    (broken / MODEL_FILE).unlink()
    monkeypatch.setattr(offline_engine, "default_reader", lambda: Reader(broken))
    with serving(offline_app(small_index, classifier)) as url:
        ready = httpx.get(f"{url}/readyz")
        answered = httpx.post(f"{url}/v1/answer", json={"question": QUESTION}, timeout=60)
    assert ready.status_code == 503, ready.text
    assert "reader model file missing" in ready.json()["checks"]["models"]
    assert answered.status_code == 503 and "reader model file missing" in answered.json()["error"]["message"]


def test_serve_does_not_start_with_a_damaged_reader_model(small_index, tmp_path, monkeypatch):
    import uvicorn
    from typer.testing import CliRunner

    from typedrag.cli import app

    broken = copied_model(tmp_path, cycle)
    monkeypatch.setattr(offline_engine, "default_reader", lambda: Reader(broken))
    started = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, *a, **k: started.append(True))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level  # serve points the root logger at the runner's stderr
    try:
        result = CliRunner().invoke(
            app, ["serve", "--index", str(small_index), "--llm", "offline", "--port", str(free_port())]
        )
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert started == [] and result.exit_code == 2, result.output
    assert "reader model" in result.output and "damaged" in result.output


# --- D6: a file that vanishes while the manifest is written ------------------------------------------------------


def while_the_manifest_is_written(monkeypatch, action) -> None:
    """Call `action(path, when)` around every listing ("listing", before a folder is read) and every stat
    ("statted", after a path's status was read) while the sync writes its manifest, after the index is built
    and before it is swapped in: the window in which an editor's swap file can come and go."""
    real_manifest = tantivy_build._manifest
    active = False

    def manifest(*args, **kwargs):
        nonlocal active
        active = True
        try:
            return real_manifest(*args, **kwargs)
        finally:
            active = False

    real_scandir, real_stat = os.scandir, os.stat

    def scandir(path="."):
        if active and isinstance(path, (str, os.PathLike)):
            action(Path(path), "listing")
        return real_scandir(path)

    def stat(path, *args, **kwargs):
        result = real_stat(path, *args, **kwargs)
        if active and isinstance(path, (str, os.PathLike)):
            action(Path(path), "statted")
        return result

    monkeypatch.setattr(tantivy_build, "_manifest", manifest)
    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "stat", stat)


def test_a_swap_file_that_vanishes_while_the_manifest_is_written_loses_no_sync(tmp_path, monkeypatch):
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    (docs / "a.txt").write_text("The okapi lives in the rainforest of the Congo.\n")
    sync_index([docs], index_dir, show_progress=False)
    (docs / "b.txt").write_text("The quokka lives on Rottnest Island.\n")
    swap = docs / ".b.txt.swp"
    swap.write_bytes(b"b0VIM 9.0 swap")

    def editor_closes(path: Path, how: str) -> None:
        if path == swap and how == "statted":  # checked as a file, then gone before its size is read
            swap.unlink(missing_ok=True)

    while_the_manifest_is_written(monkeypatch, editor_closes)
    summary = sync_index([docs], index_dir, show_progress=False)
    monkeypatch.undo()

    assert (summary.added, summary.documents) == (1, 2)
    assert not swap.exists()
    texts = [hit.passage.text for hit in open_retriever(index_dir).search("quokka okapi", 5)]
    assert any("Rottnest" in text for text in texts)


def test_a_temporary_folder_that_vanishes_while_the_manifest_is_written_loses_no_sync(tmp_path, monkeypatch):
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    (docs / "a.txt").write_text("The okapi lives in the rainforest of the Congo.\n")
    sync_index([docs], index_dir, show_progress=False)
    (docs / "b.txt").write_text("The quokka lives on Rottnest Island.\n")
    scratch = docs / ".tmp-sync"  # a tool's scratch folder, listed and then removed by its owner
    scratch.mkdir()
    (scratch / "part").write_text("x")

    def tool_cleans_up(path: Path, how: str) -> None:
        if path == scratch and how == "listing":  # seen in its parent's listing, gone before it is read itself
            shutil.rmtree(scratch, ignore_errors=True)

    while_the_manifest_is_written(monkeypatch, tool_cleans_up)
    summary = sync_index([docs], index_dir, show_progress=False)
    monkeypatch.undo()

    assert (summary.added, summary.documents) == (1, 2)
    assert not scratch.exists()
    texts = [hit.passage.text for hit in open_retriever(index_dir).search("quokka okapi", 5)]
    assert any("Rottnest" in text for text in texts)


def test_a_write_that_fails_for_another_reason_names_it_not_a_full_disk(tmp_path, monkeypatch):
    """The build's own write failing for a reason other than space says that reason."""
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    (docs / "a.txt").write_text("The okapi lives in the rainforest of the Congo.\n")

    def refuse(building, manifest):
        raise PermissionError(13, "Permission denied", str(building / "manifest.json.tmp"))

    monkeypatch.setattr(tantivy_build, "write_manifest", refuse)
    with pytest.raises(Exception) as raised:
        sync_index([docs], index_dir, show_progress=False)
    message = str(raised.value)
    assert "no space left" not in message
    assert "Permission denied" in message and "nothing was written" in message
