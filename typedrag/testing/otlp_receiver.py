"""A real OTLP/HTTP trace receiver on loopback, for tests of what typedrag exports.

It speaks the collector's side of OTLP over HTTP (`POST /v1/traces`, an `ExportTraceServiceRequest` in
protobuf, gzip or not) and decodes each request with the official `opentelemetry-proto` classes, keeping
every span it received as a `ReceivedSpan`. No collector nor Arize Phoenix installs here without pulling
in a large stack (Phoenix brings pandas, pyarrow, grpcio and an LLM SDK of each vendor), and none is
needed to check what an exporter sends: the protocol and its decoding are the real ones.
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from typedrag.extras import require
from typedrag.testing.openai_stub import POLL_SECONDS


@dataclass
class ReceivedSpan:
    """One span as it arrived: ids in hex, its name, kind, attributes and events, and the service that sent it."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    attributes: dict[str, Any]
    service: str
    events: list[str] = field(default_factory=list)
    status_code: int = 0


class OTLPReceiver:
    """`with OTLPReceiver() as receiver:` point an exporter at `receiver.endpoint`, then read `receiver.spans`."""

    def __init__(self) -> None:
        service = require("opentelemetry.proto.collector.trace.v1.trace_service_pb2", "otel", "the OTLP test receiver")
        self._request_type = service.ExportTraceServiceRequest
        self._response = service.ExportTraceServiceResponse().SerializeToString()
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        # serve_forever looks for shutdown() every poll interval: the default half second was most of what
        # starting and stopping one cost (0.5 s a server, a test run starts a hundred)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(POLL_SECONDS,), daemon=True)

    @property
    def endpoint(self) -> str:
        """The base URL for OTEL_EXPORTER_OTLP_ENDPOINT (exporters add /v1/traces)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "OTLPReceiver":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, count: int, seconds: float = 30.0) -> list[ReceivedSpan]:
        """The spans received, once there are at least `count` (or when `seconds` have passed)."""
        deadline = time.monotonic() + seconds
        while len(self.spans) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.spans)

    def _accept(self, body: bytes) -> None:
        request = self._request_type()
        request.ParseFromString(body)
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(ReceivedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        name=span.name,
                        kind=span.kind,
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        service=str(resource.get("service.name", "")),
                        events=[event.name for event in span.events],
                        status_code=span.status.code,
                    ))  # fmt: skip
        with self._lock:
            self.spans.extend(received)
            self.requests += 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != "/v1/traces":
                    self._reply(404, b"")
                    return
                if self.headers.get("Content-Encoding", "").lower() == "gzip":
                    body = gzip.decompress(body)
                try:
                    receiver._accept(body)
                except Exception:  # not an ExportTraceServiceRequest: the collector answers 400
                    self._reply(400, b"")
                    return
                self._reply(200, receiver._response)

            def _reply(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def _value(value: Any) -> Any:
    """An OTLP AnyValue as Python: str, bool, int, float, or a list of them."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None
