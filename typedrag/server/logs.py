"""The server's log: one JSON object per line carrying the request id, noisy loggers rate-limited, secrets
redacted (URL passwords, API keys: a user's cut to its prefix, the server's own replaced), tracebacks cut short."""

from __future__ import annotations

import contextvars
import json
import logging
import time
import traceback
from typing import Any

from typedrag.redact import RedactingFilter
from typedrag.server.error_bodies import without_keys

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
log = logging.getLogger("typedrag.server")
client_log = logging.getLogger("typedrag.server.client")  # misbehaving clients: rate-limited (RateLimitFilter)
errors_log = logging.getLogger("typedrag.server.errors")  # unhandled errors: rate-limited, tracebacks cut short
TRACEBACK_FRAMES = 12  # the innermost frames of a logged traceback (a RecursionError has a thousand)
TRACEBACK_CHARS = 8000


class JsonFormatter(logging.Formatter):
    """One JSON object per line, carrying the current request id, for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": request_id_var.get(),
            **getattr(record, "fields", {}),
        }
        if record.exc_info:
            entry["error"] = short_traceback(record.exc_info)
        return json.dumps(entry, default=str)


def short_traceback(exc_info: Any) -> str:
    """The innermost frames of a traceback, at most TRACEBACK_CHARS: where it failed, never a log line that
    grows with the request (a RecursionError from deep input lists a thousand frames)."""
    kind, error, trace = exc_info
    lines = traceback.format_exception(kind, error, trace, limit=-TRACEBACK_FRAMES, chain=False)
    text = "".join(lines)
    return text if len(text) <= TRACEBACK_CHARS else "...\n" + text[-TRACEBACK_CHARS:]


class KeyFilter(logging.Filter):
    """No API key in a log line: in its message, its fields or its traceback (a key pasted where a name goes, in a
    path, in an error some library raised)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = without_keys(message)
        if masked != message:
            record.msg, record.args = masked, None
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            record.fields = {k: without_keys(v) if isinstance(v, str) else v for k, v in fields.items()}
        if record.exc_info and record.exc_info[1] is not None:
            text = short_traceback(record.exc_info)
            if without_keys(text) != text:
                record.exc_info, record.exc_text = None, None
                record.fields = {**getattr(record, "fields", {}), "error": without_keys(text)}
        return True


class RateLimitFilter(logging.Filter):
    """At most `burst` records per `window` seconds for each (logger, message template) of the noisy
    loggers (uvicorn's per-connection warnings, asyncio's accept errors): a thousand bad sockets write a
    few lines and a count, not 300 MB. The count of what was dropped is logged when the window rolls over.
    (journald's RateLimitIntervalSec/RateLimitBurst, per message instead of per service.)"""

    NOISY = ("uvicorn", "asyncio", "h11", "typedrag.server.client", "typedrag.server.errors")

    def __init__(self, burst: int = 20, window: float = 10.0) -> None:
        super().__init__()
        self.burst, self.window = burst, window
        self._seen: dict[tuple[str, str], list] = {}  # key -> [window start, count, dropped]

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.NOISY):
            return True
        key = (record.name, str(record.msg))
        now = time.monotonic()
        state = self._seen.get(key)
        if state is None or now - state[0] >= self.window:
            dropped = state[2] if state else 0
            if len(self._seen) > 1000:  # bounded memory whatever the messages
                self._seen.clear()
            self._seen[key] = [now, 1, 0]
            if dropped:
                record.msg = (
                    f"{record.getMessage()} ({dropped} similar messages suppressed in the last {self.window:.0f} s)"
                )
                record.args = None
            return True
        state[1] += 1
        if state[1] <= self.burst:
            return True
        state[2] += 1
        return False


def configure_logging(level: str = "info", stream: Any = None) -> None:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RateLimitFilter())
    handler.addFilter(RedactingFilter())  # whatever logger a URL with a password comes through
    handler.addFilter(KeyFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
