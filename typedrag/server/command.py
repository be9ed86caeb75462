"""`typedrag serve`: run the HTTP service with uvicorn. FastAPI and uvicorn are imported only when it runs,
so the rest of the command line starts fast and works without the `serve` extra."""

from __future__ import annotations

import ipaddress
import os
import re
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

from typedrag.commands import (
    BackendOpt,
    BaseUrlOpt,
    CollectionOpt,
    DatabaseOpt,
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


def uvicorn_config(
    app, host: str, port: int, *, header_timeout: float = HEADER_TIMEOUT, max_connections: int | None = None, **kwargs
):
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
        # The client address is the connection's own: X-Forwarded-* is read only from --trusted-proxies, by
        # typedrag.server.auth (uvicorn would believe X-Forwarded-For from any loopback client).
        proxy_headers=False,
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
        Optional[int],
        typer.Option(min=1, help="Open connections at most; more are closed at once (default: below the fd limit)."),
    ] = None,
    header_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds a client has to send a request's headers.")
    ] = HEADER_TIMEOUT,
    body_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds a client has to send a request's body.")
    ] = BODY_TIMEOUT,
    backend: BackendOpt = None,
    uri: UriOpt = None,
    collection: CollectionOpt = None,
    milvus_mode: RetrievalOpt = None,
    llm_timeout: LLMTimeoutOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
    database: DatabaseOpt = None,
    session_hours: Annotated[
        float, typer.Option(min=0.01, help="How long the page stays signed in after signing in with a key.")
    ] = 168.0,
    trusted_proxies: Annotated[
        Optional[str],
        typer.Option(
            envvar="TYPEDRAG_TRUSTED_PROXIES",
            help="Comma list of addresses or networks of the reverse proxies in front: their X-Forwarded-Proto "
            "(https: Secure cookies) and --user-header are believed, from any other address ignored.",
        ),
    ] = None,
    user_header: Annotated[
        Optional[str],
        typer.Option(
            envvar="TYPEDRAG_USER_HEADER",
            help="Behind an SSO proxy: the header naming the signed-in user (e.g. X-Forwarded-User), taken only from "
            "--trusted-proxies; off by default.",
        ),
    ] = None,
    retention_days: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            help="Saved conversations untouched for this many days are removed (hourly); default: kept "
            "until deleted (also TYPEDRAG_RETENTION_DAYS, retention_days in typedrag.toml).",
        ),
    ] = None,
    user_header_adds_users: Annotated[
        bool,
        typer.Option(
            help="With --user-header: a user the proxy names who has no account yet gets one (a reader with no grants)."
        ),
    ] = False,
) -> None:
    """Serve typedrag over HTTP: /v1/answer (+ /stream as Server-Sent Events), OpenAI-compatible
    /v1/chat/completions and /v1/models, /healthz, /readyz, and a web page at /. With --data DIR: collections
    of uploaded documents (/v1/collections), each citation linking to its original (/view/...), and the
    accounts of `typedrag users` with their saved conversations and feedback (SQLite in DIR, or --database URL:
    PostgreSQL shared by replicas)."""
    import logging

    import uvicorn

    from typedrag.commands import USER_ERRORS, backend_overrides, fail, llm_limits, settings_from
    from typedrag.factory import Resources, build_pipeline
    from typedrag.server.app import create_app, open_server_store
    from typedrag.server.logs import configure_logging
    from typedrag.server.service import ServerOptions, load_models
    from typedrag.store import StoreUnavailable

    configure_logging(log_level)
    settings = settings_from(
        index=index,
        data=data,
        database=database,
        retention_days=retention_days,
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
    proxies = tuple(p.strip() for p in (trusted_proxies or "").split(",") if p.strip())
    for proxy in proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            fail(f"--trusted-proxies: {proxy!r} is not an address or a network (e.g. 10.0.0.5 or 10.0.0.0/24)")
    if user_header is not None and not re.fullmatch(r"[A-Za-z0-9-]{1,100}", user_header.strip()):
        fail("--user-header is a header name, e.g. X-Forwarded-User")
    if user_header is not None and not proxies:
        fail("--user-header needs --trusted-proxies: the header is believed only from the proxy's addresses")
    if user_header is not None and settings.data is None and settings.database is None:
        fail(
            "--user-header maps the proxy's user to an account: give --data DIR or --database URL (the accounts' store)"
        )
    resources = Resources()
    store = None
    try:
        if settings.data is not None and settings.backend == "milvus":
            fail(
                "--data keeps its collections in embedded tantivy indexes; Milvus collections are not served from it yet "
                "(serve one Milvus collection with --backend milvus and no --data)"
            )
        pipeline = build_pipeline(settings, resources, need_index=settings.data is None or index is not None)
        load_models(pipeline)  # a missing or damaged model stops the start, not every answer after it
        store = open_server_store(settings)  # migrated, purged: an unreachable or too new database stops the start
    except (*USER_ERRORS, StoreUnavailable) as error:
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
        session_hours=session_hours,
        trusted_proxies=proxies,
        user_header=user_header.strip() if user_header else None,
        user_header_adds_users=user_header_adds_users,
    )
    if options.api_key is None and host not in LOOPBACK and (store is None or not store.has_users()):
        logging.getLogger("typedrag.server").warning(
            f"listening on {host} without an API key or accounts; set {api_key_env}, or add users (typedrag users add)"
        )
    try:
        config = uvicorn_config(
            create_app(settings, pipeline, options, store=store),
            host,
            port,
            header_timeout=header_timeout,
            max_connections=max_connections,
        )
        uvicorn.Server(config).run()
    finally:
        if store is not None:
            store.close()
        resources.close()
