"""The public API: docs/python-api.md's Python block runs as printed, and a route added from outside the package answers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, Field

import typedrag
from typedrag import ListRetriever, OfflineEngine, Pipeline, PlanTask, Prompt, WriteTask, default_routes
from typedrag.steps import Number, Plan, Search, Write
from typedrag.testing import ScriptedChatModel
from typedrag.engines.llm_engine import LLMEngine

DOC = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"


def test_the_python_api_page_block_runs_as_printed(tmp_path):
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)  # the page's first block
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "REASON -> reason answered by offline-extractive" in done.stdout
    assert "iceberg" in done.stdout and "Typed-RAG" in done.stdout
    assert list(tmp_path.iterdir()) == []  # the evaluation wrote into a temporary folder, not the cwd


class Haiku(BaseModel):
    """A toy plan: the three images a haiku about the question would use."""

    images: list[str] = Field(min_length=3, max_length=3, description="three concrete images")


PLAN_HAIKU = Prompt("plan_haiku", "You plan haiku. Reply with JSON only.", "Question: {question}\n{reply_format}")
WRITE_HAIKU = Prompt(
    "write_haiku", "You write haiku from sources.", "Sources:\n{sources}\nImages: {images}\nQuestion: {question}"
)


class HaikuStrategy:
    """A route defined entirely outside the package: its own schema, prompts, offline planner and flow()."""

    name = "haiku"
    plan = PlanTask("plan:haiku", PLAN_HAIKU, Haiku, offline=lambda q: Haiku(images=q.split()[:3]))

    def flow(self, question, depths):
        plan = yield Plan(self.plan, question)
        [hits] = yield Search([question], 2)
        sources = yield Number(hits)
        task = WriteTask(
            role="answer:haiku",
            prompt=WRITE_HAIKU,
            question=question,
            extra={"images": ", ".join(plan.images)},
            sources=sources,
        )
        written = yield Write(task, final=True)
        return typedrag.StrategyOutput(answer=written.text, plan=plan)


def test_a_route_added_from_outside_answers_with_its_own_schema_and_prompts():
    texts = ["Autumn leaves fall slowly over the quiet pond.", "Tax law changed in 1986."]
    routes = {**default_routes(), "HAIKU": HaikuStrategy()}

    offline = Pipeline(OfflineEngine(), ListRetriever(texts), routes=routes)
    result = typedrag_run(offline.answer("autumn leaves pond", forced_type="haiku"))
    assert result.strategy == "haiku" and result.plan == {"images": ["autumn", "leaves", "pond"]}
    assert "Autumn leaves fall slowly" in result.answer and result.citations[0].source_numbers == [1]

    model = ScriptedChatModel(
        lambda call: '{"images": ["leaf", "pond", "mist"]}' if call.schema else "Leaves drift down [1]."
    )
    llm = Pipeline(LLMEngine(model), ListRetriever(texts), routes=routes)
    result = typedrag_run(llm.answer("autumn leaves pond", forced_type="HAIKU"))
    assert result.answer == "Leaves drift down [1]." and result.plan == {"images": ["leaf", "pond", "mist"]}
    plan_call, write_call = model.calls
    assert plan_call.schema is Haiku and '"images": ["...", "..."]' in plan_call.user  # reply format from the schema
    assert "Images: leaf, pond, mist" in write_call.user and "\n[1] Autumn leaves fall" in write_call.user


def typedrag_run(coroutine):
    import asyncio

    return asyncio.run(coroutine)


def test_public_names_import_and_every_public_class_has_a_docstring():
    import ast

    for name in typedrag.__all__:
        getattr(typedrag, name)  # every exported name imports
    missing = []
    for path in sorted(Path(typedrag.__file__).parent.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and not ast.get_docstring(node):
                missing.append(f"{path.name}:{node.name}")
    assert missing == []


def test_the_type_stub_names_every_lazy_export_from_its_module():
    """Type checkers read __init__.pyi (they cannot follow __getattr__): it must say what _EXPORTS does."""
    import ast

    stub = ast.parse((Path(typedrag.__file__).parent / "__init__.pyi").read_text(encoding="utf-8"))
    imported = {
        alias.asname: node.module for node in stub.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    assert imported == typedrag._EXPORTS
    assert all(
        alias.name == alias.asname for node in stub.body if isinstance(node, ast.ImportFrom) for alias in node.names
    )


def test_importing_the_pipeline_does_not_import_tantivy():
    code = "import sys, typedrag.pipeline, typedrag; typedrag.Pipeline; print('tantivy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_a_route_without_an_offline_recipe_is_written_offline_by_the_generic_one():
    """Issue 24: a route added from outside needs no edit to typedrag to run offline: its writing step,
    with no recipe of its own and a role the engine does not know, quotes the passages nearest the question."""

    class Plain:
        name = "plain"
        plan = PlanTask("plan:plain", PLAN_HAIKU, Haiku, offline=lambda q: Haiku(images=q.split()[:3]))

        def flow(self, question, depths):
            yield Plan(self.plan, question)
            [hits] = yield Search([question], 2)
            sources = yield Number(hits)
            task = WriteTask(
                role="answer:plain", prompt=WRITE_HAIKU, question=question, extra={"images": ""}, sources=sources
            )
            written = yield Write(task, final=True)
            return typedrag.StrategyOutput(answer=written.text)

    texts = ["Autumn leaves fall slowly over the quiet pond.", "Tax law changed in 1986."]
    pipeline = Pipeline(OfflineEngine(), ListRetriever(texts), routes={**default_routes(), "PLAIN": Plain()})
    result = typedrag_run(pipeline.answer("autumn leaves pond", forced_type="plain"))
    assert result.strategy == "plain" and result.answer.startswith("Autumn leaves fall slowly over the quiet pond. [1]")
