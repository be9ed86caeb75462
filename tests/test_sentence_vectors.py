"""Sentence vectors kept with the index (typedrag.index.sentences): an answer takes its passages' sentence vectors
from the index, gets the same answer as when it embeds them, and an index built before them is filled as answered."""

from __future__ import annotations

import asyncio
import json
import threading

import numpy as np
import pytest

from typedrag import embed
from typedrag.config import ConfigError, load_settings
from typedrag.factory import Resources, build_pipeline
from typedrag.index import build_index, open_retriever, sentences
from typedrag.index.manifest import MANIFEST, is_typedrag_index
from typedrag.index.tantivy import ENGINE, sync_index

DOCS = {
    "tides.txt": "Tides are the rise and fall of sea levels. They are caused by the gravity of the Moon and the Sun. "
    "Spring tides happen when the Sun and the Moon line up.",
    "bread.txt": "Bread is baked from a dough of flour and water. The dough is leavened with yeast or a sourdough starter. "
    "Baking turns the starch of the flour into a crust.",
    "bees.txt": "Honey bees collect nectar from flowers. They store it as honey in the hive. A colony may hold tens of "
    "thousands of worker bees.",
}
QUESTION = "What causes the tides of the sea?"


def write_docs(folder, docs=DOCS):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def answer(index_dir, method="rag"):
    """(the answer's JSON without timings, texts MiniLM computed for it) in a fresh pipeline, cache emptied."""
    embedder = embed.default_embedder()
    embedder._cache.clear()
    embed._KNOWN.clear()  # as in a new process: only this index's store (registered as the pipeline opens it)
    before = embedder.computed
    pipeline = build_pipeline(load_settings({"index": str(index_dir)}), Resources())
    result = asyncio.run(pipeline.answer(QUESTION, method))
    data = result.model_dump(mode="json", exclude={"timings_ms"})
    return json.dumps(data, sort_keys=True, default=str), embedder.computed - before


def without_latencies(text: str) -> str:
    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in {"latency_ms", "queued_ms"}}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(json.loads(text)), sort_keys=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("sentences")
    summary = build_index([write_docs(root / "docs")], root / "index", show_progress=False)
    return root, summary


def test_a_build_with_minilm_vectors_keeps_every_sentence_the_answer_embeds(built):
    root, summary = built
    manifest = json.loads((root / "index" / MANIFEST).read_text())
    assert manifest["sentences"]["rows"] == summary.sentences > 9 and summary.sentences_embedded == summary.sentences
    assert sentences.SENTENCES in manifest["files"]
    _, computed = answer(root / "index")
    assert computed == 1  # the question alone: every sentence, title and heading came from the index


def test_the_answer_is_the_same_with_the_kept_vectors_as_without(built, monkeypatch):
    root, _ = built
    with_store, _ = answer(root / "index")
    monkeypatch.setattr(sentences.SentenceStore, "lookup", lambda self, texts: {})
    monkeypatch.setattr(sentences.SentenceStore, "keep", lambda self, texts, vectors: None)
    computed_now, computed = answer(root / "index")
    assert computed > 9  # they were embedded at the question this time
    assert without_latencies(with_store) == without_latencies(computed_now)


def test_kept_vectors_are_the_models_bit_for_bit(built):
    root, _ = built
    records = sentences.read_file(root / "index" / sentences.SENTENCES)
    passage = open_retriever(root / "index", "bm25").search("tides gravity", 1)[0].passage
    texts = sentences.passage_texts(passage.title, passage.section, passage.text, passage.lines)
    assert len(texts) > 3
    computed = embed.default_embedder().encode(texts)
    kept = {r["digest"].tobytes(): r["row"] for r in records}
    from typedrag.index.vectors import digest

    for text, vector in zip(texts, computed):
        assert np.array_equal(kept[digest(text)], vector), text


def test_a_sync_takes_the_previous_versions_sentence_vectors(built, tmp_path):
    root, _ = built
    docs = write_docs(tmp_path / "docs")
    index_dir = tmp_path / "index"
    first = sync_index([docs], index_dir, show_progress=False)
    (docs / "salt.txt").write_text(
        "Sea salt is left behind when sea water evaporates in shallow ponds.", encoding="utf-8"
    )
    second = sync_index([docs], index_dir, show_progress=False)
    assert 0 < second.sentences_embedded < first.sentences_embedded  # only the new file's sentences
    assert second.sentences == first.sentences + second.sentences_embedded


def test_an_index_without_sentence_vectors_is_read_as_it_is_and_filled_as_it_answers(tmp_path):
    index_dir = tmp_path / "index"
    build_index([write_docs(tmp_path / "docs")], index_dir, retrieval="bm25", show_progress=False)
    assert "sentences" not in json.loads((index_dir / MANIFEST).read_text())
    first, computed_first = answer(index_dir)
    assert computed_first > 2 and (index_dir / sentences.ADDED).is_file()
    assert is_typedrag_index(index_dir, ENGINE) == (True, "")  # the added file is part of the index
    assert open_retriever(index_dir).search("tides", 1)  # still opens: it is not listed
    second, computed_second = answer(index_dir)
    assert computed_second == 1
    assert without_latencies(first) == without_latencies(second)
    summary = sync_index([tmp_path / "docs"], index_dir, retrieval="hybrid", show_progress=False)
    assert summary.sentences_embedded < summary.sentences  # a later build takes over what answers added


def test_a_store_that_cannot_write_keeps_answering(tmp_path, monkeypatch):
    """A read-only index folder (or a full disk): the open for appending is refused (forced here: root writes
    into read-only folders)."""
    store = sentences.SentenceStore(tmp_path, built=False)

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(sentences.os, "open", refused)
    store.keep(["A sentence of some passage here."], np.ones((1, 384), dtype=np.float32))
    assert not (tmp_path / sentences.ADDED).exists()
    assert "A sentence of some passage here." in store.lookup(["A sentence of some passage here."])


def test_processes_adding_at_once_leave_whole_records_each_reads(tmp_path):
    stores = [sentences.SentenceStore(tmp_path, built=False) for _ in range(4)]
    rng = np.random.default_rng(0)

    def add(n: int) -> None:
        for round_ in range(25):
            texts = [f"store {n} round {round_} sentence {i}" for i in range(7)]
            stores[n].keep(texts, rng.standard_normal((7, 384)).astype(np.float32))

    threads = [threading.Thread(target=add, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    body = (tmp_path / sentences.ADDED).stat().st_size - len(sentences.header())
    assert body == 4 * 25 * 7 * sentences.record_dtype().itemsize
    fresh = sentences.SentenceStore(tmp_path, built=False)
    wanted = [f"store {n} round {r} sentence {i}" for n in range(4) for r in range(25) for i in range(7)]
    assert len(fresh.lookup(wanted)) == len(wanted)


def test_a_torn_added_file_is_read_to_its_last_whole_record_and_not_appended_to(tmp_path):
    store = sentences.SentenceStore(tmp_path, built=False)
    store.keep(["one whole sentence of a passage"], np.ones((1, 384), dtype=np.float32))
    with open(tmp_path / sentences.ADDED, "ab") as f:
        f.write(b"\x01" * 100)  # a record cut short (a crash, a full disk)
    store.keep(["another sentence of a passage"], np.ones((1, 384), dtype=np.float32))
    fresh = sentences.SentenceStore(tmp_path, built=False)
    assert list(fresh.lookup(["one whole sentence of a passage", "another sentence of a passage"])) == [
        "one whole sentence of a passage"
    ]


def test_what_answers_add_is_held_up_to_a_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(sentences, "ADDED_MAX", 5)
    store = sentences.SentenceStore(tmp_path, built=False)
    store.keep([f"sentence number {i} of a passage" for i in range(4)], np.ones((4, 384), dtype=np.float32))
    store.keep([f"another sentence {i} of a passage" for i in range(4)], np.ones((4, 384), dtype=np.float32))
    assert store.added == 4
    assert (tmp_path / sentences.ADDED).stat().st_size == len(
        sentences.header()
    ) + 4 * sentences.record_dtype().itemsize


def test_metrics_report_the_caches_and_their_limits(built):
    from typedrag.server.metrics import _caches

    root, _ = built
    embed._KNOWN.clear()
    pipeline = build_pipeline(
        load_settings({"index": str(root / "index")}), Resources()
    )  # its index open while scraped
    asyncio.run(pipeline.answer(QUESTION, "rag"))
    families = {family.name: family.samples[0].value for family in _caches()}
    assert 0 < families["typedrag_embedding_cache_texts"] <= families["typedrag_embedding_cache_limit"]
    assert families["typedrag_sentence_vectors_hits"] > 0 and "typedrag_sentence_vectors_added" in families
    assert families["typedrag_embedded_texts"] > 0


# --- The choice: `typedrag index --sentence-vectors/--no-sentence-vectors`, the setting, the environment --------------


def index_cli(*args, env=None):
    from typer.testing import CliRunner

    from typedrag.cli import app

    out = CliRunner().invoke(app, ["index", *map(str, args)], env={"COLUMNS": "400", **(env or {})})
    assert out.exit_code == 0, out.output
    return out


def manifest_of(index_dir) -> dict:
    return json.loads((index_dir / MANIFEST).read_text())


def test_the_readmes_first_command_embeds_no_sentence_and_says_how_to(tmp_path, monkeypatch):
    """The demo's passage vectors ship with typedrag, so its build took seconds, until the sentence vectors made it
    embed 56,681 sentences (354 s here): the demo leaves them to its answers by default, and says so."""
    monkeypatch.chdir(tmp_path)

    def embedded(*args, **kwargs):
        raise AssertionError("the demo build embedded its sentences")

    monkeypatch.setattr(sentences, "write", embedded)
    out = index_cli("demo:vital-articles", "--index", "demo-index")
    line = next(line for line in out.stdout.splitlines() if line.startswith("sentence vectors"))
    assert "not built for the demo corpus" in line and "--sentence-vectors" in line, line
    manifest = manifest_of(tmp_path / "demo-index")
    assert (
        "sentences" not in manifest
        and "sentence_vectors" not in manifest
        and manifest["vectors"]["embedder"] == "minilm"
    )


def test_no_sentence_vectors_is_kept_by_a_later_sync_and_sentence_vectors_adds_them(tmp_path):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    out = index_cli(docs, "--index", index_dir, "--no-sentence-vectors")
    assert "sentence vectors (for answers): not built, as asked" in out.stdout
    assert manifest_of(index_dir)["sentence_vectors"] is False and "sentences" not in manifest_of(index_dir)
    (docs / "salt.txt").write_text(
        "Sea salt is left behind when sea water evaporates in shallow ponds.", encoding="utf-8"
    )
    out = index_cli(docs, "--index", index_dir)
    assert "not built, as this index was first asked" in out.stdout and "sentences" not in manifest_of(index_dir)
    out = index_cli(docs, "--index", index_dir, "--sentence-vectors")
    assert "(--no-sentence-vectors leaves them to answers)" in out.stdout
    manifest = manifest_of(index_dir)
    assert manifest["sentence_vectors"] is True and manifest["sentences"]["rows"] > 9
    _, computed = answer(index_dir)
    assert computed == 1


def test_a_folder_with_minilm_vectors_gets_them_by_default_and_says_how_to_skip_them(tmp_path):
    index_dir = tmp_path / "index"
    out = index_cli(write_docs(tmp_path / "docs"), "--index", index_dir)
    line = next(line for line in out.stdout.splitlines() if line.startswith("sentence vectors"))
    assert "embedded in" in line and "--no-sentence-vectors" in line, line
    assert "sentences" in manifest_of(index_dir) and "sentence_vectors" not in manifest_of(
        index_dir
    )  # the default: not recorded


def test_the_environment_and_the_config_file_choose_as_the_flag_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    docs = write_docs(tmp_path / "docs")
    index_cli(docs, "--index", tmp_path / "by-env", env={"TYPEDRAG_SENTENCE_VECTORS": "0"})
    assert "sentences" not in manifest_of(tmp_path / "by-env")
    (tmp_path / "typedrag.toml").write_text("sentence_vectors = false\n", encoding="utf-8")
    index_cli(docs, "--index", tmp_path / "by-file")
    assert manifest_of(tmp_path / "by-file")["sentence_vectors"] is False
    index_cli(docs, "--index", tmp_path / "flag-wins", "--sentence-vectors")
    assert "sentences" in manifest_of(tmp_path / "flag-wins")
    monkeypatch.setenv("TYPEDRAG_SENTENCE_VECTORS", "0")  # callers without settings (serve --data, the Python API)
    assert sync_index([docs], tmp_path / "api", show_progress=False).sentences == 0


def test_a_bm25_index_gets_them_when_asked(tmp_path):
    index_dir = tmp_path / "index"
    out = index_cli(write_docs(tmp_path / "docs"), "--index", index_dir, "--retrieval", "bm25")
    assert "not built (the passages have no MiniLM vectors)" in out.stdout
    index_cli(write_docs(tmp_path / "docs"), "--index", index_dir, "--sentence-vectors")
    manifest = manifest_of(index_dir)
    assert manifest["retrieval"] == "bm25" and manifest["sentences"]["rows"] > 9


def test_milvus_refuses_sentence_vectors_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from typedrag.cli import app

    out = CliRunner().invoke(
        app, ["index", str(write_docs(tmp_path / "docs")), "--backend", "milvus", "--uri", "x.db", "--sentence-vectors"]
    )
    assert out.exit_code == 2 and "only a local index keeps sentence vectors" in " ".join(out.output.split()), (
        out.output
    )


def test_a_mistyped_environment_value_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("TYPEDRAG_SENTENCE_VECTORS", "maybe")
    with pytest.raises(ConfigError, match="TYPEDRAG_SENTENCE_VECTORS"):
        sync_index([write_docs(tmp_path / "docs")], tmp_path / "index", show_progress=False)
