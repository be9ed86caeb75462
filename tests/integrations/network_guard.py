"""No network but loopback: a guard for this process, and a runner that puts the same guard in a subprocess.

A library that swallows its own network errors (NLTK's downloader prints and carries on, telemetry clients
retry in a thread) would pass a test that only looks at exceptions, so every attempt is also recorded.
"""

from __future__ import annotations

import ipaddress
import runpy
import socket
import sys

BLOCKED = "blocked network attempt"
attempts: list[str] = []
_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex
_getaddrinfo = socket.getaddrinfo


def _loopback(host: object) -> bool:
    if not isinstance(host, str):
        return False
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _refuse(what: str) -> OSError:
    attempts.append(what)
    print(f"{BLOCKED}: {what}", file=sys.stderr, flush=True)
    return ConnectionRefusedError(f"{BLOCKED}: {what}")


def _guarded_connect(self: socket.socket, address, *rest):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
        raise _refuse(f"connect {address[0]}:{address[1]}")
    return _connect(self, address, *rest)


def _guarded_connect_ex(self: socket.socket, address, *rest):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
        raise _refuse(f"connect {address[0]}:{address[1]}")
    return _connect_ex(self, address, *rest)


def _guarded_getaddrinfo(host, *args, **kwargs):
    name = host.decode() if isinstance(host, bytes) else host
    if name is not None and not _loopback(name):
        raise socket.gaierror(socket.EAI_NONAME, str(_refuse(f"resolve {name}")))
    return _getaddrinfo(host, *args, **kwargs)


def install() -> None:
    """Refuse (and record) every connection and name lookup that is not loopback, in this process."""
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _guarded_getaddrinfo  # type: ignore[assignment]


def uninstall() -> None:
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _getaddrinfo  # type: ignore[assignment]


if __name__ == "__main__":  # python network_guard.py script.py: run the script with the guard on
    install()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
