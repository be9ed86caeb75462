"""Tracing set up from the standard OTEL_* variables on the command line, the spans sent at exit or shutdown,
and secrets in OTEL_* headers kept out of what the SDK logs."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from typing import Any
from urllib.parse import urlsplit

from typedrag.telemetry.base import OTEL_FEATURE, _trace, _version, tracing

# ---------------------------------------------------------------- configuration from OTEL_* variables


def configure_from_environment(environ: dict[str, str] | None = None) -> str | None:
    """Set up tracing as the standard OTEL_* variables ask, for the command line; returns a one-line
    warning when they ask for something this install cannot do (then typedrag answers untraced).

    Traces are asked for by OTEL_TRACES_EXPORTER (otlp, console; "none" or unset: off) or, with no
    exporter named, by an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or _TRACES_ENDPOINT). The SDK reads
    the rest itself: OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_BSP_*,
    OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION... OTEL_SDK_DISABLED=true turns it all off, and a
    TracerProvider the program set already is left alone.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    named = [e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    exporters = [e for e in (named or (["otlp"] if endpoint else [])) if e != "none"]
    if not exporters:
        return None
    asked = "OTEL_TRACES_EXPORTER" if named else "OTEL_EXPORTER_OTLP_ENDPOINT"
    missing = f"{asked} asks for traces, but {OTEL_FEATURE} needs the 'otel' extra: pip install 'typedrag[otel]'; answering without traces"
    if _trace is None:
        return missing
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        return missing
    if tracing():
        return None
    _hide_header_values(env)  # before any exporter reads (and may complain about) them
    processors, problems = [], []
    for name in dict.fromkeys(exporters):
        exporter, problem = _exporter(name, env)
        if exporter is not None:
            processors.append(BatchSpanProcessor(exporter))
        if problem:
            problems.append(problem)
    if processors:
        resource = Resource.create({"service.version": _version()})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "typedrag"}))
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # _ExitFlush sends what is left
        for processor in processors:
            provider.add_span_processor(processor)
        _trace.set_tracer_provider(provider)
        _ExitFlush(provider, EXIT_FLUSH_SECONDS)
    return "; ".join(problems) or None


# At exit a command waits this long at most for its last spans to be sent: the SDK alone would wait out the
# exporter's timeout and retries (10 s and more) when the collector is down, after every short command.
EXIT_FLUSH_SECONDS = 3.0
# `serve` flushes at shutdown (its lifespan ends), waiting this long at most: a SIGTERM ends the process
# without the exit handlers, so spans of the last export interval would otherwise be lost.
SHUTDOWN_FLUSH_SECONDS = 5.0


class _ExitFlush:
    """Shuts the provider down at exit (its span processors send what is left), waiting `seconds` at most.
    The shutdown runs in a thread started now: threads cannot be started from exit handlers (Python 3.12+),
    and only a thread can be left behind when the collector does not answer."""

    def __init__(self, provider: Any, seconds: float) -> None:
        self.provider, self.seconds = provider, seconds
        self.asked, self.done = threading.Event(), threading.Event()
        threading.Thread(target=self._shut_down, name="typedrag-trace-exit", daemon=True).start()
        atexit.register(self.at_exit)

    def _shut_down(self) -> None:
        self.asked.wait()
        try:
            self.provider.shutdown()
        finally:
            self.done.set()

    def at_exit(self) -> None:
        self.asked.set()
        if not self.done.wait(self.seconds):
            sys.stderr.write(
                f"warning: traces not sent: the trace collector did not take them within {self.seconds:g} s\n"
            )


def flush(seconds: float = SHUTDOWN_FLUSH_SECONDS) -> bool:
    """Send the spans the global provider still holds, waiting `seconds` at most; False if they were not all
    sent by then (a collector down or slow). Nothing to do without an SDK provider."""
    if not tracing():
        return True
    provider = _trace.get_tracer_provider()
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is None:
        return True
    outcome: list[bool] = []
    worker = threading.Thread(
        target=lambda: outcome.append(bool(force_flush())), name="typedrag-trace-flush", daemon=True
    )
    worker.start()
    worker.join(seconds)
    return bool(outcome and outcome[0])


# ---------------------------------------------------------------- secrets in OTEL_* headers

# Loggers of the SDK and its exporters that quote configuration or export failures (the header parser quotes a
# malformed header whole: `Authorization: Bearer <token>`).
_OTEL_LOGGERS = (
    "opentelemetry.util.re",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk.trace.export",
)
_HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_MASK = "****"


def header_values(raw: str) -> list[str]:
    """The secret parts of an OTEL_EXPORTER_OTLP_HEADERS value (`name=value,...`), read as leniently as anyone
    might write it: each value after `=` or `:`, percent-decoded too, its last word (a bearer token), and an
    item with no separator whole."""
    from urllib.parse import unquote

    found: list[str] = []
    for item in raw.split(","):
        item = item.strip()
        cut = min((i for i in (item.find("="), item.find(":")) if i >= 0), default=-1)
        value = item[cut + 1 :].strip() if cut >= 0 else item
        for candidate in (value, unquote(value), *value.split()[-1:], *unquote(value).split()[-1:]):
            if len(candidate) >= 4 and candidate not in found:
                found.append(candidate)
    return sorted(found, key=len, reverse=True)  # the longest first, so a part never leaves its whole half-shown


class HeaderValueFilter(logging.Filter):
    """Masks the OTEL header values in a log record: they hold API keys for hosted trace backends."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = message
        for secret in self.secrets:
            masked = masked.replace(secret, _MASK)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def endpoint_secrets(url: str) -> list[str]:
    """The password in an endpoint URL (`http://user:password@collector:4318`), or its one-part userinfo."""
    try:
        parts = urlsplit(url.strip())
        secret = parts.password or (parts.username if "@" in parts.netloc else None)
    except ValueError:
        return []
    return [secret] if secret and len(secret) >= 4 else []


def _hide_header_values(env: Any) -> None:
    """Mask the header values, and any password in an endpoint URL (from `env` and the process environment the
    SDK reads), in what the SDK logs."""
    secrets = [
        v for name in _HEADER_VARIABLES for source in (env, os.environ) for v in header_values(source.get(name, ""))
    ]
    secrets += [
        v
        for name in _ENDPOINT_VARIABLES
        for source in (env, os.environ)
        for v in endpoint_secrets(source.get(name, ""))
    ]
    if not secrets:
        return
    for name in _OTEL_LOGGERS:
        logger = logging.getLogger(name)
        present = next((f for f in logger.filters if isinstance(f, HeaderValueFilter)), None)
        if present is None:
            logger.addFilter(HeaderValueFilter(sorted(set(secrets), key=len, reverse=True)))
        else:
            present.secrets = sorted(set(present.secrets) | set(secrets), key=len, reverse=True)


def _exporter(name: str, env: dict[str, str]) -> tuple[Any, str | None]:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr), None  # stdout is the answer's
    if name != "otlp":
        return (
            None,
            f"OTEL_TRACES_EXPORTER={name} is not supported by typedrag (otlp, console or none); not exporting there",
        )
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    ).strip()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        except ImportError:
            return (
                None,
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc installed; no traces sent",
            )
        return GrpcExporter(), None
    if protocol != "http/protobuf":
        return (
            None,
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported by typedrag (http/protobuf or grpc); no traces sent",
        )
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        return None, "the OTLP exporter is missing: pip install 'typedrag[otel]'; no traces sent"
    return OTLPSpanExporter(), None
