"""What every command-line command shares: the options several commands take, loading settings and
turning errors into one line.

`typedrag` commands live in cli.py, evaluation/ and server/command.py; all of them use these, so none
of them imports another, and an option several commands take is declared once, here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, NoReturn, Optional, TextIO

import typer
from rich.console import Console
from rich.markup import escape

from typedrag import telemetry
from typedrag.config import Settings, load_settings
from typedrag.errors import LLMError, UserError
from typedrag.text import for_terminal

errors = Console(stderr=True, soft_wrap=True)  # one error, one line, whatever the terminal width

# ---------------------------------------------------------------- options several commands take

IndexOpt = Annotated[
    Optional[Path], typer.Option("--index", "-i", help="Index directory (default: ./typedrag-index or TYPEDRAG_INDEX).")
]
LLMOpt = Annotated[
    Optional[str],
    typer.Option(
        "--llm",
        help="'offline' (built-in, default), 'local:PATH.gguf' / 'local:smollm2' (llama.cpp), or a model name at --base-url.",
    ),
]
BaseUrlOpt = Annotated[
    Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8001/v1.")
]
ClassifierOpt = Annotated[
    Optional[str],
    typer.Option(
        "--classifier",
        help="auto (default: the shipped model; with --llm, the LLM where it is unsure or reads no question), shipped, or llm (zero-shot by --llm).",
    ),
]
ExpandOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--expand/--no-expand",
        help="With --llm: widen a plain-RAG search with queries the model writes (on by default; one more call).",
    ),
]
KnowledgeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--knowledge",
        help="documents (default): answers hold only what the documents support; labelled: with --llm, where they do not "
        'cover the question, the model may add what it knows, apart, as "Not from your documents: ..." (or TYPEDRAG_KNOWLEDGE).',
    ),
]
# The index backend (settings keys backend, milvus_* and retrieval).
BackendOpt = Annotated[
    Optional[str], typer.Option("--backend", help="tantivy (embedded, default) or milvus (a Milvus server at --uri).")
]
UriOpt = Annotated[
    Optional[str], typer.Option("--uri", help="Milvus URI, e.g. http://127.0.0.1:19530 (or TYPEDRAG_MILVUS_URI).")
]
CollectionOpt = Annotated[Optional[str], typer.Option("--collection", help="Milvus collection (default: typedrag).")]
TokenOpt = Annotated[
    Optional[str],
    typer.Option(
        "--token",
        help="Milvus token, 'user:password' or an API key; prefer TYPEDRAG_MILVUS_TOKEN (never printed).",
        show_default=False,
    ),
]
RetrievalOpt = Annotated[
    Optional[str],
    typer.Option(
        "--retrieval",
        "--milvus-mode",
        help="Search with bm25, dense vectors or hybrid (both fused); default: as the index was built (or TYPEDRAG_RETRIEVAL).",
    ),
]
# Where `typedrag serve` keeps its data and its store (users, keys, grants, conversations, feedback).
DataOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--data", help="Data directory, as `typedrag serve --data` uses it (default: ./typedrag-data or TYPEDRAG_DATA)."
    ),
]
DatabaseOpt = Annotated[
    Optional[str],
    typer.Option(
        "--database",
        metavar="URL",
        help="The store: postgresql://USER@HOST/NAME, shared by replicas (or TYPEDRAG_DATABASE); default: SQLite in --data.",
        show_default=False,
    ),
]
# The LLM endpoint's limits, on every command that talks to one (beside TYPEDRAG_TIMEOUT / TYPEDRAG_CONCURRENCY).
LLMTimeoutOpt = Annotated[
    Optional[float],
    typer.Option(
        "--llm-timeout",
        min=0.1,
        help="Seconds one LLM request may take, per attempt (or TYPEDRAG_TIMEOUT; default 60).",
    ),
]
LLMConcurrencyOpt = Annotated[
    Optional[int],
    typer.Option(
        "--llm-concurrency",
        min=1,
        help="LLM requests in flight at once (or TYPEDRAG_CONCURRENCY; default 8, and 1 for a local: model, one per server slot).",
    ),
]


def llm_limits(timeout: float | None, concurrency: int | None) -> dict:
    """The two options as settings overrides (None = keep the config file's or environment's value)."""
    return {"llm.timeout": timeout, "llm.concurrency": concurrency}


# Errors a user can fix or an endpoint caused: shown as one clear line, never a stack trace.
# OS errors are here for the files a command reads or writes (a missing question file, a full disk).
USER_ERRORS = (UserError, LLMError, OSError)


def fail(message: str) -> NoReturn:
    """Print `error: message` on stderr and exit 2."""
    errors.print(f"[red]error:[/red] {escape(for_terminal(message))}")
    raise typer.Exit(2)


class LossyOutput:
    """Standard output that may be lost without losing the work: a write or flush that fails (the reader of a pipe
    is gone, `| head -c 1`; a full disk under a redirected log) is said once on stderr, and what follows goes to
    /dev/null, so a build that prints its progress goes on and ends as it would have."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.lost: OSError | None = None

    def write(self, text: str) -> int:
        if self.lost is None:
            try:
                self.stream.write(text)
            except OSError as error:
                self._lose(error)
        return len(text)

    def flush(self) -> None:
        if self.lost is None:
            try:
                self.stream.flush()
            except OSError as error:
                self._lose(error)

    def _lose(self, error: OSError) -> None:
        self.lost = error
        with contextlib.suppress(OSError, ValueError):  # the interpreter's last flush at exit finds nowhere to fail
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
        why = "its reader closed it" if error.errno == errno.EPIPE else (error.strerror or str(error)).lower()
        with contextlib.suppress(OSError, ValueError):  # stderr may be gone too
            errors.print(
                f"typedrag: cannot write to standard output ({why}); carrying on without it",
                markup=False,
                highlight=False,
            )

    def __getattr__(self, name: str):  # isatty, fileno, encoding, ...: the stream's
        return getattr(self.stream, name)


@contextlib.contextmanager
def lossy_stdout() -> Iterator[LossyOutput]:
    """`sys.stdout` as a `LossyOutput` while the block runs (rich's consoles write to whatever it is then)."""
    real = sys.stdout
    sys.stdout = lossy = LossyOutput(real)
    try:
        yield lossy
    finally:
        lossy.flush()
        sys.stdout = real


def settings_from(**overrides) -> Settings:
    """Settings from the config file, environment and these flag values (None = not given)."""
    try:
        settings = load_settings(overrides)
    except UserError as error:
        fail(str(error))
    telemetry.record_content(settings.trace_content)
    return settings


def backend_overrides(backend=None, uri=None, collection=None, token=None, mode=None) -> dict:
    """The index-backend options as settings overrides (None = keep the config file's or environment's value)."""
    return {
        "backend": backend,
        "milvus_uri": uri,
        "milvus_collection": collection,
        "milvus_token": token,
        "retrieval": mode,
    }


DEFAULT_DATA = Path(
    "typedrag-data"
)  # the `users` commands' data directory when neither --data nor TYPEDRAG_DATA names one


def store_from(settings: Settings, *, create: bool = False):
    """The store the settings name (`database`, else SQLite in `data`), migrated; a one-line error if it cannot open.
    create=False: a data directory without a store is an error (a mistyped --data makes no empty store)."""
    from typedrag.store import StoreUnavailable, open_store

    database = settings.database.get_secret_value() if settings.database else None
    try:
        return open_store(database, settings.data or DEFAULT_DATA, create=create)
    except (UserError, StoreUnavailable) as error:
        fail(str(error))
