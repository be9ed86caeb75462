"""Hybrid retrieval on the embedded index: passage vectors written, synced, resumed and searched with the BM25 index."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from typedrag.embed import embedder_for, passage_input
from typedrag.errors import IndexUnusableError
from typedrag.index import build_index, open_retriever
from typedrag.index import dense, fusion, vectors
from typedrag.index.manifest import MANIFEST
from typedrag.index.tantivy import sync_index

DOCS = {
    "automobile.txt": "The automobile is a wheeled motor vehicle used for transportation on roads.",
    "bees.txt": "Honey bees collect nectar from flowers and store it as honey in the hive.",
    "tides.txt": "Tides are the rise and fall of sea levels caused by the gravity of the Moon and the Sun.",
    "bread.txt": "Bread is baked from a dough of flour and water, leavened with yeast or a sourdough starter.",
    "volcano.txt": "A volcano is a rupture in the crust through which lava, ash and gases escape.",
}


def write_docs(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def manifest_of(index_dir: Path) -> dict:
    return json.loads((index_dir / MANIFEST).read_text(encoding="utf-8"))


def stored_vectors(index_dir: Path) -> dict[str, np.ndarray]:
    """passage id -> the vector the index holds for it."""
    found = vectors.DenseVectors(index_dir, vectors.Table.from_json(manifest_of(index_dir)["vectors"]))
    return {found.passage_id(i): found.rows[i].astype(np.float32) * found.scales[i] for i in range(found.table.rows)}


@pytest.fixture(scope="module")
def hybrid_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("hybrid")
    summary = build_index([write_docs(root / "docs", DOCS)], root / "index", show_progress=False)
    return root / "index", summary


def test_a_new_index_is_hybrid_and_records_it(hybrid_index):
    index_dir, summary = hybrid_index
    manifest = manifest_of(index_dir)
    assert manifest["retrieval"] == "hybrid" and manifest["vectors"]["embedder"] == "minilm"
    assert manifest["vectors"]["rows"] == summary.passages == 5 and summary.embedded == 5
    assert set(vectors.FILES) <= set(manifest["files"])  # checksummed with tantivy's files
    assert summary.vector_bytes == manifest["vectors"]["bytes"] > 5 * 384
    retriever = open_retriever(index_dir)
    assert retriever.retrieval == "hybrid" and retriever.name == "tantivy-hybrid/minilm" and retriever.notice is None


def test_hybrid_finds_what_bm25_misses_and_keeps_what_it_finds(hybrid_index):
    index_dir, _ = hybrid_index
    bm25, hybrid = open_retriever(index_dir, "bm25"), open_retriever(index_dir)
    assert bm25.search("cars", 3) == []  # no word in common with "automobile"
    assert hybrid.search("cars", 3)[0].passage.doc_id == "automobile.txt"
    assert open_retriever(index_dir, "dense").search("cars", 1)[0].passage.doc_id == "automobile.txt"
    assert hybrid.search("honey bees nectar", 1)[0].passage.doc_id == "bees.txt"
    many = hybrid.search_many(["cars", "lava eruption", "the of"], 2)
    assert [[h.passage_id for h in r] for r in many] == [
        [h.passage_id for h in hybrid.search(q, 2)] for q in ["cars", "lava eruption", "the of"]
    ]
    assert many[2] == []  # nothing searchable in it: nothing found, as with BM25


def test_fusion_is_reciprocal_rank_over_each_legs_top():
    fused = fusion.fuse([["a", "b", "c"], ["c", "d", "a"]], 3, weights=(1, 1))
    assert [pid for pid, _ in fused] == ["a", "c", "b"]
    k = fusion.HYBRID_K
    assert fused[0][1] == pytest.approx(1 / (k + 1) + 1 / (k + 3), abs=1e-6)
    assert [pid for pid, _ in fusion.fuse([["a", "b"], ["b", "a"]], 2, weights=(1, 1))] == [
        "a",
        "b",
    ]  # a tie: the first leg's best
    assert [pid for pid, _ in fusion.fuse([["a", "b"], ["b", "a"]], 2, weights=(1, 1.5))] == ["b", "a"]
    # BM25's only hit for a rare term and dense's nearest passage tie, and BM25's comes first
    assert [pid for pid, _ in fusion.fuse([["rare#9"], ["noise#1", "noise#2"]], 1)] == ["rare#9"]
    assert [pid for pid, _ in fusion.fuse([["x"] + [f"p{i}" for i in range(200)], []], 500, depth=100)][-1] == "p98"


def test_a_legs_first_passage_outranks_one_both_legs_rank_in_the_middle():
    """The fusion's constant (docs/lab/2026-12-03-rrf-15.md): with RRF's usual 60, "mid" (10th in both legs) outranked
    "top" (first for BM25, 30th for dense); at 15 the first passage of a leg stays ahead."""
    bm25 = ["top"] + [f"b{i}" for i in range(8)] + ["mid"]
    near = [f"d{i}" for i in range(9)] + ["mid"] + [f"e{i}" for i in range(19)] + ["top"]
    ranked = [pid for pid, _ in fusion.fuse([bm25, near], 3)]
    assert ranked.index("top") < ranked.index("mid")


@pytest.mark.parametrize("key", ["minilm", "static"])
def test_a_passages_vector_does_not_depend_on_its_batch(key):
    embedder = embedder_for(key)
    texts = [passage_input("Comet", "A comet is an icy body."), "short", passage_input("Bread", DOCS["bread.txt"] * 3)]
    together = embedder.encode(texts)
    for i, text in enumerate(texts):
        assert np.array_equal(embedder.encode([text])[0], together[i])
    rows, scales = vectors.quantize(together)
    again, again_scales = vectors.quantize(together[1:2])
    assert np.array_equal(rows[1], again[0]) and scales[1] == again_scales[0]


def test_sync_embeds_only_new_text_and_keeps_vectors_in_step(tmp_path):
    docs = write_docs(tmp_path / "docs", DOCS)
    index_dir = tmp_path / "index"
    build_index([docs], index_dir, show_progress=False, embedder="static")
    before = stored_vectors(index_dir)
    (docs / "tides.txt").write_text("Glaciers are slow rivers of ice that carve valleys.", encoding="utf-8")
    (docs / "bees.txt").unlink()
    (docs / "comet.txt").write_text("A comet is an icy body that grows a tail near the Sun.", encoding="utf-8")
    summary = sync_index([docs], index_dir, show_progress=False)
    assert (summary.added, summary.updated, summary.removed, summary.unchanged) == (1, 1, 1, 3)
    assert summary.embedded == 2 and summary.embedder == "static"  # the new file and the changed one
    after = stored_vectors(index_dir)
    assert sorted(after) == ["automobile.txt#0", "bread.txt#0", "comet.txt#0", "tides.txt#0", "volcano.txt#0"]
    for kept in ("automobile.txt#0", "bread.txt#0", "volcano.txt#0"):
        assert np.array_equal(after[kept], before[kept])
    assert not np.array_equal(after["tides.txt#0"], before["tides.txt#0"])
    manifest = manifest_of(index_dir)
    assert manifest["vectors"]["rows"] == 5 and sum(c for _, c in manifest["vectors"]["files"].values()) == 5
    assert open_retriever(index_dir, "dense").search("ice rivers carving valleys", 1)[0].passage_id == "tides.txt#0"
    fresh = tmp_path / "fresh"
    build_index([docs], fresh, show_progress=False, embedder="static")
    assert {k: v.tolist() for k, v in stored_vectors(fresh).items()} == {k: v.tolist() for k, v in after.items()}
    assert not vectors.journal_path(index_dir).exists()


def test_an_interrupted_embedding_resumes_without_embedding_again(tmp_path, monkeypatch):
    docs = write_docs(
        tmp_path / "docs", {f"d{i:02d}.txt": f"Document {i} is about topic {i} and word{i}." for i in range(30)}
    )
    index_dir = tmp_path / "index"
    build_index([docs], index_dir, show_progress=False, retrieval="bm25")
    monkeypatch.setattr(vectors, "EMBED_BATCH", 4)
    static = embedder_for("static")
    calls = []

    def failing(texts, batch_size=1024, on_batch=None):
        calls.append(len(texts))
        if len(calls) == 3:
            raise KeyboardInterrupt  # as Ctrl-C or a kill between two batches
        return type(static).encode(static, texts, batch_size, on_batch)

    monkeypatch.setattr(static, "encode", failing)
    with pytest.raises(KeyboardInterrupt):
        sync_index([docs], index_dir, show_progress=False, retrieval="hybrid", embedder="static")
    journal = vectors.journal_path(index_dir)
    assert journal.exists() and manifest_of(index_dir)["retrieval"] == "bm25"  # the index in place is untouched
    with open(journal, "ab") as f:
        f.write(b"\x01" * 7)  # the start of a record a kill cut short
    calls.clear()
    monkeypatch.setattr(
        static,
        "encode",
        lambda texts, batch_size=1024, on_batch=None: (
            calls.append(len(texts)) or type(static).encode(static, texts, batch_size, on_batch)
        ),
    )
    summary = sync_index([docs], index_dir, show_progress=False, retrieval="hybrid", embedder="static")
    assert summary.embedded == 30 - 8 and sum(calls) == 22  # the two batches journaled were not embedded again
    assert not journal.exists()
    fresh = tmp_path / "fresh"
    build_index([docs], fresh, show_progress=False, embedder="static")
    assert {k: v.tolist() for k, v in stored_vectors(index_dir).items()} == {
        k: v.tolist() for k, v in stored_vectors(fresh).items()
    }


def test_a_killed_build_resumes_from_its_journal(tmp_path):
    """SIGKILL while embedding (no cleanup runs): the rerun embeds only what the journal lacks."""
    docs = write_docs(tmp_path / "docs", {f"d{i:02d}.txt": f"Passage {i} on subject {i}." for i in range(40)})
    index_dir = tmp_path / "index"
    slow = (
        "import time\n"
        "from typedrag.index import vectors, build_index\n"
        "from typedrag.embed import StaticEmbedder\n"
        "vectors.EMBED_BATCH = 2\n"
        "encode = StaticEmbedder.encode\n"
        "def slowly(self, texts, batch_size=1024, on_batch=None):\n"
        "    time.sleep(0.3)\n"
        "    return encode(self, texts, batch_size, on_batch)\n"
        "StaticEmbedder.encode = slowly\n"
        f"build_index([{str(docs)!r}], {str(index_dir)!r}, show_progress=False, embedder='static')\n"
    )
    build = subprocess.Popen([sys.executable, "-c", slow])
    journal = vectors.journal_path(index_dir)
    record = vectors.DIGEST_BYTES + embedder_for("static").dim + 4
    try:
        while build.poll() is None and not (journal.exists() and journal.stat().st_size > 4 * record):
            time.sleep(0.05)
        assert build.poll() is None, "the build finished before it could be killed"
        build.send_signal(signal.SIGKILL)
    finally:
        build.wait()
    assert not (index_dir / MANIFEST).exists()
    summary = build_index([docs], index_dir, show_progress=False, embedder="static")
    assert summary.passages == 40 and 0 < summary.embedded <= 40 - 4
    assert not journal.exists()


def test_an_index_from_before_vectors_opens_as_bm25_and_says_how_to_add_them(tmp_path):
    docs = write_docs(tmp_path / "docs", DOCS)
    index_dir = tmp_path / "index"
    build_index([docs], index_dir, show_progress=False, retrieval="bm25")
    manifest = manifest_of(index_dir)
    del manifest["retrieval"]  # what typedrag wrote before it kept vectors
    (index_dir / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    old = open_retriever(index_dir)
    assert old.retrieval == "bm25" and old.name == "tantivy-bm25"
    assert "--retrieval hybrid" in old.notice and "BM25 alone" in old.notice
    assert old.search("honey bees", 1)[0].passage.doc_id == "bees.txt"
    with pytest.raises(IndexUnusableError, match="no passage vectors for --retrieval hybrid.*--retrieval hybrid"):
        open_retriever(index_dir, "hybrid")
    assert sync_index([docs], index_dir, show_progress=False).embedded == 0  # a sync keeps what the index is
    summary = sync_index([docs], index_dir, show_progress=False, retrieval="hybrid")
    assert summary.unchanged == 5 and summary.embedded == 5  # vectors added from the stored text, no file read again
    assert open_retriever(index_dir).retrieval == "hybrid"


def test_vectors_from_another_model_are_not_searched(tmp_path):
    index_dir = tmp_path / "index"
    build_index([write_docs(tmp_path / "docs", DOCS)], index_dir, show_progress=False, embedder="static")
    manifest = manifest_of(index_dir)
    manifest["vectors"]["identity"] = "some other model"
    (index_dir / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    assert "another model" in open_retriever(index_dir).notice
    with pytest.raises(IndexUnusableError, match="another model"):
        open_retriever(index_dir, "dense")


def test_damaged_vector_files_are_refused(tmp_path):
    index_dir = tmp_path / "index"
    build_index([write_docs(tmp_path / "docs", DOCS)], index_dir, show_progress=False, embedder="static")
    with open(index_dir / vectors.VECTORS, "r+b") as f:
        f.truncate(100)
    with pytest.raises(IndexUnusableError, match="vectors.npy"):
        open_retriever(index_dir)


def test_a_sync_keeps_a_running_retriever_answering_and_it_picks_up_vectors(tmp_path):
    docs = write_docs(tmp_path / "docs", DOCS)
    index_dir = tmp_path / "index"
    build_index([docs], index_dir, show_progress=False, retrieval="bm25")
    running = open_retriever(index_dir)
    assert running.retrieval == "bm25" and running.search("cars", 1) == []
    sync_index([docs], index_dir, show_progress=False, retrieval="hybrid", embedder="static")
    assert running.retrieval == "hybrid" and running.search("automobile cars", 1)[0].passage.doc_id == "automobile.txt"
    assert running.reloads == 1


def test_unknown_settings_are_one_line_errors(tmp_path):
    from typedrag.errors import UserError

    with pytest.raises(UserError, match="unknown embedder 'bert'"):
        build_index([write_docs(tmp_path / "docs", DOCS)], tmp_path / "index", show_progress=False, embedder="bert")
    with pytest.raises(UserError, match="unknown retrieval 'semantic'"):
        build_index([tmp_path / "docs"], tmp_path / "index", show_progress=False, retrieval="semantic")
    assert not (tmp_path / "index").exists()


def test_a_big_new_index_gets_no_vectors_unasked_and_is_told_how_to_add_them(tmp_path, monkeypatch):
    monkeypatch.setattr(dense, "AUTO_VECTORS_MAX_PASSAGES", 3)
    docs = write_docs(tmp_path / "docs", DOCS)
    summary = build_index([docs], tmp_path / "big", show_progress=False)
    assert summary.retrieval == "bm25" and summary.embedder is None and "--retrieval hybrid" in summary.notes[0]
    retriever = open_retriever(tmp_path / "big")
    assert retriever.retrieval == "bm25" and "--retrieval hybrid" in retriever.notice
    assert (
        build_index([docs], tmp_path / "asked", show_progress=False, retrieval="hybrid", embedder="static").embedded
        == 5
    )


def test_a_query_that_is_a_title_puts_that_article_first():
    def terms(text):
        return set(text.lower().replace("'s", "").split())

    bm25 = [
        ("halley#0", "Halley's Comet"),
        ("herschel#0", "Caroline Herschel"),
        ("minor#0", "Minor planet"),
        ("comet#0", "Comet"),
    ]
    near = [("halley#0", "Halley's Comet"), ("comet#0", "Comet"), ("comet#1", "Comet")]
    ranked = [pid for pid, _ in fusion.hybrid({"comet"}, bm25, near, 3, terms)]
    assert ranked == ["comet#0", "halley#0", "comet#1"]  # "comet" is the article "Comet", not "Halley's Comet"
    assert [pid for pid, _ in fusion.hybrid({"comet", "tail"}, bm25, near, 1, terms)] == [
        "halley#0"
    ]  # a title inside a query: no
    assert [pid for pid, _ in fusion.hybrid(set(), bm25, near, 1, terms)] == ["halley#0"]


ASTRONOMY = {
    "Comet",
    "Halley's Comet",
    "Caroline Herschel",
    "Minor planet",
    "Asteroid",
    "Meteoroid",
    "Asteroid belt",
    "Interplanetary medium",
    "Astronomy",
    "Meteor shower",
    "Meteorite",
    "Impact event",
    "Planetary system",
}


@pytest.fixture(scope="module")
def astronomy_index(tmp_path_factory):
    """The README's demo corpus cut down: its astronomy articles and every 40th other one (270 passages)."""
    from typedrag.corpus import DEMO_SOURCE, iter_documents

    root = tmp_path_factory.mktemp("astronomy")
    docs = list(iter_documents([DEMO_SOURCE], problems=[]))
    chosen = {d.doc_id: d for d in [d for d in docs if d.title in ASTRONOMY] + docs[::40]}
    corpus = root / "vital.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": d.doc_id, "title": d.title, "text": d.text}) + "\n" for d in chosen.values())
    )
    build_index([corpus], root / "index", show_progress=False)
    return root / "index"


def test_the_readme_comparison_cites_the_article_comet(astronomy_index):
    """Issue 41 #3: the item query "comet" ranked Halley's Comet, Caroline Herschel and Minor planet above the
    article "Comet", and the README's first answer cited Asteroid and Meteoroid only."""
    import asyncio

    from typedrag.classify import load_default_classifier
    from typedrag.engines.offline import OfflineEngine
    from typedrag.pipeline import Pipeline

    retriever = open_retriever(astronomy_index)
    assert retriever.search("comet", 1)[0].passage.title == "Comet"
    pipeline = Pipeline(engine=OfflineEngine(), retriever=retriever, classifier=load_default_classifier())
    result = asyncio.run(pipeline.answer("What is the difference between a comet and an asteroid?"))
    assert result.strategy == "comparison" and result.engines.retriever == "tantivy-hybrid/minilm"
    titles = {s.number: s.title for s in result.sources}
    cited = {titles[n] for c in result.citations for n in c.source_numbers}
    assert "Comet" in cited and "Asteroid" in cited


def test_the_index_command_reports_its_vectors_and_ask_notes_an_index_without(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from typedrag.cli import app

    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))
    docs = write_docs(tmp_path / "docs", DOCS)
    runner = CliRunner()
    built = runner.invoke(app, ["index", str(docs), "--index", str(tmp_path / "index"), "--embedder", "static"])
    assert built.exit_code == 0, built.output
    assert "search: hybrid; passage vectors by static: 5 embedded" in built.output and "MiB on disk" in built.output
    synced = runner.invoke(app, ["index", str(docs), "--index", str(tmp_path / "index")])
    assert "0 embedded" in synced.output and "5 reused" in synced.output
    runner.invoke(app, ["index", str(docs), "--index", str(tmp_path / "plain"), "--retrieval", "bm25"])
    manifest = manifest_of(tmp_path / "plain")
    del manifest["retrieval"]  # as written before vectors
    (tmp_path / "plain" / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    asked = runner.invoke(
        app, ["ask", "How do bees make honey?", "--index", str(tmp_path / "plain"), "--method", "rag", "--json"]
    )
    assert asked.exit_code == 0, asked.output
    assert "note:" in asked.output and "--retrieval hybrid" in asked.output
    hybrid = runner.invoke(
        app, ["ask", "How do bees make honey?", "--index", str(tmp_path / "index"), "--method", "rag", "--json"]
    )
    assert json.loads(hybrid.stdout)["engines"]["retriever"] == "tantivy-hybrid/static"


def write_shipped(folder: Path, identity: str, texts: list[str], embedder_key: str) -> None:
    """A file of shipped vectors for `texts`, as scripts/demo_vectors.py writes them."""
    rows, scales = vectors.quantize(embedder_for(embedder_key).encode(texts))
    folder.mkdir(parents=True, exist_ok=True)
    vectors.record_shipped(
        folder,
        f"{embedder_key}.vectors",
        vectors.shipped_file(identity, [vectors.digest(t) for t in texts], rows, scales),
    )


def test_a_shipped_digest_ending_in_a_zero_byte_is_found(tmp_path):
    """Digests were first kept as numpy "S16", which drops trailing zero bytes: 44 of the demo's 10,356 passages
    were never found and were embedded again."""
    digests = [bytes(range(1, 16)) + b"\0", b"\0" * 16, bytes(range(16, 32))]
    rows, scales = np.ones((3, 4), dtype=np.int8), np.ones(3, dtype=np.float32)
    vectors.record_shipped(tmp_path, "some.vectors", vectors.shipped_file("a model", digests, rows, scales))
    assert set(vectors.shipped_vectors("a model", 4, tmp_path)) == set(digests)


def test_a_build_takes_the_vectors_typedrag_ships_and_embeds_only_the_rest(tmp_path, monkeypatch):
    docs = write_docs(tmp_path / "docs", DOCS)
    shipped = tmp_path / "shipped"
    monkeypatch.setattr(vectors, "SHIPPED_DIR", shipped)
    plain = build_index([docs], tmp_path / "plain", show_progress=False, embedder="static")
    assert plain.embedded == 5
    known = [passage_input(name.removesuffix(".txt"), text) for name, text in list(DOCS.items())[:3]]  # as stored
    write_shipped(shipped, vectors.identity_of("static"), known, "static")
    write_shipped(shipped / "other", "another model", known, "static")
    vectors.shipped_vectors.cache_clear()  # read once a process: the package's files do not change under it
    summary = build_index([docs], tmp_path / "index", show_progress=False, embedder="static")
    assert summary.embedded == 2  # the three texts shipped were not embedded
    assert {k: v.tolist() for k, v in stored_vectors(tmp_path / "index").items()} == {
        k: v.tolist() for k, v in stored_vectors(tmp_path / "plain").items()
    }
    monkeypatch.setattr(vectors, "SHIPPED_DIR", shipped / "other")  # another model's vectors are never taken
    assert build_index([docs], tmp_path / "other", show_progress=False, embedder="static").embedded == 5


@pytest.mark.parametrize("damage", ["a row changed", "no digest recorded"])
def test_shipped_vectors_that_do_not_match_their_recorded_digest_are_not_taken_and_the_build_says_so(
    tmp_path, monkeypatch, damage
):
    """Issue 57 P10: before, the shipped files were taken as they were: a tampered row poisoned every demo index."""
    docs = write_docs(tmp_path / "docs", DOCS)
    shipped = tmp_path / "shipped"
    monkeypatch.setattr(vectors, "SHIPPED_DIR", shipped)
    known = [passage_input(name.removesuffix(".txt"), text) for name, text in list(DOCS.items())[:3]]
    write_shipped(shipped, vectors.identity_of("static"), known, "static")
    path = shipped / "static.vectors"
    if damage == "a row changed":
        data = bytearray(path.read_bytes())
        data[-10] ^= 0x7F  # one int8 of the last row: what a tamperer or a bad disk does
        path.write_bytes(bytes(data))
    else:
        (shipped / vectors.SHIPPED_DIGESTS).unlink()
    vectors.shipped_vectors.cache_clear()
    summary = build_index([docs], tmp_path / "index", show_progress=False, embedder="static")
    assert summary.embedded == 5  # every passage embedded afresh
    assert any("static.vectors do not match the sha256 typedrag recorded" in note for note in summary.notes), (
        summary.notes
    )
    build_index([docs], tmp_path / "plain", show_progress=False, embedder="static")
    assert {k: v.tolist() for k, v in stored_vectors(tmp_path / "index").items()} == {
        k: v.tolist() for k, v in stored_vectors(tmp_path / "plain").items()
    }
    vectors.shipped_vectors.cache_clear()


def test_the_demo_vectors_typedrag_ships_are_todays_model_on_todays_passages():
    """The README's first command takes the demo's vectors from typedrag/index/shipped/ (two minutes of embedding
    saved). When the model, its input or the chunker changes, they are no longer found: regenerate them with
    scripts/demo_vectors.py."""
    from typedrag.corpus import DEMO_SOURCE, chunk_document, iter_documents

    identity = vectors.identity_of("minilm")
    shipped = vectors.shipped_vectors(identity, 384, vectors.SHIPPED_DIR)
    assert len(shipped) > 10_000 and shipped.refused == ()  # its sha256 is the one recorded in the package
    docs = list(iter_documents([DEMO_SOURCE], problems=[]))[::1000]
    texts = [passage_input(p.title, p.text) for d in docs for p in chunk_document(d, 100)]
    assert all(vectors.digest(t) in shipped for t in texts)
    rows, _ = vectors.quantize(embedder_for("minilm").encode(texts))
    held = np.stack([shipped[vectors.digest(t)][0] for t in texts])
    assert np.abs(rows.astype(np.int16) - held.astype(np.int16)).max() <= 1  # the same model, to the last int8 step
