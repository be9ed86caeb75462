"""A local GGUF model served by llama.cpp's own OpenAI-compatible server (the `xllamacpp` wheel).

typedrag starts the server in-process on a free loopback port and talks to it through the same
OpenAI-compatible client as any remote endpoint, so the local path exercises the real protocol.
"""

from __future__ import annotations

import socket
from pathlib import Path

from typedrag.errors import ModelUnavailable
from typedrag.extras import require

LOCAL_FEATURE = "a local model (--llm local:...)"


class LocalServerError(ModelUnavailable):
    """The local llama.cpp server cannot start: extra missing, or no such model file."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalLlamaServer:
    """Owns one llama.cpp server; `close()` (or garbage collection) stops it."""

    def __init__(self, model_path: Path | str, *, n_ctx: int = 4096, threads: int = 1, parallel: int = 1) -> None:
        xllamacpp = require("xllamacpp", "local", LOCAL_FEATURE)
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise LocalServerError(f"GGUF model file not found: {path}")
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = parallel
        params.cpuparams.n_threads = threads  # generation collapses with 2 threads on 2 cores under load
        params.cpuparams_batch.n_threads = threads
        params.hostnames = ["127.0.0.1"]
        params.port = _free_port()
        params.verbosity = 0
        params.endpoint_metrics = True  # loopback only: token counters, read once below
        self.model_name = path.stem
        self._server = xllamacpp.Server(params)
        # The server returns from its constructor just before its task loop starts; stopped in that instant (a run
        # whose every answer is cached stops it at once), the loop starts after the stop and never ends, and the
        # stop waits for it forever. A metrics request is a round trip through that loop: once it returns, the
        # loop runs and a stop ends it.
        self._server.handle_metrics()
        self.base_url = f"http://127.0.0.1:{params.port}/v1"

    def close(self) -> None:
        self._server = None
