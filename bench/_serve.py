"""What the benchmarks that start `typedrag serve` share: a free loopback port, and the wait until it is ready."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(server: subprocess.Popen, url: str, what: str, tries: int = 600) -> None:
    """Poll `url`/readyz every 0.5 s until it answers 200; exit naming `what` if the server dies or never gets ready
    (it is terminated then)."""
    import httpx

    for _ in range(tries):
        if server.poll() is not None:
            raise SystemExit(f"{what} exited with {server.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.terminate()
    raise SystemExit(f"{what} was not ready")
