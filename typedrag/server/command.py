"""`typedrag serve`: run the HTTP service with uvicorn. FastAPI and uvicorn are imported only when it runs,
so the rest of the command line starts fast and works without the `serve` extra."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve_command(
    host: Annotated[
        str, typer.Option(help="Address to listen on; loopback by default. Use 0.0.0.0 in a container.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    index: Annotated[
        Optional[Path],
        typer.Option("--index", "-i", help="Index directory (default: ./typedrag-index or TYPEDRAG_INDEX)."),
    ] = None,
    llm: Annotated[
        Optional[str],
        typer.Option(
            help="'offline' (built-in, default), 'local:PATH.gguf' / 'local:smollm2' (llama.cpp), or a model name at --base-url."
        ),
    ] = None,
    base_url: Annotated[
        Optional[str], typer.Option(help="OpenAI-compatible LLM endpoint, e.g. http://127.0.0.1:8001/v1.")
    ] = None,
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
    backend: Annotated[
        Optional[str], typer.Option("--backend", help="tantivy (embedded, default) or milvus (a Milvus server at --uri).")
    ] = None,
    uri: Annotated[
        Optional[str], typer.Option("--uri", help="Milvus URI, e.g. http://milvus:19530 (or TYPEDRAG_MILVUS_URI).")
    ] = None,
    collection: Annotated[Optional[str], typer.Option("--collection", help="Milvus collection (default: typedrag).")] = None,
    milvus_mode: Annotated[
        Optional[str], typer.Option("--milvus-mode", help="Milvus search: bm25 (default), dense or hybrid.")
    ] = None,
) -> None:
    """Serve typedrag over HTTP: /v1/answer (+ /stream as Server-Sent Events), OpenAI-compatible
    /v1/chat/completions and /v1/models, /healthz, /readyz, and a web page at /."""
    import logging

    import uvicorn

    from typedrag.cli import USER_ERRORS, backend_overrides, fail, settings_from
    from typedrag.factory import Resources, build_pipeline
    from typedrag.server.app import ServerOptions, configure_logging, create_app

    configure_logging(log_level)
    settings = settings_from(
        index=index,
        **{"llm.model": llm, "llm.base_url": base_url},
        **backend_overrides(backend, uri, collection, mode=milvus_mode),  # the token only from env/config
    )
    settings.cache_dir = None  # stateless: replicas keep no per-request files
    resources = Resources()
    try:
        pipeline = build_pipeline(settings, resources)
    except USER_ERRORS as error:
        resources.close()
        fail(str(error))
    options = ServerOptions(
        api_key=os.environ.get(api_key_env) or None,
        max_concurrency=max_concurrency,
        max_request_bytes=max_request_bytes,
    )
    if options.api_key is None and host not in LOOPBACK:
        logging.getLogger("typedrag.server").warning(
            f"listening on {host} without an API key; set {api_key_env} to require one"
        )
    try:
        uvicorn.run(create_app(settings, pipeline, options), host=host, port=port, log_config=None, access_log=False)
    finally:
        resources.close()
