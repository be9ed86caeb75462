"""Credentials inside URLs (`http://user:password@host/v1`) are never shown: one helper for every place
a base URL or an error mentioning one is printed, logged, traced or sent to a client.

The form follows pip's `redact_auth_from_url`: `user:****@host`, or `****@host` when the userinfo is
a single token (which may be the secret itself).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit, urlunsplit

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^/\s@?#]+)@")


def _masked(userinfo: str) -> str:
    user, sep, _ = userinfo.partition(":")
    return f"{user}:****" if sep else "****"


def redact_url(url: str | None) -> str | None:
    """`url` with its password (or its one-part userinfo) replaced by ****; other URLs unchanged."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    if "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{_masked(userinfo)}@{hostport}"))


def host_of(url: str) -> str:
    """host[:port] of a URL, without any userinfo (for engine names)."""
    netloc = urlsplit(url).netloc
    return netloc.rpartition("@")[2] or url


def redact_text(text: str) -> str:
    """Every `scheme://userinfo@` in free text (error messages, log lines) masked."""
    return _USERINFO.sub(lambda m: f"{m.group(1)}{_masked(m.group(2))}@", text)


class RedactingFilter(logging.Filter):
    """Masks URL userinfo in a log record (httpx logs every request URL at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "@" in message:
            record.msg, record.args = redact_text(message), None
        return True


def install_log_redaction(*names: str) -> None:
    """Add the filter to these loggers once (a logger's filters see every record it logs itself)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())


def url_problem(url: str) -> str | None:
    """Why `url` cannot be used as an http(s) endpoint, in words that quote nothing of it (it may hold a
    password); None when it can. A `#`, `/` or `?` in a password ends the address part early, so the
    rest of the password reads as a port or a path: the message says how to write one."""
    hint = "; a password holding #, /, ? or @ must be percent-encoded (%23, %2F, %3F, %40)"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        reason = "its port is not a number from 0 to 65535" if "port" in str(error).lower() else "it cannot be parsed"
        return f"not a valid URL: {reason}{hint}"
    if parts.scheme not in ("http", "https"):
        return "not a valid URL: it must start with http:// or https://"
    if not parts.hostname:
        return f"not a valid URL: it names no host{hint}"
    if port == 0:
        return "not a valid URL: port 0"
    if parts.fragment or ("@" in parts.path or "@" in parts.query):
        return f"not a valid URL: something after the host looks like part of a password{hint}"
    return None
