"""`typedrag eval`: the evaluation harness on the command line (registered by typedrag.cli).

Top-level imports stay light so `typedrag --help` does not load the index, models or matplotlib.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from typedrag.commands import LLMConcurrencyOpt, LLMTimeoutOpt

from typedrag.evaluation.linkage import RankConvention

DEFAULT_DATASET = Path("../shared/data/wiki-nfqa")


def eval_command(
    dataset: Annotated[
        Path, typer.Option(help="Wiki-NFQA .jsonl file or directory of them, or generic JSONL rows {question, id?, type?, references: [{text, grade}]}.")
    ] = DEFAULT_DATASET,
    methods: Annotated[str, typer.Option(help="Comma-separated methods: llm (LLM only), rag, typed (Typed-RAG).")] = "llm,rag,typed",
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory; rerun the same command to resume.")] = Path("typedrag-eval"),
    index_dir: Annotated[Optional[Path], typer.Option("--index", "-i", help="Index directory (default: ./typedrag-index or TYPEDRAG_INDEX).")] = None,
    llm: Annotated[Optional[str], typer.Option("--llm", help="Generator: 'offline', 'local:...', or a model name at --base-url.")] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="Generator's OpenAI-compatible endpoint.")] = None,
    judge: Annotated[Optional[str], typer.Option("--judge", help="Judge model; 'offline' (default) uses the embedding-similarity proxy.")] = None,
    judge_base_url: Annotated[Optional[str], typer.Option("--judge-base-url", help="Judge's OpenAI-compatible endpoint.")] = None,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Evaluate N questions: the first N of a seeded shuffle stratified over source files.")] = None,
    types: Annotated[Optional[str], typer.Option(help="Only questions of these predicted types, comma-separated, e.g. reason,debate.")] = None,
    rounds: Annotated[int, typer.Option(min=1, max=15, help="Judge rounds per answer; the rank is their median.")] = 3,
    rank_convention: Annotated[RankConvention, typer.Option(help="linkage: worse than all n references ranks n+1; typed-rag: ranks n.")] = RankConvention.LINKAGE,
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="Questions in flight at once.")] = 4,
    seed: Annotated[int, typer.Option(help="Seed of the --limit sample.")] = 0,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    assume_non_factoid: Annotated[
        bool,
        typer.Option(help="Route every question to the likeliest non-factoid type (Wiki-NFQA is non-factoid by construction, as the paper assumed)."),
    ] = True,
    classifier: Annotated[Optional[str], typer.Option("--classifier", help="shipped (default), llm or auto.")] = None,
    backend: Annotated[Optional[str], typer.Option("--backend", help="tantivy (embedded, default) or milvus (a Milvus server at --uri).")] = None,
    uri: Annotated[Optional[str], typer.Option("--uri", help="Milvus URI, e.g. http://127.0.0.1:19530 (or TYPEDRAG_MILVUS_URI).")] = None,
    collection: Annotated[Optional[str], typer.Option("--collection", help="Milvus collection (default: typedrag).")] = None,
    milvus_mode: Annotated[Optional[str], typer.Option("--retrieval", "--milvus-mode", help="Search with bm25, dense or hybrid (both fused); default: as the index was built.")] = None,
    llm_timeout: LLMTimeoutOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
) -> None:
    """Evaluate methods on Wiki-NFQA (or your own data) with LINKAGE: MRR and MPR per method, type and source."""
    import asyncio

    from typedrag.commands import USER_ERRORS, backend_overrides, fail, llm_limits, settings_from
    from typedrag.evaluation.runner import EvalOptions, aevaluate
    from typedrag.evaluation.judges import LLMJudge, ProxyJudge
    from typedrag.factory import Resources, build_chat_model, build_pipeline

    if judge_base_url and not judge:
        fail("--judge-base-url needs --judge MODEL (the judge's model name at that endpoint)")
    settings = settings_from(
        index=index_dir,
        assume_non_factoid=assume_non_factoid,
        classifier=classifier,
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
        judging = ProxyJudge() if settings.judge.is_offline else LLMJudge(build_chat_model(settings.judge, settings.cache_dir, resources))
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
