"""`typedrag eval`: the evaluation harness on the command line (registered by typedrag.cli).

- `typedrag eval`: LINKAGE against graded references (Wiki-NFQA's, or your own), MRR and MPR per method.
- `typedrag eval compare`: two methods or configurations on your questions, judged blind pairwise.
- `typedrag eval questions`: an LLM writes questions of each type from your documents, to start with.
- `typedrag eval export-feedback`: the questions users rated on `typedrag serve`, as a question file for both.

Top-level imports stay light so `typedrag --help` does not load the index, models or matplotlib.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from typedrag.commands import (
    BackendOpt,
    ClassifierOpt,
    CollectionOpt,
    IndexOpt,
    KnowledgeOpt,
    LLMConcurrencyOpt,
    LLMTimeoutOpt,
    RetrievalOpt,
    UriOpt,
)

from typedrag.evaluation.linkage import RankConvention

# Where `eval questions` writes, and what `eval` and `eval compare` read unless told otherwise.
DEFAULT_QUESTIONS = Path("typedrag-questions.jsonl")
NO_DATASET = (
    "no dataset at {path}: give --dataset with your questions and graded reference answers (JSONL rows "
    "{{question, id?, type?, references: [{{text, grade}}]}}) or a folder of Wiki-NFQA files. Questions but no "
    "references? `typedrag eval compare QUESTIONS` compares two methods with a blind pairwise judge; no questions "
    "yet? `typedrag eval questions DOCS` writes some from your documents"
)


def eval_command(
    ctx: typer.Context,
    dataset: Annotated[
        Path,
        typer.Option(
            help="Your JSONL rows {question, id?, type?, references: [{text, grade}]}, or Wiki-NFQA .jsonl files (a file or a folder of them)."
        ),
    ] = DEFAULT_QUESTIONS,
    methods: Annotated[
        str, typer.Option(help="Comma-separated methods: llm (LLM only), rag, typed (Typed-RAG).")
    ] = "llm,rag,typed",
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory; rerun the same command to resume.")] = Path(
        "typedrag-eval"
    ),
    index_dir: IndexOpt = None,
    llm: Annotated[
        Optional[str], typer.Option("--llm", help="Generator: 'offline', 'local:...', or a model name at --base-url.")
    ] = None,
    base_url: Annotated[
        Optional[str], typer.Option("--base-url", help="Generator's OpenAI-compatible endpoint.")
    ] = None,
    judge: Annotated[
        Optional[str],
        typer.Option("--judge", help="Judge model; 'offline' (default) uses the embedding-similarity proxy."),
    ] = None,
    judge_base_url: Annotated[
        Optional[str], typer.Option("--judge-base-url", help="Judge's OpenAI-compatible endpoint.")
    ] = None,
    limit: Annotated[
        Optional[int],
        typer.Option(min=1, help="Evaluate N questions: the first N of a seeded shuffle stratified over source files."),
    ] = None,
    types: Annotated[
        Optional[str],
        typer.Option(help="Only questions of these predicted types, comma-separated, e.g. reason,debate."),
    ] = None,
    rounds: Annotated[int, typer.Option(min=1, max=15, help="Judge rounds per answer; the rank is their median.")] = 3,
    rank_convention: Annotated[
        RankConvention, typer.Option(help="linkage: worse than all n references ranks n+1; typed-rag: ranks n.")
    ] = RankConvention.LINKAGE,
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="Questions in flight at once.")] = 4,
    seed: Annotated[int, typer.Option(help="Seed of the --limit sample.")] = 0,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    assume_non_factoid: Annotated[
        bool,
        typer.Option(
            help="Route every question to the likeliest non-factoid type (Wiki-NFQA is non-factoid by construction, as the paper assumed)."
        ),
    ] = True,
    classifier: ClassifierOpt = None,
    backend: BackendOpt = None,
    uri: UriOpt = None,
    collection: CollectionOpt = None,
    milvus_mode: RetrievalOpt = None,
    llm_timeout: LLMTimeoutOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
    knowledge: KnowledgeOpt = None,
) -> None:
    """Evaluate methods on graded references (yours, or Wiki-NFQA's) with LINKAGE: MRR and MPR per method, type and
    source. Subcommands: `compare` (two methods on your questions, judged blind pairwise), `questions`, `retrieval` and
    `export-feedback`."""
    if ctx.invoked_subcommand is not None:
        return  # `typedrag eval compare ...`: the group's own options are not used
    import asyncio

    from typedrag.commands import USER_ERRORS, backend_overrides, fail, llm_limits, settings_from
    from typedrag.evaluation.runner import EvalOptions, aevaluate
    from typedrag.evaluation.judges import LLMJudge, ProxyJudge
    from typedrag.factory import Resources, build_chat_model, build_pipeline

    if judge_base_url and not judge:
        fail("--judge-base-url needs --judge MODEL (the judge's model name at that endpoint)")
    if not dataset.exists():
        fail(NO_DATASET.format(path=dataset))
    settings = settings_from(
        index=index_dir,
        assume_non_factoid=assume_non_factoid,
        classifier=classifier,
        knowledge=knowledge,
        **{"llm.model": llm, "llm.base_url": base_url, "judge.model": judge, "judge.base_url": judge_base_url},
        **llm_limits(llm_timeout, llm_concurrency),
        **backend_overrides(backend, uri, collection, mode=milvus_mode),  # the token only from env/config
    )
    chosen = tuple(m.strip() for m in methods.split(",") if m.strip())
    options = EvalOptions(
        limit=limit,
        types=tuple(t.strip() for t in types.split(",") if t.strip()) if types else (),
        rounds=rounds,
        convention=rank_convention,
        concurrency=concurrency,
        seed=seed,
        show_progress=progress,
    )
    resources = Resources()
    try:
        pipeline = build_pipeline(settings, resources, need_index=any(m != "llm" for m in chosen))
        # The proxy when no judge model is configured (`offline`), else an LLM judge on that endpoint.
        judging = (
            ProxyJudge()
            if settings.judge.is_offline
            else LLMJudge(build_chat_model(settings.judge, settings.cache_dir, resources))
        )
        run = aevaluate(dataset, pipeline, methods=chosen, judge=judging, out=out, options=options)
        outcome = asyncio.run(resources.run(run))
    except USER_ERRORS as error:
        fail(str(error))
    finally:
        resources.close()
    from typedrag.text import for_terminal

    typer.echo(for_terminal(outcome.files["markdown"].read_text(encoding="utf-8")))
    for kind, path in outcome.files.items():
        typer.echo(for_terminal(f"{kind}: {path}"))
    if "chart" not in outcome.files:
        typer.echo("chart: not drawn (why: see the notes above, or chart_missing in the summary file)")


# What a system spec may set, as `METHOD,key=value,...`, and the setting each key overrides.
SIDE_KEYS = {
    "llm": "llm.model",
    "base_url": "llm.base_url",
    "index": "index",
    "top_k": "top_k",
    "aspect_k": "aspect_k",
    "classifier": "classifier",
    "backend": "backend",
    "collection": "milvus_collection",
    "milvus_mode": "milvus_mode",
    "expand": "expand_queries",
    "knowledge": "knowledge",
}
SideOpt = (
    "METHOD[,key=value...], e.g. rag, typed, or typed,llm=MODEL,top_k=8,name=deep (keys: name, "
    + ", ".join(SIDE_KEYS)
    + ")"
)


def parse_side(spec: str) -> tuple[str, str | None, dict[str, str]]:
    """(method, name or None, settings overrides) of a system spec such as `typed,top_k=8,name=deep`; ValueError
    says what is wrong in words a user can act on."""
    method, *pairs = [part.strip() for part in spec.split(",")]
    if method not in ("typed", "rag", "llm"):
        raise ValueError(f"{spec!r}: a system starts with its method, typed, rag or llm (got {method!r})")
    name, overrides = None, {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not value.strip():
            raise ValueError(f"{spec!r}: {pair!r} is not key=value")
        if key == "name":
            name = value.strip()
        elif key in SIDE_KEYS:
            overrides[SIDE_KEYS[key]] = value.strip()
        else:
            raise ValueError(f"{spec!r}: unknown key {key!r}; choose from name, {', '.join(SIDE_KEYS)}")
    return method, name, overrides


def side_names(
    a: tuple[str, str | None, dict], b: tuple[str, str | None, dict], specs: tuple[str, str]
) -> tuple[str, str]:
    """The systems' names: given ones, else the method when the methods differ, else the spec as written."""
    if a[:1] == b[:1] and a[2] == b[2]:
        raise ValueError(f"--a and --b are the same system ({specs[0]!r}); compare two methods or two configurations")
    if a[0] != b[0]:
        defaults = (a[0], b[0])
    else:
        defaults = specs
    names = (a[1] or defaults[0], b[1] or defaults[1])
    if names[0] == names[1]:
        raise ValueError(f"both systems are named {names[0]!r}; give one another name with name=...")
    return names


def compare_command(
    questions: Annotated[
        Path,
        typer.Argument(
            help="Your questions: JSONL rows {question, id?, type?, references?} or a .txt file, one per line."
        ),
    ] = DEFAULT_QUESTIONS,
    a: Annotated[str, typer.Option("--a", help=f"System a. {SideOpt}.")] = "rag",
    b: Annotated[str, typer.Option("--b", help=f"System b. {SideOpt}.")] = "typed",
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory; rerun the same command to resume.")] = Path(
        "typedrag-compare"
    ),
    index_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--index", "-i", help="Index directory of both systems (default: ./typedrag-index or TYPEDRAG_INDEX)."
        ),
    ] = None,
    llm: Annotated[
        Optional[str],
        typer.Option("--llm", help="Generator of both systems: 'offline', 'local:...', or a model name at --base-url."),
    ] = None,
    base_url: Annotated[
        Optional[str], typer.Option("--base-url", help="Generator's OpenAI-compatible endpoint.")
    ] = None,
    judge: Annotated[
        Optional[str], typer.Option("--judge", help="Judge model (default: the generator's model when it is an LLM).")
    ] = None,
    judge_base_url: Annotated[
        Optional[str], typer.Option("--judge-base-url", help="Judge's OpenAI-compatible endpoint.")
    ] = None,
    linkage_rounds: Annotated[
        int,
        typer.Option(min=0, max=15, help="LINKAGE rounds per answer for questions that carry references (0: none)."),
    ] = 1,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Compare on the first N questions of the file.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="Questions in flight at once.")] = 4,
    seed: Annotated[int, typer.Option(help="Seed of which system each question shows the judge first.")] = 0,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    classifier: ClassifierOpt = None,
    top_k: Annotated[Optional[int], typer.Option(help="Passages per generation, both systems.")] = None,
    llm_timeout: LLMTimeoutOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
) -> None:
    """Compare two methods or configurations on your questions: both answer, a blind LLM judge reads every pair in
    both orders, and the report (terminal, report.html) gives wins, ties, answering and noise sentences per question
    type with a 95% interval. Example: typedrag eval compare my-questions.jsonl --a rag --b typed --llm MODEL."""
    import asyncio

    from typedrag.commands import USER_ERRORS, fail, llm_limits, settings_from
    from typedrag.evaluation.compare import CompareOptions, Side, acompare
    from typedrag.evaluation.judges import LLMJudge
    from typedrag.evaluation.pairwise import PairwiseJudge
    from typedrag.factory import Resources, build_chat_model, build_pipeline
    from typedrag.text import for_terminal

    if judge_base_url and not judge:
        fail("--judge-base-url needs --judge MODEL (the judge's model name at that endpoint)")
    try:
        specs = (parse_side(a), parse_side(b))
        names = side_names(*specs, (a, b))
    except ValueError as error:
        fail(str(error))
    shared = {
        "index": index_dir,
        "classifier": classifier,
        "top_k": top_k,
        "llm.model": llm,
        "llm.base_url": base_url,
        "judge.model": judge,
        "judge.base_url": judge_base_url,
        **llm_limits(llm_timeout, llm_concurrency),
    }
    settings = [settings_from(**{**shared, **overrides}) for _, _, overrides in specs]
    judge_config = next(
        (s.judge for s in settings if not s.judge.is_offline),
        next((s.llm for s in settings if not s.llm.is_offline), None),
    )
    resources = Resources()
    try:
        built: dict[str, object] = {}
        sides = []
        for (method, _, _), name, spec, side_settings in zip(specs, names, (a, b), settings):
            key = side_settings.model_dump_json()
            if key not in built:
                built[key] = build_pipeline(
                    side_settings, resources, need_index=method != "llm", need_classifier=method == "typed"
                )
            pipeline = built[key]
            if method == "llm" and not pipeline.engine.generative:
                fail(f"system {name!r} is LLM-only, which needs a generator: give --llm (or llm=... in its spec)")
            sides.append(Side(name, pipeline, method, spec))
        chat = build_chat_model(judge_config, settings[0].cache_dir, resources) if judge_config is not None else None
        options = CompareOptions(
            limit=limit, concurrency=concurrency, seed=seed, linkage_rounds=linkage_rounds, show_progress=progress
        )
        run = acompare(
            questions,
            *sides,
            out=out,
            options=options,
            judge=PairwiseJudge(chat) if chat is not None else None,
            linkage_judge=LLMJudge(chat) if chat is not None and linkage_rounds else None,
        )
        outcome = asyncio.run(resources.run(run))
    except USER_ERRORS as error:
        fail(str(error))
    finally:
        resources.close()
    show_comparison(
        outcome.summary,
        outcome.files,
        judge_is_generator=judge is None
        and judge_config is not None
        and not any(not s.judge.is_offline for s in settings),
    )
    if judge_config is None:
        typer.echo(
            for_terminal(
                "no judge: " + "without an LLM (--judge MODEL, or --llm) typedrag cannot say which answer "
                "is better; both systems answered, and report.html shows where they differ"
            ),
            err=True,
        )


def show_comparison(summary: dict, files: dict, judge_is_generator: bool = False) -> None:
    """The verdict, the table by type and where the files are, on the terminal."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from typedrag.evaluation.compare_report import terminal_rows, verdict_line
    from typedrag.text import for_terminal

    console = Console(soft_wrap=True)
    header, rows = terminal_rows(summary)
    title = f"{summary['a']} vs {summary['b']} by question type ({summary['type_source']})"
    if summary["judge"] is not None:
        title += f": wins of each, ties; {summary['b']}'s share of the decided with its 95% interval; satisfied and noise, {summary['a']} / {summary['b']}"
    # Types and method names come from the user's files: Text, never markup ("how-to [/]" ended the command before).
    table = Table(title=Text(for_terminal(title)), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for number, column in enumerate(header):
        table.add_column(
            Text(for_terminal(column)), overflow="fold", no_wrap=number > 0, min_width=len(column) if number else None
        )
    for row in rows:
        table.add_row(
            *(Text(for_terminal(cell.lower() if cell.isupper() else cell)) for cell in row),
            style="bold" if row[0] == "all" else None,
        )
    console.print(table)
    console.print(for_terminal(verdict_line(summary)), markup=False)
    if judge_is_generator:
        console.print(
            "judge: the generator's own model; give --judge MODEL for an independent one", markup=False, style="dim"
        )
    for kind, path in files.items():
        console.print(for_terminal(f"{kind}: {path}"), markup=False)


def eval_app() -> typer.Typer:
    """`typedrag eval` as a group: LINKAGE when called alone, `compare`, `questions` and `retrieval` beneath it."""
    from typedrag.evaluation.feedback import export_feedback_command
    from typedrag.evaluation.retrieval_command import retrieval_command

    group = typer.Typer(no_args_is_help=False, add_completion=False)
    group.callback(invoke_without_command=True, help=eval_command.__doc__)(eval_command)
    group.command("compare", help=compare_command.__doc__)(compare_command)
    group.command("questions", help=questions_command.__doc__)(questions_command)
    group.command("retrieval", help=retrieval_command.__doc__)(retrieval_command)
    group.command("export-feedback", help=export_feedback_command.__doc__)(export_feedback_command)
    return group


def questions_command(
    sources: Annotated[list[Path], typer.Argument(help="Your documents: files or folders (what you indexed).")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="JSONL file the questions are added to; rerun to top it up.")
    ] = DEFAULT_QUESTIONS,
    per_type: Annotated[int, typer.Option(min=1, max=50, help="Questions of each type the file should hold.")] = 4,
    types: Annotated[
        Optional[str],
        typer.Option(
            help="Only these types, comma-separated, e.g. reason,debate (default: the six non-factoid types)."
        ),
    ] = None,
    llm: Annotated[
        Optional[str], typer.Option("--llm", help="The model that writes: a model name at --base-url, or 'local:...'.")
    ] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="Its OpenAI-compatible endpoint.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the passages drawn from your documents.")] = 0,
    llm_timeout: LLMTimeoutOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
) -> None:
    """Write questions of each type from your documents with an LLM (validated, near-duplicates dropped), to start
    `typedrag eval compare` without a question set of your own. Read them before you rely on them."""
    import asyncio

    from typedrag.commands import USER_ERRORS, fail, llm_limits, settings_from
    from typedrag.evaluation.question_writer import KINDS, write_questions
    from typedrag.factory import Resources, build_chat_model
    from typedrag.text import for_terminal

    settings = settings_from(**{"llm.model": llm, "llm.base_url": base_url}, **llm_limits(llm_timeout, llm_concurrency))
    if settings.llm.is_offline:
        fail("writing questions needs an LLM: give --llm MODEL and --base-url URL (or set them in typedrag.toml)")
    kinds = [t.strip().upper().replace("_", "-").replace(" ", "-") for t in types.split(",")] if types else list(KINDS)
    if "EVIDENCE" in kinds:
        kinds[kinds.index("EVIDENCE")] = "EVIDENCE-BASED"
    resources = Resources()
    try:
        from typedrag.classify import load_default_classifier

        model = build_chat_model(settings.llm, settings.cache_dir, resources)
        run = write_questions(
            model,
            sources,
            out,
            kinds=kinds,
            per_type=per_type,
            seed=seed,
            classify=load_default_classifier().aclassify_many,
        )
        report = asyncio.run(resources.run(run))
    except USER_ERRORS as error:
        fail(str(error))
    finally:
        resources.close()
    added = report.added
    agree = sum(row.get("classified_as") == row["type"] for row in added)
    typer.echo(
        for_terminal(
            f"{len(added)} questions added to {out} ({report.kept_before} were there)"
            + (f"; the shipped classifier gives {agree} of them the type they were written for" if added else "")
        )
    )
    for reason, count in report.dropped.items():
        typer.echo(for_terminal(f"dropped {count}: {reason}"))
    for error in report.errors:
        typer.echo(for_terminal(f"not written: {error} (rerun to ask again)"), err=True)
