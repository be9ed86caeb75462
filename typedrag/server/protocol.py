"""uvicorn's h11 protocol with the guards it lacks against slow clients (slowloris) and request smuggling:

- a header read timeout: a connection must deliver a request's complete headers within
  `header_timeout` seconds of connecting (or of its previous response), else it is closed;
  uvicorn itself only times out idle keep-alive connections, never a half-sent request;
- a connection cap: at `max_connections` open connections, a new one evicts the connection that has
  been sending its request longest, headers or body (the slow clients), or is closed at once if
  every connection is being answered; so a flood of sockets, whether they trickle headers or a body,
  can neither use up the process's file descriptors nor starve /healthz;
- one body framing: a request with both Content-Length and Transfer-Encoding is refused with 400 and its
  connection closed (RFC 9112 §6.1), since a proxy in front that reads the other header would see another
  request hidden in its body.

Defaults follow Apache's mod_reqtimeout (header=20). Body read timeouts are in the app's
RequestContext middleware. Imported only by `typedrag serve` (needs uvicorn).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("typedrag.server.client")  # rate-limited by the server's log configuration


def default_max_connections() -> int:
    """Below the open-file limit, leaving room for the index, the log and outgoing LLM connections."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1000
    return max(16, min(1000, soft - 128))


class OneBodyFraming(h11.Connection):
    """h11's server connection, refusing a request whose body length is given twice: h11 would follow
    Transfer-Encoding as RFC 9112 says, but a front proxy may follow Content-Length. uvicorn answers the
    protocol error with 400 and closes the connection."""

    def next_event(self) -> Any:
        event = super().next_event()
        if isinstance(event, h11.Request):
            names = {name for name, _ in event.headers}  # h11 gives them lower-cased
            if b"content-length" in names and b"transfer-encoding" in names:
                raise h11.RemoteProtocolError("both Content-Length and Transfer-Encoding", error_status_hint=400)
        return event


class GuardedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a header deadline, a connection cap and one body framing, so slow
    clients cannot hold the server and no request can hide inside another's body."""

    header_timeout: float = 20.0
    max_connections: int = 1000
    _header_timer: asyncio.TimerHandle | None = None
    _sending_since: float | None = None  # when it began sending its current request; None once it is all in

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        size = self.config.h11_max_incomplete_event_size
        self.conn = OneBodyFraming(h11.SERVER, **({} if size is None else {"max_incomplete_event_size": size}))

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            sending = [c for c in self.connections if c is not self and c._still_sending()]
            if not sending:
                log.warning(
                    "connection cap reached: new connection closed", extra={"fields": {"cap": self.max_connections}}
                )
                transport.abort()
                return
            oldest = min(sending, key=lambda c: c._sending_since)
            log.warning(
                "connection cap reached: the slowest sender was closed", extra={"fields": {"cap": self.max_connections}}
            )
            oldest._disarm()
            oldest.transport.abort()
        self._arm()

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        super().data_received(data)
        if self.cycle is not cycle and self._header_timer is not None:  # headers complete: the body has its own timeout
            self._header_timer.cancel()
            self._header_timer = None
        if self.cycle is not None and not self.cycle.more_body:  # the whole request is in: it is being answered
            self._sending_since = None

    def _still_sending(self) -> bool:
        """Waiting for request headers, or for the rest of a body (the cycle clears more_body at its end)."""
        return self._sending_since is not None and not self.transport.is_closing()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the next request on this keep-alive connection gets the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._sending_since = time.monotonic()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        self._sending_since = None
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            log.warning(
                "request headers not received in time: connection closed",
                extra={"fields": {"timeout_s": self.header_timeout}},
            )
            self.transport.abort()


def guarded_protocol(header_timeout: float, max_connections: int) -> type[GuardedH11Protocol]:
    return type(
        "TypedragH11Protocol",
        (GuardedH11Protocol,),
        {"header_timeout": header_timeout, "max_connections": max_connections},
    )
