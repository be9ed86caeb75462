"""The index's layout (issue 54, item 1): one folder per backend in a table, the optional members of a retriever
declared in the protocol rather than probed, and no private name crossing modules of index/."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import typedrag
from typedrag import ListRetriever, OfflineEngine, Pipeline
from typedrag.abstain import unmentioned_names
from typedrag.config import Settings, load_settings
from typedrag.index.base import Adapted, Description, Retriever, SyncOptions
from typedrag.index.open import BACKENDS, backend_for, open_configured_retriever

INDEX = Path(typedrag.__file__).parent / "index"


class ThreeMembers:
    """A user's retriever as the docs describe it: a name, `search` and `search_many`, nothing more."""

    name = "mine"

    def search(self, query, k=10):
        return ListRetriever(["Comets have tails of gas and dust."]).search(query, k)

    def search_many(self, queries, k=10):
        return [self.search(q, k) for q in queries]


def test_every_backend_setting_has_its_row_and_each_row_is_a_backend(tmp_path):
    assert set(BACKENDS) == set(get_args(Settings.model_fields["backend"].annotation))
    for name in BACKENDS:
        backend = backend_for(Settings(backend=name))
        assert backend.name == name and callable(backend.open) and callable(backend.sync)


def test_the_tantivy_row_opens_and_describes_the_index(small_index):
    retriever = open_configured_retriever(load_settings({"index": str(small_index), "retrieval": "bm25"}))
    described = retriever.describe()
    assert isinstance(retriever, Retriever) and described.name == retriever.name == "tantivy-bm25"
    assert described.index_dir == small_index and described.reloads == 0 and described.notice == retriever.notice
    assert described.manifest["counts"]["documents"] == retriever.manifest["counts"]["documents"] > 0
    assert retriever.mentions("crocodile") is True and retriever.mentions("zyzzyva") is False


def test_a_users_retriever_with_three_members_gets_the_defaults_and_typedrags_own_are_kept_as_they_are():
    pipeline = Pipeline(OfflineEngine(), ThreeMembers())
    assert isinstance(pipeline.retriever, Adapted) and pipeline.retriever.name == "mine"
    assert pipeline.retriever.describe() == Description("mine")
    assert pipeline.retriever.mentions("Zyzzyva") is None and pipeline.retriever.passage("x#0") is None
    assert (
        unmentioned_names("Why does the Zyzzyva have a tail?", pipeline.retriever) == []
    )  # it cannot say: no abstention
    assert pipeline.retriever.search("comet tails", 1)[0].passage.text.startswith("Comets")
    own = ListRetriever(["Comets have tails of gas and dust."])
    assert Pipeline(OfflineEngine(), own).retriever is own and Pipeline(OfflineEngine(), None).retriever is None
    assert unmentioned_names("Why does the Zyzzyva have a tail?", own) == ["Zyzzyva"]


def test_a_users_retriever_keeps_the_optional_members_it_implements():
    class WithMentions(ThreeMembers):
        def mentions(self, word):
            return word.casefold() in {"comet", "comets"}

    adapted = Pipeline(OfflineEngine(), WithMentions()).retriever
    assert isinstance(adapted, Adapted) and adapted.describe() == Description("mine")
    assert unmentioned_names("Why does the Zyzzyva have a tail?", adapted) == ["Zyzzyva"]  # as before: its own is asked


def test_sync_options_default_as_build_configured_index_did():
    options = SyncOptions(passage_words=100, strict=False)
    assert (options.retrieval, options.embedder, options.rebuild, options.remove_missing, options.show_progress) == (
        None,
        None,
        False,
        True,
        True,
    )


def test_no_module_of_index_imports_a_private_name_of_another_or_grows_past_its_budget():
    crossing, long = [], []
    for path in sorted(INDEX.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 470:  # the "about 450", counted as ruff formats it (120 columns)
            long.append(path.name)
        tree = ast.parse(text)
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("typedrag.index"):
                crossing += [f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
                modules |= {a.asname or a.name for a in node.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                if node.attr.startswith("_") and not node.attr.startswith("__"):
                    crossing.append(f"{path.name}: {node.value.id}.{node.attr}")
    assert crossing == [] and long == []
