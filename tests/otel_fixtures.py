"""Spans in memory behind a TracerProvider set as a host program sets its own (tests/test_telemetry.py and
tests/test_server_observability.py import these fixtures)."""

from __future__ import annotations

import os

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from typedrag import telemetry


@pytest.fixture
def no_provider(monkeypatch):
    """The API's globals as a fresh process has them: no TracerProvider set (the API allows setting one only
    once per process, so tests put it back as opentelemetry's own test utilities do)."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    for name in [n for n in os.environ if n.startswith("OTEL_") or n == telemetry.CONTENT_ENV]:
        monkeypatch.delenv(name)
    yield
    telemetry.record_content(None)


@pytest.fixture
def spans(no_provider) -> InMemorySpanExporter:
    """A host program's own TracerProvider, exporting to memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


def by_name(finished) -> dict[str, list]:
    named: dict[str, list] = {}
    for span in finished:
        named.setdefault(span.name, []).append(span)
    return named


def ancestors(span, finished) -> list[str]:
    """The names of a span's ancestors among `finished`, nearest first."""
    by_id = {s.context.span_id: s for s in finished}
    names = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        names.append(span.name)
    return names
