"""`typedrag serve`: run the HTTP service with uvicorn. FastAPI and uvicorn are imported only when it runs,
so the rest of the command line starts fast and works without the `serve` extra."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

from typedrag.commands import (
    BackendOpt,
    BaseUrlOpt,
    CollectionOpt,
    IndexOpt,
    LLMConcurrencyOpt,
    LLMOpt,
    LLMTimeoutOpt,
    RetrievalOpt,
    UriOpt,
)

LOOPBACK = ("127.0.0.1", "localhost", "::1")
LOOPBACK_HOST_HEADERS = ["localhost", "127.0.0.1", "[::1]"]
HEADER_TIMEOUT = 20.0  # Apache mod_reqtimeout's defaults: header=20, body=20
BODY_TIMEOUT = 20.0
KEEP_ALIVE_TIMEOUT = 5


def uvicorn_config(app, host: str, port: int, *, header_timeout: float = HEADER_TIMEOUT, max_connections: int | None = None, **kwargs):
    """The uvicorn configuration `serve` runs with: slow-client guards (see typedrag.server.protocol),
    a keep-alive timeout, and uvicorn's limit_concurrency (503) as a backstop a little above the
    connection cap (at the cap itself, connections being evicted would still count and refuse /healthz)."""
    import uvicorn

    from typedrag.server.protocol import default_max_connections, guarded_protocol

    cap = max_connections or default_max_connections()
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded_protocol(header_timeout, cap),
        limit_concurrency=cap + 64,
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT,
        h11_max_incomplete_event_size=16 * 1024,  # request line + headers
        log_config=None,
        access_log=False,
        **kwargs,
    )


def serve_command(
    host: Annotated[
        str, typer.Option(help="Address to listen on; loopback by default. Use 0.0.0.0 in a container.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    index: IndexOpt = None,
    data: Annotated[
        Optional[Path],
        typer.Option(
            "--data",
            help="Folder of the server's collections: created, filled and searched from the page and the API "
            "(uploaded originals and their indexes are kept there). With --index too, that index is the read-only "
            "collection 'default'.",
        ),
    ] = None,
    llm: LLMOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: Annotated[
        str,
        typer.Option(
            help="Environment variable holding the API key clients must send as 'Authorization: Bearer'; unset = no key."
        ),
    ] = "TYPEDRAG_SERVER_API_KEY",
    max_concurrency: Annotated[
        int, typer.Option(min=1, help="Answers in flight at once; more get 503 with Retry-After.")
    ] = 32,
    max_request_bytes: Annotated[
        int, typer.Option(min=1024, help="Largest request body accepted; larger gets 413.")
    ] = 256 * 1024,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error (JSON lines on stderr).")] = "info",
    allowed_hosts: Annotated[
        Optional[str],
        typer.Option(
            help="Comma list of Host headers to accept ('*' = any). Default: with no API key on a loopback address, "
            "only localhost/127.0.0.1/[::1] (against DNS rebinding); otherwise any."
        ),
    ] = None,
    max_connections: Annotated[
        Optional[int], typer.Option(min=1, help="Open connections at most; more are closed at once (default: below the fd limit).")
    ] = None,
    header_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds a client has to send a request's headers.")
    ] = HEADER_TIMEOUT,
    body_timeout: Annotated[float, typer.Option(min=0.1, help="Seconds a client has to send a request's body.")] = BODY_TIMEOUT,
    backend: BackendOpt = None,
    uri: UriOpt = None,
    collection: CollectionOpt = None,
    milvus_mode: RetrievalOpt = None,
    llm_timeout: LLMTimeoutOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
) -> None:
    """Serve typedrag over HTTP: /v1/answer (+ /stream as Server-Sent Events), OpenAI-compatible
    /v1/chat/completions and /v1/models, /healthz, /readyz, and a web page at /. With --data DIR: collections
    of uploaded documents (/v1/collections), each citation linking to its original (/view/...)."""
    import logging

    import uvicorn

    from typedrag.commands import USER_ERRORS, backend_overrides, fail, llm_limits, settings_from
    from typedrag.factory import Resources, build_pipeline
    from typedrag.server.app import create_app
    from typedrag.server.service import ServerOptions, configure_logging, load_models

    configure_logging(log_level)
    settings = settings_from(
        index=index,
        data=data,
        **{"llm.model": llm, "llm.base_url": base_url},
        **llm_limits(llm_timeout, llm_concurrency),
        **backend_overrides(backend, uri, collection, mode=milvus_mode),  # the token only from env/config
    )
    settings.cache_dir = None  # stateless: replicas keep no per-request files
    if settings.data is not None:  # every file the server writes stays in the data folder, its temporary ones too
        temporary = settings.data / ".tmp"
        temporary.mkdir(parents=True, exist_ok=True)
        os.environ["TMPDIR"] = str(temporary.resolve())  # and the ingestion's worker processes'
        tempfile.tempdir = None  # read TMPDIR again
    resources = Resources()
    try:
        if settings.data is not None and settings.backend == "milvus":
            fail("--data keeps its collections in embedded tantivy indexes; Milvus collections are not served from it yet "
                 "(serve one Milvus collection with --backend milvus and no --data)")
        pipeline = build_pipeline(settings, resources, need_index=settings.data is None or index is not None)
        load_models(pipeline)  # a missing or damaged model stops the start, not every answer after it
    except USER_ERRORS as error:
        resources.close()
        fail(str(error))
    api_key = os.environ.get(api_key_env) or None
    if allowed_hosts is not None:
        hosts = [h.strip() for h in allowed_hosts.split(",") if h.strip()] or None
        hosts = None if hosts == ["*"] else hosts
    else:
        hosts = LOOPBACK_HOST_HEADERS if api_key is None and host in LOOPBACK else None
    options = ServerOptions(
        api_key=api_key,
        max_concurrency=max_concurrency,
        max_request_bytes=max_request_bytes,
        body_timeout=body_timeout,
        allowed_hosts=hosts,
    )
    if options.api_key is None and host not in LOOPBACK:
        logging.getLogger("typedrag.server").warning(
            f"listening on {host} without an API key; set {api_key_env} to require one"
        )
    try:
        config = uvicorn_config(
            create_app(settings, pipeline, options), host, port, header_timeout=header_timeout, max_connections=max_connections
        )
        uvicorn.Server(config).run()
    finally:
        resources.close()
