"""Shared fixtures: a small real index over hand-written documents, and the shared-data path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# The README's test command runs the suite in three worker processes (pytest-xdist, `--dist loadfile`): each
# file runs whole in one worker, so a module- or session-scoped fixture (a Ray cluster, a Milvus server,
# llama.cpp, a fresh venv, Chromium, an index) is set up once, not once in every worker that drew one of its
# tests. (`--dist loadgroup` would let single tests spread, but xdist 3.8 marks groups through a node id
# attribute pytest 9 no longer reads, so its groups fall apart: three Ray clusters at once.)
# Files are handed to the workers in the order they are collected, so the files that take minutes are collected
# first (longest first, as a scheduler of unequal jobs should): collected in name order, test_ray.py came last and
# ran alone for minutes while two workers idled.
LONGEST_FILES = (
    "test_ray.py",
    "test_index_sync.py",
    "test_install.py",
    "test_llamacpp.py",
    "test_soak.py",
    "test_milvus.py",
    "test_classifier.py",
)


def pytest_collection_modifyitems(config, items):
    """Tests of the LONGEST_FILES first, in that order; every file's tests stay together and in their order."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FILES)))


DOCUMENTS = [
    (
        "croc",
        "Crocodile",
        "Crocodiles have a V-shaped, pointed snout, while alligators have a wider U-shaped snout. "
        "When a crocodile closes its mouth, the fourth tooth of the lower jaw stays visible. Crocodiles tolerate salt "
        "water thanks to glands on the tongue and live in tropical regions of Africa, Asia, Australia and the Americas.",
    ),
    (
        "gator",
        "Alligator",
        "Alligators live mainly in fresh water in the south-eastern United States and in China. "
        "An alligator's upper jaw is wider than its lower jaw, so its lower teeth are hidden when the mouth is shut. "
        "Alligators are generally less aggressive towards people than saltwater crocodiles.",
    ),
    (
        "rome",
        "Decline of the Western Roman Empire",
        "Historians list many causes for the fall of the Western Roman Empire. "
        "Economic troubles, including heavy taxation and inflation, weakened the state. Repeated invasions by Germanic "
        "tribes and the Huns put pressure on the frontiers. Political instability, with frequent civil wars and short "
        "reigns, undermined central authority. The division of the empire into eastern and western halves left the west poorer.",
    ),
    (
        "bread",
        "Bread making",
        "To bake bread, first mix flour, water, salt and yeast into a dough. Knead the dough for about "
        "ten minutes until it is smooth and elastic. Let it rise in a warm place until it doubles in size. Shape the loaf, "
        "let it prove again, then bake it in a hot oven at about 220 degrees Celsius until the crust is brown.",
    ),
    (
        "nuclear",
        "Nuclear power debate",
        "Supporters of nuclear power argue that it produces electricity with very low "
        "carbon emissions and provides reliable baseload supply. Critics point to the risk of accidents such as Chernobyl "
        "and Fukushima, the unsolved problem of long-lived radioactive waste, and high construction costs. Studies find "
        "that deaths per unit of energy from nuclear are among the lowest of all sources.",
    ),
    (
        "guitar",
        "Learning guitar",
        "Beginners learning guitar are usually advised to practise for short periods every day "
        "rather than for long sessions once a week. Many teachers recommend starting with open chords and simple strumming "
        "patterns. An acoustic guitar with light strings is easier on the fingertips; some learners prefer a teacher, "
        "others learn from online lessons and songbooks.",
    ),
    (
        "photo",
        "Photosynthesis",
        "Photosynthesis is the process by which green plants use sunlight, water and carbon dioxide "
        "to produce glucose and oxygen. It takes place in the chloroplasts, which contain the green pigment chlorophyll. "
        "The light reactions capture energy and the Calvin cycle fixes carbon into sugars.",
    ),
]


def write_corpus(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for doc_id, title, text in DOCUMENTS:
            out.write(json.dumps({"id": doc_id, "title": title, "text": text}) + "\n")
    return path


@pytest.fixture(scope="session")
def small_index(tmp_path_factory) -> Path:
    from typedrag.index import build_index

    root = tmp_path_factory.mktemp("small")
    corpus = write_corpus(root / "corpus.jsonl")
    index_dir = root / "index"
    build_index([corpus], index_dir, passage_words=40, show_progress=False)
    return index_dir


@pytest.fixture(scope="session")
def retriever(small_index):
    """The small index searched with BM25 alone: the strategy tests' expectations are BM25 rankings (hybrid
    search has tests of its own, tests/test_hybrid.py, the README's comparison among them)."""
    from typedrag.index import open_retriever

    return open_retriever(small_index, "bm25")


@pytest.fixture(scope="session")
def stub_server():
    """One loopback OpenAI-protocol server for the whole session: starting one per test was most of the
    LLM path's test time. Tests take it through `stub`."""
    from typedrag.testing.openai_stub import OpenAIStubServer

    with OpenAIStubServer() as server:
        yield server


@pytest.fixture
def stub(stub_server):
    """The session's stub, afresh for this test: `stub(responder, delay=..., token_rate=...)` serves it
    (called bare, the default replies), nothing of an earlier test remembered."""
    stub_server.reset()
    return stub_server.reset


def require_shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA} (CI has it; a fresh clone does not)")
    return SHARED_DATA


def plan_call_of(result):
    """The result's plan call: the overview of a decomposing type may finish, and so be traced, before it."""
    return next(call for call in result.llm_calls if call.role.startswith("plan:"))


def raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF of these objects (1 is the catalog), with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def offline_pipeline(document: Path, index_dir: Path):
    """Offline plain answering over a BM25 index of one document, as the document readers and the reader see it."""
    from typedrag.engines.offline import OfflineEngine
    from typedrag.index import build_index, open_retriever
    from typedrag.pipeline import Pipeline
    from typedrag.reader import default_reader

    build_index([str(document)], index_dir, retrieval="bm25")
    return Pipeline(OfflineEngine(default_reader()), open_retriever(index_dir))


def read_blocks(path: Path) -> list:
    """The blocks of the one document at `path`, read without a problem."""
    from typedrag.corpus import iter_documents

    problems = []
    (doc,) = list(iter_documents([path], problems=problems))
    assert problems == []
    return list(doc.iter_blocks())


def quoted_pieces_of(path: Path, min_words: int = 3, max_words: int = 60) -> list:
    """(text, kind) of every piece an answer may quote from the passages of the one document at `path`."""
    from typedrag.corpus import iter_documents
    from typedrag.corpus.chunker import iter_passages
    from typedrag.reader import quoted_pieces

    (doc,) = list(iter_documents([path], problems=[]))
    return [
        piece
        for passage in iter_passages(doc)
        for piece in quoted_pieces(passage.text, passage.lines, min_words, max_words)
    ]
