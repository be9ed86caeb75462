"""The `typedrag` command line: index a corpus, ask questions, classify, evaluate, serve."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from typedrag import __version__
from typedrag.commands import (
    USER_ERRORS,
    BackendOpt,
    BaseUrlOpt,
    ClassifierOpt,
    CollectionOpt,
    ExpandOpt,
    KnowledgeOpt,
    IndexOpt,
    LLMConcurrencyOpt,
    LLMOpt,
    LLMTimeoutOpt,
    RetrievalOpt,
    TokenOpt,
    UriOpt,
    errors,
    lossy_stdout,
    backend_overrides,
    fail,
    llm_limits,
    settings_from,
)
from typedrag.text import for_terminal

app = typer.Typer(
    help=(
        "Typed-RAG for non-factoid questions: classify the question type, run a type-specific "
        "retrieval plan, and answer with citations. Works offline with a built-in engine; point "
        "--llm/--base-url at any OpenAI-compatible endpoint for generative answers."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
progress_console = Console(stderr=True, soft_wrap=True)  # what happens while an answer streams on stdout


def _print_version(asked: bool) -> None:
    if asked:
        print(f"typedrag {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print typedrag's version and exit."),
    ] = False,
) -> None:
    """Options before the command (`typedrag --version`), then what every command needs: the OTEL_* variables
    may ask for traces of every answer."""
    from typedrag.telemetry import configure_from_environment

    problem = configure_from_environment()
    if problem:
        errors.print(f"warning: {for_terminal(problem)}", markup=False)


@app.command()
def index(
    sources: Annotated[
        list[str],
        typer.Argument(
            help="Files or folders (HTML, PDF, DOCX, Markdown, reStructuredText, text, gzipped or not; JSONL, DPR TSV) or demo:vital-articles."
        ),
    ],
    index_dir: IndexOpt = None,
    passage_words: Annotated[int, typer.Option(help="Words per passage.")] = 100,
    strict: Annotated[
        bool, typer.Option("--strict", help="Stop at the first unreadable file or record instead of skipping it.")
    ] = False,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Read every file again and build the index from scratch.")
    ] = False,
    keep_missing: Annotated[
        bool,
        typer.Option(
            "--keep-missing",
            help="Add and update only: keep what the index holds of files not in SOURCES (an index fed from several places).",
        ),
    ] = False,
    backend: BackendOpt = None,
    uri: UriOpt = None,
    collection: CollectionOpt = None,
    token: TokenOpt = None,
    retrieval: Annotated[
        Optional[str],
        typer.Option(
            "--retrieval",
            help="hybrid (BM25 and passage vectors, default for a new index), dense, or bm25 (no vectors); a sync keeps the index's.",
        ),
    ] = None,
    embedder: Annotated[
        Optional[str],
        typer.Option(
            "--embedder",
            help="Model of the passage vectors: minilm (default, better), minilm-fast (twice as fast, near-identical vectors) or static (far faster); see docs/how-it-works.md.",
        ),
    ] = None,
    sentence_vectors: Annotated[
        Optional[bool],
        typer.Option(
            "--sentence-vectors/--no-sentence-vectors",
            help="Embed every passage's sentences now, so no answer embeds them (several times the build's CPU), or leave "
            "them to answers, which keep each the first time they need it. Default: as the index was first asked, else yes "
            "with MiniLM passage vectors but not for demo:vital-articles. Setting: sentence_vectors, TYPEDRAG_SENTENCE_VECTORS.",
        ),
    ] = None,
    include: Annotated[
        Optional[list[str]],
        typer.Option(
            "--include",
            metavar="PATTERN",
            help="Read only the files of the folders given that match this glob (repeatable), e.g. --include '*.html'. "
            "A pattern without / matches a file's or a folder's name, one with / a path inside the folder given. "
            "Recorded in the index: a later sync applies the same filters unless given new ones (--include '*' clears them).",
        ),
    ] = None,
    exclude: Annotated[
        Optional[list[str]],
        typer.Option(
            "--exclude",
            metavar="PATTERN",
            help="Leave out the files of the folders given that match this glob (repeatable), e.g. --exclude 'changelog*' "
            "--exclude 'release-*' (a matching folder is left out whole). Files a sync's new filters leave out leave the index.",
        ),
    ] = None,
    follow_links: Annotated[
        bool,
        typer.Option(
            "--follow-links",
            help="Read what symbolic links in the folders given lead to outside them (Debian's *-doc packages link "
            "their manuals from elsewhere). Recorded with --include and --exclude: giving any of them to a sync replaces them all.",
        ),
    ] = False,
    all_formats: Annotated[
        bool,
        typer.Option(
            "--all-formats",
            help="Read every rendering of a document a folder holds (bashref.html and bashref.pdf; api/fs.md and "
            "api/fs.html); by default only the one read best (HTML, Markdown, reStructuredText, DOCX, PDF, text), the "
            "others reported. Recorded as --follow-links is.",
        ),
    ] = False,
    dense: Annotated[bool, typer.Option("--dense", hidden=True, help="The older name of --retrieval hybrid.")] = False,
    ray_address: Annotated[
        Optional[str],
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Milvus only: read, chunk and embed on the Ray cluster at ADDRESS ('auto': RAY_ADDRESS or this machine's "
            "cluster; 'local': a Ray started here). Needs the ray extra.",
        ),
    ] = None,
) -> None:
    """Index documents for search, or bring an existing index up to date (new, changed and removed files).

    Folders are read whole, at any depth, but for hidden files; --include and --exclude choose among their files, e.g. `typedrag index docs/ --include '*.html' --exclude 'changelog*' --exclude 'release-*'`."""
    from typedrag.corpus.readers import FileFilter

    settings = settings_from(
        index=index_dir,
        sentence_vectors=sentence_vectors,
        **backend_overrides(backend, uri, collection, token, retrieval),
    )
    given = include or exclude or follow_links or all_formats
    filters = FileFilter(tuple(include or ()), tuple(exclude or ()), follow_links, all_formats) if given else None
    with lossy_stdout():  # progress and the summary that cannot be written never stop the build (issue 57 P5)
        _index(settings, sources, passage_words, strict, rebuild, keep_missing, dense, ray_address, embedder, filters)


def _index(
    settings, sources, passage_words, strict, rebuild, keep_missing, dense, ray_address, embedder, filters
) -> None:
    from typedrag.index.open import build_configured_index
    from typedrag.index.base import EmptyIndexError

    try:
        if ray_address is not None:
            from typedrag.index.milvus.ray import index_on_ray
            from typedrag.index.milvus.backend import check_no_sentence_vectors

            check_no_sentence_vectors(settings)

            summary = index_on_ray(
                settings,
                sources,
                address=ray_address,
                passage_words=passage_words,
                strict=strict,
                dense=dense,
                rebuild=rebuild,
                remove_missing=not keep_missing,
                embedder=embedder,
                report=lambda line: errors.print(line, markup=False),
                filters=filters,
            )
        else:
            summary = build_configured_index(
                settings,
                sources,
                passage_words=passage_words,
                strict=strict,
                dense=dense,
                rebuild=rebuild,
                remove_missing=not keep_missing,
                embedder=embedder,
                filters=filters,
            )
    except EmptyIndexError as error:
        _report_problems(error.summary)
        fail(str(error))
    except USER_ERRORS as error:
        fail(str(error))
    _report_problems(summary)
    if summary.filters:
        files = "file" if summary.left_out == 1 else "files"
        errors.print(
            f"left out {summary.left_out:,} {files} of the folders by {for_terminal(summary.filters)}", markup=False
        )
    if summary.follows_links:
        errors.print("read what symbolic links lead to outside the folders (--follow-links)")
    where = for_terminal(summary.index_dir)
    if summary.synced:
        console.print(
            f"added {summary.added:,}, updated {summary.updated:,}, removed {summary.removed:,}, unchanged {summary.unchanged:,} "
            f"in {summary.seconds:.1f} s -> {where} ({summary.documents:,} documents, {summary.passages:,} passages, "
            f"{summary.skipped:,} skipped)",
            markup=False,
            soft_wrap=True,
        )
    else:
        console.print(
            f"indexed {summary.documents:,} documents into {summary.passages:,} passages "
            f"({summary.skipped:,} skipped) in {summary.seconds:.1f} s -> {where}",
            markup=False,
            soft_wrap=True,
        )
    if summary.embedder:
        on_disk = (
            f"; {summary.vector_bytes / 2**20:,.1f} MiB on disk" if summary.vector_bytes else ""
        )  # Milvus keeps its own
        console.print(
            f"search: {summary.retrieval}; passage vectors by {summary.embedder}: {summary.embedded:,} embedded in "
            f"{summary.embed_seconds:.1f} s, {summary.passages - summary.embedded:,} reused{on_disk}",
            markup=False,
            soft_wrap=True,
        )
    line = sentences_line(summary)
    if line:
        console.print(line, markup=False, soft_wrap=True)


_LEFT_TO_ANSWERS = {
    "demo": "not built for the demo corpus (its first build stays seconds)",
    "no-minilm": "not built (the passages have no MiniLM vectors)",
    "asked": "not built, as asked",
    "recorded": "not built, as this index was first asked",
}


def sentences_line(summary) -> str:
    """What a local build chose for its sentence vectors, why, and how to choose otherwise ("" for Milvus)."""
    if not summary.sentence_choice:
        return ""
    if summary.sentence_vectors:
        return (
            f"sentence vectors (for answers): {summary.sentences:,}, {summary.sentences_embedded:,} embedded in "
            f"{summary.sentence_seconds:.1f} s; {summary.sentence_bytes / 2**20:,.1f} MiB on disk "
            f"(--no-sentence-vectors leaves them to answers)"
        )
    return (
        f"sentence vectors (for answers): {_LEFT_TO_ANSWERS[summary.sentence_choice]}: answers embed and keep each "
        f"as they first need it; --sentence-vectors embeds them all now"
    )


def skipped_line(problem) -> str:
    """A problem as the line that says what was skipped: its reason says so itself ("..., rest of file skipped"), or
    the line begins with "skipped"; never both ("skipped a.png: unsupported file type, skipped")."""
    return str(problem) if problem.reason.endswith("skipped") else f"skipped {problem}"


# Reasons a folder gives many times over (a manual's images, style sheets and scripts; Debian's doc packages link
# those to shared copies outside the folder): past five, one line counted by suffix, with what it means.
_GROUPED = (
    ("unsupported file type", "files of types typedrag does not read"),
    (
        "symbolic link to a file outside the corpus folder",
        "symbolic links to files outside the corpus folder (not read; --follow-links reads them)",
    ),
    ("the same document as", "renderings of documents read in a better format (--all-formats reads every one)"),
)


def _suffix(location: str) -> str:
    """The ending a skipped file is counted by: ".txt.gz" for a gzipped document (".gz" alone says nothing of it)."""
    path = Path(location)
    if path.suffix.lower() == ".gz" and Path(path.stem).suffix:
        return (Path(path.stem).suffix + path.suffix).lower()
    return path.suffix.lower() or "(no suffix)"


def _report_problems(summary) -> None:
    """What was skipped and what was cut, on stderr: the first twenty of each, then a count. A reason many files
    share (`_GROUPED`) is one line, counted by suffix."""
    from collections import Counter

    grouped = []
    for reason, label in _GROUPED:
        members = [p for p in summary.problems if p.reason.startswith(reason)]
        if len(members) > 5:  # a few: each by name
            grouped.append((label, members))
    in_groups = {id(p) for _, members in grouped for p in members}
    others = [p for p in summary.problems if id(p) not in in_groups]
    for problem in others[:20]:
        errors.print(for_terminal(skipped_line(problem)), markup=False)
    more = len(others) - len(others[:20]) + getattr(summary.problems, "dropped", 0)
    if more:
        errors.print(f"... and {more:,} more")
    for label, members in grouped:
        suffixes = Counter(_suffix(p.location.rsplit(":", 1)[0]) for p in members)
        kinds = ", ".join(f"{suffix} {count:,}" for suffix, count in suffixes.most_common())
        errors.print(f"skipped {len(members):,} {label}: {for_terminal(kinds)}", markup=False)
    for note in summary.notes[:20]:
        errors.print(f"note: {for_terminal(note)}", markup=False)
    more = len(summary.notes) - len(summary.notes[:20]) + getattr(summary.notes, "dropped", 0)
    if more:
        errors.print(f"... and {more:,} more notes")


@app.command()
def ask(
    question: Annotated[Optional[str], typer.Argument(help="The question to answer (or use --file).")] = None,
    index_dir: IndexOpt = None,
    method: Annotated[
        str, typer.Option("--method", "-m", help="typed (Typed-RAG), rag (plain RAG) or llm (LLM only).")
    ] = "typed",
    type_: Annotated[
        Optional[str], typer.Option("--type", "-t", help="Force the question type, e.g. comparison.")
    ] = None,
    llm: LLMOpt = None,
    base_url: BaseUrlOpt = None,
    classifier: ClassifierOpt = None,
    top_k: Annotated[Optional[int], typer.Option(help="Passages per generation.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full result with its trace as JSON.")] = False,
    trace: Annotated[bool, typer.Option("--trace", help="Show the trace as a tree.")] = False,
    file: Annotated[
        Optional[Path],
        typer.Option(
            "--file", "-f", help="Answer every question in this file (.txt: one per line; .jsonl: {question, id?})."
        ),
    ] = None,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="With --file: append results here as JSONL; rerun to resume.")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="With --file: questions answered at once.")] = 4,
    llm_timeout: LLMTimeoutOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
    backend: BackendOpt = None,
    uri: UriOpt = None,
    collection: CollectionOpt = None,
    token: TokenOpt = None,
    milvus_mode: RetrievalOpt = None,
    expand: ExpandOpt = None,
    knowledge: KnowledgeOpt = None,
) -> None:
    """Answer a question (or a file of them) over an index, with citations and the engine that answered."""
    from typedrag.factory import Resources, build_pipeline

    settings = settings_from(
        index=index_dir,
        classifier=classifier,
        top_k=top_k,
        expand_queries=expand,
        knowledge=knowledge,
        **{"llm.model": llm, "llm.base_url": base_url},
        **llm_limits(llm_timeout, llm_concurrency),
        **backend_overrides(backend, uri, collection, token, milvus_mode),
    )
    if method not in ("typed", "rag", "llm"):
        fail(f"unknown method {method!r}; choose typed, rag or llm")
    if (question is None) == (file is None):
        fail("give either a QUESTION or --file FILE")
    if file is not None and out is None:
        fail("--file needs --out FILE.jsonl, where results are appended as they complete")
    resources = Resources()
    try:
        pipeline = build_pipeline(
            settings, resources, need_index=method != "llm", need_classifier=method == "typed" and type_ is None
        )
        _note_retrieval(pipeline.retriever)
        forced = pipeline.route_label(type_) if type_ else None
        if file is not None:
            from typedrag.batch import answer_file

            done, failed = asyncio.run(resources.run(answer_file(pipeline, file, out, method, forced, concurrency)))
            console.print(f"{done} answered, {failed} failed -> {for_terminal(str(out))}", markup=False)
            return
        streaming = not (as_json or trace)
        on_event = print_as_it_streams if streaming else None
        if streaming:
            from typedrag.render import Text

            console.print(Text(question.strip(), style="bold"))  # markup and control characters print verbatim
        result = asyncio.run(resources.run(pipeline.answer(question, method, forced, on_event=on_event)))
    except USER_ERRORS as error:
        fail(str(error))
    finally:
        resources.close()
    if streaming:
        from typedrag.render import render_after_stream

        render_after_stream(console, result)
    else:
        show_result(result, as_json=as_json, trace=trace)


def _note_retrieval(retriever) -> None:
    """What the index says about how it is searched (an index without vectors: how to add them), on stderr."""
    notice = retriever.describe().notice if retriever is not None else None  # None: the LLM-only baseline
    if notice:
        errors.print(f"note: {for_terminal(notice)}", markup=False, style="dim")


CHAT_HELP = "/reset starts over, /trace shows the last answer's trace, /quit (or end of input) leaves"


@app.command()
def chat(
    index_dir: IndexOpt = None,
    method: Annotated[
        str, typer.Option("--method", "-m", help="typed (Typed-RAG), rag (plain RAG) or llm (LLM only).")
    ] = "typed",
    type_: Annotated[
        Optional[str], typer.Option("--type", "-t", help="Force the question type, e.g. comparison.")
    ] = None,
    llm: LLMOpt = None,
    base_url: BaseUrlOpt = None,
    classifier: ClassifierOpt = None,
    top_k: Annotated[Optional[int], typer.Option(help="Passages per generation.")] = None,
    system: Annotated[
        Optional[str],
        typer.Option("--system", help="Instructions for every answer (language, tone, length); an LLM follows them."),
    ] = None,
    llm_timeout: LLMTimeoutOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
    backend: BackendOpt = None,
    uri: UriOpt = None,
    collection: CollectionOpt = None,
    token: TokenOpt = None,
    milvus_mode: RetrievalOpt = None,
    expand: ExpandOpt = None,
    knowledge: KnowledgeOpt = None,
) -> None:
    """A conversation over an index: each question is read with the ones before it, each answer streams as it
    is written. /reset starts over, /trace shows the last answer's trace, /quit (or end of input) leaves."""
    from typedrag.factory import Resources, build_pipeline

    settings = settings_from(
        index=index_dir,
        classifier=classifier,
        top_k=top_k,
        expand_queries=expand,
        knowledge=knowledge,
        **{"llm.model": llm, "llm.base_url": base_url},
        **llm_limits(llm_timeout, llm_concurrency),
        **backend_overrides(backend, uri, collection, token, milvus_mode),
    )
    if method not in ("typed", "rag", "llm"):
        fail(f"unknown method {method!r}; choose typed, rag or llm")
    resources = Resources()
    try:
        pipeline = build_pipeline(
            settings, resources, need_index=method != "llm", need_classifier=method == "typed" and type_ is None
        )
        _note_retrieval(pipeline.retriever)
        forced = pipeline.route_label(type_) if type_ else None
        asyncio.run(resources.run(converse(pipeline, method, forced, system)))
    except USER_ERRORS as error:
        fail(str(error))
    finally:
        resources.close()


@app.command("mcp")
def mcp_command(
    index_dir: IndexOpt = None,
    llm: LLMOpt = None,
    base_url: BaseUrlOpt = None,
    classifier: ClassifierOpt = None,
    llm_timeout: LLMTimeoutOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
    backend: BackendOpt = None,
    uri: UriOpt = None,
    collection: CollectionOpt = None,
    token: TokenOpt = None,
    milvus_mode: RetrievalOpt = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error (JSON lines on stderr).")] = "warning",
    data: Annotated[
        Optional[Path],
        typer.Option(
            "--data",
            help="Serve the collections of `typedrag serve --data DIR` (read-only: nothing is "
            "ingested or changed; with --index too, that index is the collection 'default').",
        ),
    ] = None,
) -> None:
    """An MCP server on stdin/stdout for assistants and IDE agents: tools to list collections, search one and
    answer from it (this index is the collection "default", or with --data the server's collections).
    `typedrag serve` offers the same at /mcp over HTTP. Needs the mcp extra."""
    from typedrag.extras import require
    from typedrag.factory import Resources, build_pipeline
    from typedrag.library import CollectionError, Library
    from typedrag.library.tools import LibraryCollections
    from typedrag.mcp_server import FEATURE, SingleIndex, serve_stdio
    from typedrag.server.logs import configure_logging

    configure_logging(log_level)  # stdout carries the protocol: every log line goes to stderr
    settings = settings_from(
        index=index_dir,
        data=data,
        classifier=classifier,
        **{"llm.model": llm, "llm.base_url": base_url},
        **llm_limits(llm_timeout, llm_concurrency),
        **backend_overrides(backend, uri, collection, token, milvus_mode),
    )
    resources = Resources()
    try:
        require("mcp.server", "mcp", FEATURE)  # before the index is opened: the extra is the first thing to add
        pipeline = build_pipeline(settings, resources, need_index=data is None or index_dir is not None)
        _note_retrieval(pipeline.retriever)
        if data is None:
            collections = SingleIndex(lambda: pipeline)
        else:
            library = Library(
                pipeline,
                settings.data,
                default_index=settings.index,
                limits=settings.library,
                retrieval=settings.retrieval,
                ingest=False,
                read_only=True,
            )
            collections = LibraryCollections(lambda: library)
        asyncio.run(resources.run(serve_stdio(collections)))
    except USER_ERRORS as error:
        fail(str(error))
    except CollectionError as error:
        fail(error.message)
    finally:
        resources.close()


async def converse(pipeline, method: str, forced: str | None, system: str | None) -> None:
    """Read questions from stdin until /quit or its end; answer each in the conversation so far. A question
    that cannot be answered (too long, the endpoint failed) says why in one line and the conversation goes on."""
    from typedrag.conversation import Conversation
    from typedrag.errors import LLMError, UserError
    from typedrag.render import render_after_stream

    conversation = Conversation(pipeline, method=method, forced_type=forced, system=system)
    interactive = sys.stdin.isatty()
    if interactive:
        progress_console.print(f"typedrag chat: ask a question; {CHAT_HELP}.", style="dim")
    while True:
        if interactive:
            progress_console.print("you> ", style="bold", end="")
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            break
        line = line.strip()
        if not line:
            continue
        if line in ("/quit", "/exit"):
            break
        if line == "/reset":
            conversation.reset()
            console.print("(conversation cleared: the next question starts a new one)", style="dim")
            continue
        if line == "/trace":
            if conversation.last is None:
                console.print("(no answer yet)", style="dim")
            else:
                show_result(conversation.last, as_json=False, trace=True)
            continue
        if line.startswith("/"):
            console.print(f"unknown command {escape(for_terminal(line))}: {CHAT_HELP}", style="yellow")
            continue
        try:
            result = await conversation.ask(line, on_event=print_as_it_streams)
        except (UserError, LLMError) as error:
            errors.print(f"[red]error:[/red] {escape(for_terminal(str(error)))}")
            continue
        render_after_stream(console, result)
        console.print()


def print_as_it_streams(event: str, data: dict) -> None:
    """The answer's text on stdout as it is written; progress (type, plan, aspects) on stderr when it is
    a terminal, so scripts reading stderr see only errors."""
    from typedrag.render import progress_line

    if event in ("token", "restart"):  # a restart is part of what was printed: say so where the text is
        sys.stdout.write(for_terminal(data["text"] if event == "token" else f"\n\n[{data['reason']}]\n\n"))
        sys.stdout.flush()
        return
    line = progress_line(event, data) if progress_console.is_terminal else None
    if line is not None:
        progress_console.print(line)


def show_result(result, *, as_json: bool, trace: bool) -> None:
    from typedrag.render import render_answer, trace_tree

    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    elif trace:
        console.print(trace_tree(result))
    else:
        render_answer(console, result)


@app.command()
def classify(
    question: Annotated[Optional[str], typer.Argument(help="The question to classify (or use --file).")] = None,
    file: Annotated[
        Optional[Path], typer.Option("--file", "-f", help="One question per line (.txt) or JSONL {question, id?}.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="Output for --file: jsonl or csv.")] = "jsonl",
    classifier: ClassifierOpt = None,
    llm: LLMOpt = None,
    base_url: BaseUrlOpt = None,
) -> None:
    """Predict the NF-CATS type of a question, with the probability of each type."""
    from typedrag.batch import read_questions, write_predictions
    from typedrag.factory import Resources, build_chat_model, build_classifier

    if (question is None) == (file is None):
        fail("give either a QUESTION or --file FILE")
    if fmt not in ("jsonl", "csv"):
        fail("--format is jsonl or csv")
    settings = settings_from(classifier=classifier, **{"llm.model": llm, "llm.base_url": base_url})
    resources = Resources()
    try:
        chat_model = None if settings.llm.is_offline else build_chat_model(settings.llm, settings.cache_dir, resources)
        model = build_classifier(settings, chat_model)
        items = read_questions(file) if file is not None else [("1", question)]
        predictions = asyncio.run(resources.run(model.aclassify_many([q for _, q in items])))
    except USER_ERRORS as error:
        fail(str(error))
    finally:
        resources.close()
    if file is None:
        p = predictions[0]
        console.print(f"[bold]{p.label}[/bold] {p.confidence:.2f} ({escape(for_terminal(p.source))})")
        for label, probability in sorted(p.probabilities.items(), key=lambda kv: -kv[1]):
            console.print(f"  {label:<15} {probability:.3f}")
        return
    # CSV holds the questions as they are; on a terminal their control characters are shown, not obeyed.
    write_predictions(sys.stdout, items, predictions, fmt, shown=for_terminal if sys.stdout.isatty() else str)


def _register_lazy_commands() -> None:
    """Commands whose modules keep heavy imports (matplotlib, fastapi) inside the function bodies."""
    from typedrag.accounts import users_app
    from typedrag.evaluation.command import eval_app
    from typedrag.server.command import serve_command

    app.add_typer(eval_app(), name="eval")
    app.add_typer(
        users_app(),
        name="users",
        help="Accounts of `typedrag serve`: users, roles, API keys and grants per collection.",
    )
    app.command("serve", help=serve_command.__doc__)(serve_command)


_register_lazy_commands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
