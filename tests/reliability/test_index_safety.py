"""Index crash safety and integrity: SIGKILL mid-build, damaged or foreign indexes (also via the CLI),
and readers sharing one index while it is rebuilt."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import typedrag.index.manifest as manifest
import typedrag.index.tantivy.build as tantivy_build
from typedrag.index import IndexUnusableError, build_index, open_retriever
from typedrag.index.manifest import MANIFEST

from .conftest import assert_clean_failure, run_cli

QUERIES = [
    "crocodile snout",
    "Roman Empire fall",
    "bake bread dough",
    "nuclear waste",
    "guitar chords",
    "photosynthesis",
]


def results(retriever) -> list[list[tuple[str, float]]]:
    return [[(h.passage_id, h.score) for h in retriever.search(q, 5)] for q in QUERIES]


def leftovers(index_dir: Path) -> list[Path]:
    return sorted(index_dir.parent.glob(f".{index_dir.name}.building-*"))


def write_big_corpus(path: Path, documents: int = 80_000) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for i in range(documents):
            words = " ".join(f"term{(i * 7 + j * 13) % 20000}" for j in range(60))
            out.write(f'{{"id": "d{i}", "title": "Doc {i}", "text": "{words}."}}\n')
    return path


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_mid_build_keeps_the_previous_index_and_the_next_build_cleans_up(small_index, tmp_path):
    index_dir = tmp_path / "index"
    shutil.copytree(small_index, index_dir)
    before, manifest_bytes = results(open_retriever(index_dir)), (index_dir / MANIFEST).read_bytes()
    corpus = write_big_corpus(tmp_path / "big.jsonl")

    proc = subprocess.Popen(
        [sys.executable, "-m", "typedrag.cli", "index", str(corpus), "--index", str(index_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not leftovers(index_dir) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(1.0)  # well into adding documents
    assert proc.poll() is None, "the build finished before it could be killed; make the corpus bigger"
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    assert len(leftovers(index_dir)) == 1  # killed mid-build: no cleanup code ran
    assert (index_dir / MANIFEST).read_bytes() == manifest_bytes
    assert results(open_retriever(index_dir)) == before

    new_corpus = tmp_path / "new.jsonl"
    new_corpus.write_text(json.dumps({"id": "kiwi", "title": "Kiwi", "text": "The kiwi is a flightless bird."}) + "\n")
    build_index([new_corpus], index_dir, show_progress=False)
    assert leftovers(index_dir) == []  # the killed build's directory is gone, not piling up
    assert open_retriever(index_dir).search("flightless bird", 1)[0].passage_id == "kiwi#0"


def test_a_running_build_keeps_its_directory(small_index, tmp_path):
    index_dir = tmp_path / "index"
    running = tmp_path / f".index.building-{os.getpid()}-0000beef"  # this process is alive
    running.mkdir()
    build_index([small_index.parent / "corpus.jsonl"], index_dir, show_progress=False)
    assert running.is_dir()


def test_index_path_that_is_a_file_is_refused_and_left_alone(small_index, tmp_path):
    """Regression: `--index notes.txt` crashed with NotADirectoryError and a traceback."""
    notes = tmp_path / "notes.txt"
    notes.write_text("precious")
    proc = run_cli("index", str(small_index.parent / "corpus.jsonl"), "--index", str(notes))
    assert_clean_failure(proc, f"{notes} exists and is not a typedrag index")
    assert notes.read_text() == "precious"


# --- damaged and foreign indexes -----------------------------------------------------------


@pytest.fixture
def size_checked_index(small_index, tmp_path, monkeypatch) -> Path:
    """An index whose files are checked by size only at open, as the big segment files of a large index are. Built
    by one writer thread, so in one segment whatever the threads' timing: with two, which documents land in which
    segment's term dictionary varied from build to build, and damage to the middle third of each file sometimes
    missed every term the queries read (CI at 213beb1: "DID NOT RAISE", for `.term`)."""
    monkeypatch.setattr(manifest, "HASHED_MAX_BYTES", 0)
    monkeypatch.setattr(tantivy_build, "WRITER_THREADS", 1)
    index_dir = tmp_path / "size-checked"
    build_index([small_index.parent / "corpus.jsonl"], index_dir, passage_words=40, show_progress=False)
    return index_dir


def corrupt(path: Path, positions) -> None:
    data = bytearray(path.read_bytes())
    for i in positions:
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("suffix", [".store", ".term"])
def test_same_size_damage_found_at_search_is_an_index_error(size_checked_index, suffix):
    for path in size_checked_index.glob(f"*{suffix}"):
        size = path.stat().st_size
        corrupt(path, range(size // 10, size - size // 10))  # all but the edges: every term the queries read
    retriever = open_retriever(size_checked_index)  # sizes match: opening cannot tell
    with pytest.raises(IndexUnusableError, match=r"is damaged .*re-run `typedrag index"):
        results(retriever)


def test_random_damage_never_escapes_as_a_crash(size_checked_index, tmp_path):
    """Regression: flipped bytes in a term dictionary made tantivy panic (a BaseException) mid-question."""
    rng = random.Random(7)
    for trial in range(30):
        copy = tmp_path / f"trial{trial}"
        shutil.copytree(size_checked_index, copy)
        for path in sorted(copy.glob("*.term"), key=lambda p: p.stat().st_size):
            corrupt(path, [rng.randrange(path.stat().st_size) for _ in range(8)])
        try:
            results(open_retriever(copy))
        except IndexUnusableError:
            pass


def damage(index_dir: Path, kind: str) -> None:
    if kind == "truncated-segment":
        store = next(index_dir.glob("*.store"))
        store.write_bytes(store.read_bytes()[: store.stat().st_size // 2])
    elif kind == "tampered-meta":
        meta = index_dir / "meta.json"
        meta.write_bytes(meta.read_bytes().replace(b'"opstamp"', b'"opstamq"'))
    elif kind == "missing-manifest":
        (index_dir / MANIFEST).unlink()
    elif kind == "future-format":
        data = json.loads((index_dir / MANIFEST).read_text())
        (index_dir / MANIFEST).write_text(json.dumps({**data, "format_version": 99}))
    elif kind == "damaged-at-search":
        for store in index_dir.glob("*.store"):
            corrupt(store, range(store.stat().st_size // 3, 2 * store.stat().st_size // 3))


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("truncated-segment", "has the wrong size"),
        ("tampered-meta", "meta.json fails its checksum"),
        ("missing-manifest", "manifest.json is missing"),
        ("future-format", "has index format 99, this typedrag reads format 2"),
        ("damaged-at-search", "is damaged"),
    ],
)
def test_cli_refuses_an_unusable_index_with_the_fix(size_checked_index, small_index, tmp_path, kind, reason):
    index_dir = size_checked_index if kind == "damaged-at-search" else shutil.copytree(small_index, tmp_path / "index")
    damage(index_dir, kind)
    proc = run_cli(
        "ask", "How do crocodiles differ from alligators?", "--index", str(index_dir), "--type", "comparison"
    )
    assert_clean_failure(proc, reason, f"re-run `typedrag index SOURCE... --index {index_dir}`")


def test_cli_error_is_one_line(small_index, tmp_path):
    index_dir = shutil.copytree(small_index, tmp_path / "an-index-with-a-long-enough-name-to-need-wrapping")
    damage(index_dir, "missing-manifest")
    proc = run_cli("ask", "Why?", "--index", str(index_dir))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# --- concurrent readers ----------------------------------------------------------------------


def test_threads_sharing_one_retriever_see_one_whole_index_while_it_is_rebuilt(small_index, tmp_path):
    """Readers never fail and never see a mix: each search answers from the old index or the new one whole,
    and once the rebuilds end the retriever answers from the last one without being reopened."""
    index_dir = shutil.copytree(small_index, tmp_path / "index")
    shared = open_retriever(index_dir)
    expected = results(shared)
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "kiwi", "title": "Kiwi", "text": "The kiwi is a flightless bird."}) + "\n")
    kiwi_dir = tmp_path / "kiwi-index"
    build_index([other], kiwi_dir, show_progress=False)
    kiwi = results(open_retriever(kiwi_dir))
    errors: list[object] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                for query, old, new in zip(QUERIES, expected, kiwi):
                    found = [(h.passage_id, h.score) for h in shared.search(query, 5)]
                    if found not in (old, new):
                        errors.append(("a mix of two indexes", query, found))
            except Exception as error:  # noqa: BLE001 - any failure is the finding
                errors.append(error)

    threads = [threading.Thread(target=read) for _ in range(6)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(3):  # swap a new index in under the readers, and the old one's files out
            build_index([other], index_dir, show_progress=False)
            build_index([small_index.parent / "corpus.jsonl"], index_dir, passage_words=40, show_progress=False)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    assert results(shared) == expected and results(open_retriever(index_dir)) == expected
