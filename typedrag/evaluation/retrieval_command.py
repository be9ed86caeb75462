"""`typedrag eval retrieval`: the command line of typedrag.evaluation.retrieval (registered by typedrag.cli)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from typedrag.commands import BackendOpt, CollectionOpt, IndexOpt, UriOpt


def retrieval_command(
    questions: Annotated[
        Path,
        typer.Option(
            "--questions",
            "-q",
            help="JSONL: {question, id?, type?, relevant?: ids or groups of ids, key_terms?: groups of terms}.",
        ),
    ],
    index_dir: IndexOpt = None,
    retrieval: Annotated[
        Optional[str],
        typer.Option(
            "--retrieval",
            help="Modes to compare, comma-separated: bm25,dense,hybrid (default: every one the index supports).",
        ),
    ] = None,
    k: Annotated[int, typer.Option("-k", min=1, max=100, help="Passages per question that count.")] = 5,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="The HTML report (a .json beside it holds every figure).")
    ] = Path("retrieval-report.html"),
    judge: Annotated[
        Optional[str], typer.Option("--judge", help="An LLM grading each passage (model name at --judge-base-url).")
    ] = None,
    judge_base_url: Annotated[
        Optional[str], typer.Option("--judge-base-url", help="The judge's OpenAI-compatible endpoint.")
    ] = None,
    backend: BackendOpt = None,
    uri: UriOpt = None,
    collection: CollectionOpt = None,
) -> None:
    """Measure retrieval on your own questions: recall@k, MRR and nDCG with relevant ids, key terms found without,
    per retrieval mode and question type; a table here and an HTML report."""
    import asyncio

    from rich.console import Console

    from typedrag.commands import USER_ERRORS, backend_overrides, fail, settings_from
    from typedrag.config import RETRIEVAL_MODES
    from typedrag.evaluation.retrieval import (
        LLMRelevanceJudge,
        evaluate,
        print_table,
        read_questions,
        write_html,
        write_json,
    )
    from typedrag.index.open import open_configured_retriever

    settings = settings_from(
        index=index_dir,
        **{"judge.model": judge, "judge.base_url": judge_base_url},
        **backend_overrides(backend, uri, collection),
    )
    asked = [m.strip() for m in retrieval.split(",") if m.strip()] if retrieval else []
    for mode in asked:
        if mode not in RETRIEVAL_MODES:
            fail(f"unknown retrieval {mode!r}; choose from {', '.join(RETRIEVAL_MODES)}")
    from typedrag.factory import Resources, build_chat_model

    resources = Resources()
    try:
        items = read_questions(questions)
        default = open_configured_retriever(settings)
        modes = asked or (["bm25", "dense", "hybrid"] if default.retrieval != "bm25" else ["bm25"])
        retrievers = {}
        for mode in modes:
            retriever = (
                default
                if mode == default.retrieval
                else open_configured_retriever(settings.model_copy(update={"retrieval": mode}))
            )
            retrievers[retriever.name] = retriever
        from typedrag.classify import load_default_classifier

        classifier = load_default_classifier()
        report = evaluate(
            items,
            retrievers,
            k,
            classify=lambda texts: [str(p.label) for p in classifier.classify_many(texts)],
            index=str(settings.index if settings.backend == "tantivy" else settings.milvus_collection),
        )
        relevance = None
        if judge:
            relevance = LLMRelevanceJudge(build_chat_model(settings.judge, settings.cache_dir, resources))
            asyncio.run(resources.run(relevance.grade_report(report)))
    except USER_ERRORS as error:
        fail(str(error))
    finally:
        resources.close()
    console = Console()
    print_table(report, console)
    write_html(report, out)
    write_json(report, out.with_suffix(".json"))
    if relevance is not None and relevance.failures:
        console.print(f"judge: {relevance.failures} replies unusable, counted as grade 0", style="yellow")
    console.print(f"report: {out} (figures: {out.with_suffix('.json')})", markup=False)
