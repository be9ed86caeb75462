"""The tantivy BM25 index: known answers, round trip, manifest checks, atomic rebuilds."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from typedrag.corpus import CorpusError
from typedrag.index import IndexUnusableError, Retriever, build_index, open_retriever
from typedrag.index.manifest import FORMAT_VERSION, MANIFEST

DOCS = [
    {
        "id": "honeybee",
        "title": "Honey bee",
        "text": "Honey bees collect nectar from flowers and store it in wax combs inside the hive. "
        "Worker bees fan their wings to evaporate water from the nectar, and enzymes from their "
        "glands turn its sucrose into glucose and fructose. The result is honey, which the colony "
        "eats through the winter.",
    },
    {
        "id": "volcano",
        "title": "Volcano",
        "text": "A volcano is a rupture in the crust of a planet where molten rock, ash and gases "
        "escape from a magma chamber below the surface. Eruptions happen when pressure from "
        "dissolved gases in the magma exceeds the strength of the overlying rock.",
    },
    {
        "id": "photosynthesis",
        "title": "Photosynthesis",
        "text": "Photosynthesis is the process by which green plants use sunlight, water and carbon "
        "dioxide to produce glucose and oxygen. Chlorophyll in the chloroplasts absorbs red and "
        "blue light, which is why leaves look green.",
    },
    {
        "id": "cpp",
        "title": "C++",
        "text": "C++ is a general-purpose programming language created by Bjarne Stroustrup as an "
        "extension of C. Unlike C#, which runs on the .NET runtime with garbage collection, C++ "
        "compiles to native code and leaves memory management to the programmer.",
    },
    {
        "id": "magna-carta",
        "title": "Magna Carta",
        "text": "Magna Carta is a royal charter of rights agreed to by King John of England at "
        "Runnymede in 1215. It promised the protection of church rights and limits on feudal "
        "payments to the Crown, and it later became a symbol of the rule of law.",
    },
    {
        "id": "sourdough",
        "title": "Sourdough",
        "text": "Sourdough bread is leavened by a starter of wild yeast and lactic acid bacteria "
        "instead of baker's yeast. To keep a starter alive, feed it flour and water every day "
        "and keep it at room temperature; the bacteria give the bread its sour taste.",
    },
    {
        "id": "tides",
        "title": "Tide",
        "text": "Tides are the rise and fall of sea levels caused by the gravitational pull of the "
        "Moon and the Sun together with the rotation of the Earth. Most coasts see two high tides "
        "and two low tides every lunar day.",
    },
]


def write_corpus(path, docs):
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("idx")
    corpus = write_corpus(root / "corpus.jsonl", DOCS)
    summary = build_index([corpus], root / "index", show_progress=False)
    return root / "index", corpus, summary


@pytest.fixture(scope="module")
def retriever(built):
    """The index searched with BM25 alone: what these tests check is the lexical leg (tests/test_hybrid.py has the rest)."""
    return open_retriever(built[0], "bm25")


def ids(results):
    return [r.passage.doc_id for r in results]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How do bees make honey?", "honeybee"),
        ("Why do volcanoes erupt?", "volcano"),
        ("Why are leaves green?", "photosynthesis"),
        ("Who created the C++ programming language?", "cpp"),
        ("What did King John agree to in 1215?", "magna-carta"),
        ("How do I keep a sourdough starter alive?", "sourdough"),
        ("What causes high and low tides?", "tides"),
    ],
)
def test_known_answers(retriever, query, expected):
    assert ids(retriever.search(query, k=3))[0] == expected


def test_results_carry_stored_fields_and_descending_scores(retriever):
    results = retriever.search("magma eruption pressure", k=10)
    top = results[0]
    assert top.passage_id == "volcano#0"
    assert top.passage.title == "Volcano"
    assert top.passage.text == " ".join(DOCS[1]["text"].split())
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0


def test_summary_and_manifest(built):
    index_dir, corpus, summary = built
    assert (summary.documents, summary.passages, summary.skipped) == (7, 7, 0)
    manifest = json.loads((index_dir / MANIFEST).read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["engine"] | {"tantivy": "x"} == {
        "name": "tantivy-bm25",
        "tantivy": "x",
        "k1": 1.2,
        "b": 0.75,
        "tokenizer": "en_stem",
        "passage_words": 100,
        "chunker": 19,
    }
    assert manifest["counts"] == {"documents": 7, "passages": 7, "skipped": 0}
    assert manifest["corpus"]["sources"][0]["source"] == str(corpus.resolve())
    assert "meta.json" in manifest["files"] and len(manifest["files"]["meta.json"]["sha256"]) == 64


def test_special_characters_and_stopword_only_queries(retriever):
    assert ids(retriever.search("C++ vs. C#: (what)?", k=1)) == ["cpp"]
    assert ids(retriever.search('AND OR NOT "unbalanced [brackets} ~2 ^3 field:value*', k=5)) == []
    assert retriever.search("what is the ... ?!", k=5) == []
    assert retriever.search("", k=5) == []
    assert retriever.search("honey", k=0) == []


def test_k_limits_results(retriever):
    assert len(retriever.search("the water and the sea and the bread and the rock", k=2)) == 2


def test_search_many_matches_search_and_is_a_retriever(retriever):
    queries = ["honey bees", "tides moon", "C++ language", "the", "bread starter yeast"] * 4
    assert isinstance(retriever, Retriever) and retriever.name == "tantivy-bm25"
    many = retriever.search_many(queries, k=3)
    assert [ids(r) for r in many] == [ids(retriever.search(q, k=3)) for q in queries]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_search_many_works_in_a_forked_child_of_a_process_that_used_it(retriever):
    # The search threads are kept between calls; a forked child inherits the pool without its threads,
    # and waiting on them would hang it. The child must start threads of its own.
    queries = ["honey bees", "tides moon"]
    expected = [ids(r) for r in retriever.search_many(queries, k=3)]
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(read)
        os.write(write, json.dumps([ids(r) for r in retriever.search_many(queries, k=3)]).encode())
        os._exit(0)
    os.close(write)
    import select

    if not select.select([read], [], [], 120)[0]:  # a guard against a hang, far beyond any search's time
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        pytest.fail("search_many hung in the forked child")
    with os.fdopen(read) as pipe:
        assert json.loads(pipe.read()) == expected
    assert os.waitpid(child, 0)[1] == 0


def test_round_trip_and_concurrent_readers(built):
    queries = [d["title"] for d in DOCS]
    expected = [[(r.passage_id, r.score) for r in open_retriever(built[0]).search(q, 5)] for q in queries]
    readers = [open_retriever(built[0]) for _ in range(3)]
    errors = []

    def run(reader):
        for _ in range(20):
            got = [[(r.passage_id, r.score) for r in reader.search(q, 5)] for q in queries]
            if got != expected:
                errors.append(got)

    threads = [threading.Thread(target=run, args=(r,)) for r in readers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_long_document_is_chunked_with_stable_ids(tmp_path):
    text = " ".join(f"Sentence {i} mentions aardvark{i} here." for i in range(100))  # 500 words
    corpus = write_corpus(tmp_path / "c.jsonl", [{"id": "long", "title": "Long", "text": text}])
    summary = build_index([corpus], tmp_path / "index", passage_words=50, show_progress=False)
    assert summary.passages == 10
    hit = open_retriever(tmp_path / "index").search("aardvark57", k=1)[0]
    assert hit.passage_id == "long#5" and "aardvark57" in hit.passage.text


def test_problems_are_reported_in_summary(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "title": "A", "text": "alpha"}\nnot json\n', encoding="utf-8")
    summary = build_index([corpus], tmp_path / "index", show_progress=False)
    assert (summary.documents, summary.skipped) == (1, 1)
    assert [str(p) for p in summary.problems] == [f"{corpus}:2: bad JSON (Expecting value at column 1)"]


# --- unusable indexes ------------------------------------------------------------------------


@pytest.fixture
def copy_of_index(built, tmp_path):
    target = tmp_path / "index"
    shutil.copytree(built[0], target)
    return target


def test_missing_dir_or_manifest(tmp_path, copy_of_index):
    with pytest.raises(
        IndexUnusableError, match=r"no index at .*: build one first with `typedrag index SOURCE\.\.\. --index "
    ):
        open_retriever(tmp_path / "nothing-here")
    (copy_of_index / MANIFEST).unlink()
    with pytest.raises(IndexUnusableError, match=r"manifest.json is missing.*re-run `typedrag index .*--index"):
        open_retriever(copy_of_index)


@pytest.mark.parametrize("content", ["{not json", "[]", '{"format_version": 1}', '{"format_version": 1, "files": [1]}'])
def test_corrupt_manifest(copy_of_index, content):
    (copy_of_index / MANIFEST).write_text(content)
    with pytest.raises(IndexUnusableError, match=r"manifest.json is corrupt.*re-run"):
        open_retriever(copy_of_index)


def edit_manifest(index_dir, change):
    path = index_dir / MANIFEST
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def test_other_format_version(copy_of_index):
    edit_manifest(copy_of_index, lambda m: m.update(format_version=FORMAT_VERSION + 1))
    with pytest.raises(IndexUnusableError, match=f"has index format {FORMAT_VERSION + 1}.*re-run"):
        open_retriever(copy_of_index)


def test_tampered_checksum(copy_of_index):
    edit_manifest(copy_of_index, lambda m: m["files"]["meta.json"].update(sha256="0" * 64))
    with pytest.raises(IndexUnusableError, match=r"meta.json fails its checksum.*re-run"):
        open_retriever(copy_of_index)


def test_damaged_or_missing_segment_file(copy_of_index):
    store = next(copy_of_index.glob("*.store"))
    with open(store, "ab") as f:
        f.write(b"x")
    with pytest.raises(IndexUnusableError, match=r"\.store has the wrong size"):
        open_retriever(copy_of_index)
    store.unlink()
    with pytest.raises(IndexUnusableError, match=r"\.store is missing"):
        open_retriever(copy_of_index)


# --- atomic rebuilds -------------------------------------------------------------------------


def test_failed_rebuild_leaves_previous_index_intact(tmp_path):
    index_dir = tmp_path / "index"
    build_index([write_corpus(tmp_path / "good.jsonl", DOCS)], index_dir, show_progress=False)
    before = [(r.passage_id, r.score) for r in open_retriever(index_dir, "bm25").search("honey bees", 3)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        "".join(json.dumps({"id": f"n{i}", "title": "New", "text": f"novel text {i}"}) + "\n" for i in range(500))
        + "{broken\n",
        encoding="utf-8",
    )
    with pytest.raises(CorpusError, match=r"bad.jsonl:501: bad JSON"):
        build_index([bad], index_dir, strict=True, show_progress=False)
    after = open_retriever(index_dir, "bm25")
    assert [(r.passage_id, r.score) for r in after.search("honey bees", 3)] == before
    assert after.search("novel", 3) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.jsonl",
        "good.jsonl",
        "index",
    ]  # issue 55 E12: no lock file left


def test_rebuild_replaces_index(tmp_path):
    index_dir = tmp_path / "index"
    build_index([write_corpus(tmp_path / "a.jsonl", DOCS[:2])], index_dir, show_progress=False)
    build_index([write_corpus(tmp_path / "b.jsonl", DOCS[2:4])], index_dir, show_progress=False)
    r = open_retriever(index_dir, "bm25")
    assert ids(r.search("honey bees", 3)) == []
    assert ids(r.search("chlorophyll", 3)) == ["photosynthesis"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "b.jsonl", "index"]


def test_refuses_to_replace_a_directory_that_is_not_an_index(tmp_path):
    precious = tmp_path / "documents"
    precious.mkdir()
    (precious / "thesis.txt").write_text("years of work")
    with pytest.raises(FileExistsError, match="not a typedrag index"):
        build_index([write_corpus(tmp_path / "c.jsonl", DOCS)], precious, show_progress=False)
    assert (precious / "thesis.txt").read_text() == "years of work"


def test_passage_fingerprint_is_reproducible(tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", DOCS)
    build_index([corpus], tmp_path / "one", show_progress=False)
    build_index([corpus], tmp_path / "two", show_progress=False)
    one, two = (json.loads((tmp_path / n / MANIFEST).read_text())["corpus"] for n in ("one", "two"))
    assert one == two


def test_a_killed_readers_symlink_folder_is_removed_by_the_next_reader(built, tmp_path):
    built = built[0]
    """A reader killed with SIGKILL never cleans up its temporary folder of symlinks; before the fix every
    such kill left one behind in the temporary folder for good."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from typedrag.index import open_retriever; r = open_retriever({str(built)!r}); print('open', flush=True); input()",
        ],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout.readline().strip() == "open"
    left = [p.name for p in temp.glob("typedrag-index-*")]  # onnxruntime may leave a file of its own there
    assert len(left) == 1 and left[0].startswith(f"typedrag-index-{reader.pid}-")
    reader.send_signal(signal.SIGKILL)
    reader.wait()
    assert [p.name for p in temp.glob("typedrag-index-*")] == left  # nothing ran at exit
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"from typedrag.index import open_retriever; open_retriever({str(built)!r}).search('volcano')",
        ],
        env=env,
        check=True,
    )
    assert list(temp.glob("typedrag-index-*")) == []
    assert open_retriever(built).search("volcano")  # the index itself is untouched
