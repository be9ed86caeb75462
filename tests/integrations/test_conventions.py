"""The integrations stay optional: `import typedrag` loads no framework, a missing extra is one line naming
it, nothing in typedrag depends on the integrations, and only extras bring the frameworks."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

from typedrag.extras import MissingExtra

ROOT = Path(__file__).resolve().parents[2]
MODULES = {
    "langchain": ("langchain_core", "langchain"),
    "llamaindex": ("llama_index", "llamaindex"),
    "haystack": ("haystack", "haystack"),
}
FRAMEWORK_PACKAGES = ("langchain", "llama-index", "llama_index", "haystack")


@pytest.mark.parametrize(
    "statement",
    [
        "import typedrag",
        "import typedrag.integrations",
        "import typedrag.integrations.common",
        "from typedrag import Pipeline, OfflineEngine, ListRetriever",
    ],
)
def test_importing_typedrag_loads_no_framework(statement):
    check = f"{statement}; import sys; loaded = sorted({{m.split('.')[0] for m in sys.modules}} & {{'langchain_core', 'llama_index', 'haystack'}}); assert not loaded, loaded"
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("module", list(MODULES))
def test_a_missing_framework_is_one_line_naming_its_extra(module, monkeypatch):
    framework, extra = MODULES[module]
    monkeypatch.setitem(sys.modules, framework, None)  # as if not installed
    monkeypatch.delitem(sys.modules, f"{framework}.core", raising=False)
    monkeypatch.delitem(sys.modules, f"typedrag.integrations.{module}", raising=False)
    with pytest.raises(MissingExtra) as caught:
        importlib.import_module(f"typedrag.integrations.{module}")
    message = str(caught.value)
    assert "\n" not in message and f"pip install 'typedrag[{extra}]'" in message and caught.value.extra == extra


def test_nothing_in_typedrag_imports_the_integrations():
    graph = grimp.build_graph("typedrag")
    importers = {
        m
        for target in graph.find_children("typedrag.integrations") | {"typedrag.integrations"}
        for m in graph.find_modules_that_directly_import(target)
    }
    assert {m for m in importers if not m.startswith("typedrag.integrations")} == set()


def test_the_frameworks_come_only_with_their_extras_pinned_to_a_major_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.lower().startswith(FRAMEWORK_PACKAGES)]
    extras = project["optional-dependencies"]
    for extra in MODULES:
        (requirement,) = extras[extra]
        assert ">=" in requirement and ",<" in requirement, requirement
        assert requirement in extras["test"]  # the tests run against what the extra installs
