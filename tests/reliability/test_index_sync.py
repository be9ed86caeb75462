"""Incremental indexing: re-running `typedrag index` on an existing index syncs it (issue 22, part 3).

Against real tantivy indexes on disk, the real CLI in subprocesses, a real `typedrag serve`, and a
SIGKILL in the middle of a sync.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from typedrag.corpus.readers import FileFilter
from typedrag.index import open_retriever
from typedrag.index.base import EmptyIndexError
from typedrag.index.tantivy import build_index, sync_index

from .conftest import assert_clean_failure, run_cli

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()


def write_folder(folder: Path, count: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        words = " ".join(WORDS[(n + i) % len(WORDS)] for i in range(40))
        (folder / f"note-{n:04d}.txt").write_text(f"Note number{n} is about {words}.\n", encoding="utf-8")
    return folder


def ids_for(retriever, query: str, k: int = 5) -> list[str]:
    return [hit.passage_id for hit in retriever.search(query, k)]


def test_a_rerun_adds_updates_and_removes_only_what_changed(tmp_path):
    folder = write_folder(tmp_path / "docs", 201)
    index_dir = tmp_path / "index"
    first = build_index([folder], index_dir, show_progress=False)
    assert (first.documents, first.synced) == (201, False)
    before = open_retriever(index_dir)
    kept_ids = ids_for(before, "number7", 1)
    (folder / "note-0003.txt").write_text("Note three now explains the zygomorphic orchid.\n", encoding="utf-8")
    (folder / "note-0004.txt").unlink()
    (folder / "note-9999.txt").write_text("A new note on the quokka of Rottnest Island.\n", encoding="utf-8")

    summary = sync_index([folder], index_dir, show_progress=False)

    assert summary.synced
    assert (summary.added, summary.updated, summary.removed, summary.unchanged) == (1, 1, 1, 199)
    assert summary.documents == 201
    after = open_retriever(index_dir)
    assert ids_for(after, "zygomorphic orchid", 1) == ["note-0003.txt#0"]
    assert ids_for(after, "quokka Rottnest", 1) == ["note-9999.txt#0"]
    assert not [i for i in ids_for(after, "number4", 20) if i.startswith("note-0004.txt")]
    assert ids_for(after, "number3", 3).count("note-0003.txt#0") == 0  # the old text of the edited file is gone
    assert ids_for(after, "number7", 1) == kept_ids  # an unchanged file keeps its passage ids: citations survive
    assert after.manifest["counts"]["documents"] == 201 and len(after.manifest["corpus"]["files"]) == 201
    # The retriever opened before the sync answers from the new index too, without being reopened.
    assert ids_for(before, "quokka Rottnest", 1) == ["note-9999.txt#0"]


def test_a_sync_gives_the_same_index_as_a_fresh_build(tmp_path):
    folder = write_folder(tmp_path / "docs", 30)
    synced, fresh = tmp_path / "synced", tmp_path / "fresh"
    build_index([folder], synced, show_progress=False)
    (folder / "note-0001.txt").write_text("Changed: the axolotl regrows its limbs.\n", encoding="utf-8")
    (folder / "note-0002.txt").unlink()
    sync_index([folder], synced, show_progress=False)
    build_index([folder], fresh, show_progress=False)
    one, two = (json.loads((d / "manifest.json").read_text()) for d in (synced, fresh))
    assert one["corpus"]["passages_sha256"] == two["corpus"]["passages_sha256"]
    assert one["corpus"]["files"] == two["corpus"]["files"]
    # The same passages are found; BM25 statistics still count deleted passages until segments merge, so
    # scores (and the order of near ties) may differ slightly from a fresh build's.
    for query in ["axolotl limbs", "number5", "number17", "alpha bravo", "kilo lima mike"]:
        one_ids, two_ids = ids_for(open_retriever(synced), query, 30), ids_for(open_retriever(fresh), query, 30)
        assert set(one_ids) == set(two_ids), query
    for query in ["axolotl limbs", "number5", "number17"]:  # one passage holds each: it leads in both
        assert ids_for(open_retriever(synced), query, 1) == ids_for(open_retriever(fresh), query, 1), query


def test_an_unchanged_corpus_reads_no_file_again(tmp_path, monkeypatch):
    folder = write_folder(tmp_path / "docs", 10)
    build_index([folder], tmp_path / "index", show_progress=False)
    import typedrag.index.ingest as ingest

    read = []
    real = ingest.read_file
    monkeypatch.setattr(ingest, "read_file", lambda file, **kw: read.append(file.key) or real(file, **kw))
    summary = sync_index([folder], tmp_path / "index", show_progress=False)
    assert read == [] and (summary.unchanged, summary.documents) == (10, 10)
    os.utime(folder / "note-0001.txt", ns=(1, 1))  # a new modification time alone is no change: the content decides
    assert sync_index([folder], tmp_path / "index", show_progress=False).unchanged == 10 and read == []


def test_keep_missing_adds_and_updates_without_removing(tmp_path):
    one, two = write_folder(tmp_path / "one", 3), tmp_path / "two"
    two.mkdir()
    (two / "other.txt").write_text("The pangolin is covered in scales.\n", encoding="utf-8")
    index_dir = tmp_path / "index"
    build_index([one], index_dir, show_progress=False)
    summary = sync_index([two], index_dir, show_progress=False, remove_missing=False)
    assert (summary.added, summary.removed, summary.unchanged, summary.documents) == (1, 0, 3, 4)
    assert ids_for(open_retriever(index_dir), "pangolin scales", 1) == ["other.txt#0"]
    assert ids_for(open_retriever(index_dir), "number1", 1) == ["note-0001.txt#0"]


def test_other_passage_words_rebuild_every_file(tmp_path):
    folder = write_folder(tmp_path / "docs", 5)
    build_index([folder], tmp_path / "index", show_progress=False)
    summary = sync_index([folder], tmp_path / "index", passage_words=20, show_progress=False)
    assert not summary.synced and summary.documents == 5
    assert open_retriever(tmp_path / "index").manifest["engine"]["passage_words"] == 20


def test_sources_with_no_readable_document_leave_the_index_as_it_was(tmp_path):
    folder = write_folder(tmp_path / "docs", 4)
    index_dir = tmp_path / "index"
    build_index([folder], index_dir, show_progress=False)
    manifest = (index_dir / "manifest.json").read_bytes()
    for path in folder.iterdir():
        path.unlink()
    (folder / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    with pytest.raises(EmptyIndexError, match="no readable document"):
        sync_index([folder], index_dir, show_progress=False)
    assert (index_dir / "manifest.json").read_bytes() == manifest
    assert ids_for(open_retriever(index_dir), "number2", 1) == ["note-0002.txt#0"]
    proc = run_cli("index", str(folder), "--index", str(index_dir))
    skipped, error = proc.stderr.strip().split("\nerror: ")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "picture.png" in skipped and "unsupported file type" in skipped  # what was skipped, and why, first
    assert error.startswith("no readable document in the sources (1 × unsupported file type)")
    assert "is left as it was" in error and "typedrag reads" in error and "PDF" in error
    assert (index_dir / "manifest.json").read_bytes() == manifest


def test_cli_prints_what_the_sync_did(tmp_path):
    folder = write_folder(tmp_path / "docs", 6)
    index_dir = tmp_path / "index"
    assert run_cli("index", str(folder), "--index", str(index_dir)).returncode == 0
    (folder / "note-0000.txt").write_text("Edited: the okapi lives in the Congo.\n", encoding="utf-8")
    proc = run_cli("index", str(folder), "--index", str(index_dir))
    assert proc.returncode == 0, proc.stderr
    assert "added 0, updated 1, removed 0, unchanged 5 in" in proc.stdout
    rebuilt = run_cli("index", str(folder), "--index", str(index_dir), "--rebuild")
    assert "indexed 6 documents into 6 passages" in rebuilt.stdout


# --- killed mid-sync, and a server answering through a sync ------------------------------------------


def index_process(folder: Path, index_dir: Path) -> subprocess.Popen:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "typedrag.cli", "index", str(folder), "--index", str(index_dir)],
        env=clean,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for(condition, what: str, alive: subprocess.Popen):
    """`condition()` once it holds, polled for as long as `alive` (the process that brings it about, or serves it)
    runs: no deadline, which a loaded machine overran (a 400-file build took 108 of the 120 s it was given), but a
    process that ends first fails the wait at once."""
    while not (found := condition()):
        assert alive.poll() is None, f"{what}: the process ended first (exit {alive.returncode})"
        time.sleep(0.01)
    return found


def building_dirs(index_dir: Path) -> list[Path]:
    return list(index_dir.parent.glob(f".{index_dir.name}.building-*"))


@pytest.mark.parametrize("when", ["as soon as it starts writing", "once it has written new segment files"])
def test_a_sync_killed_at_any_point_leaves_the_index_usable_and_a_rerun_completes_it(tmp_path, when):
    folder = write_folder(tmp_path / "docs", 300)
    index_dir = tmp_path / "index"
    build_index([folder], index_dir, show_progress=False)
    old_files = set(json.loads((index_dir / "manifest.json").read_text())["files"])
    write_folder(tmp_path / "more", 0)
    for n in range(300, 900):  # enough new files that the sync is still reading when it is killed
        (folder / f"note-{n:04d}.txt").write_text(f"Later note{n} on the tuatara of New Zealand.\n", encoding="utf-8")
    process = index_process(folder, index_dir)
    try:
        if when.startswith("as soon"):
            wait_for(lambda: building_dirs(index_dir), "the sync's working directory", process)
        else:
            wait_for(
                lambda: any(p.name not in old_files for d in building_dirs(index_dir) for p in d.glob("*.store")),
                "a new segment file",
                process,
            )
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    assert process.returncode == -signal.SIGKILL
    survivor = open_retriever(index_dir)  # the previous index, whole
    assert survivor.manifest["counts"]["documents"] == 300
    assert ids_for(survivor, "number12", 1) == ["note-0012.txt#0"]
    summary = sync_index([folder], index_dir, show_progress=False)  # the rerun completes it
    assert (summary.added, summary.unchanged, summary.documents) == (600, 300, 900)
    assert not building_dirs(index_dir)  # the killed run's working directory was cleared
    assert ids_for(open_retriever(index_dir), "note850 tuatara", 1) == ["note-0850.txt#0"]


def test_two_syncs_of_one_index_at_once_are_refused(tmp_path):
    folder = write_folder(tmp_path / "docs", 400)
    index_dir = tmp_path / "index"
    first = index_process(folder, index_dir)
    try:
        wait_for(lambda: building_dirs(index_dir), "the first sync to start", first)
        second = run_cli("index", str(folder), "--index", str(index_dir))
        assert_clean_failure(second, "another typedrag build is writing")
    finally:
        first.wait()
    assert first.returncode == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_keeps_answering_through_a_sync_and_then_sees_the_new_documents(tmp_path):
    folder = write_folder(tmp_path / "docs", 300)
    index_dir = tmp_path / "index"
    build_index([folder], index_dir, show_progress=False)
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))}
    server = subprocess.Popen(
        [sys.executable, "-m", "typedrag.cli", "serve", "--index", str(index_dir), "--port", str(port)],
        env=clean,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def ask(question: str) -> httpx.Response:
        return httpx.post(f"{url}/v1/answer", json={"question": question, "method": "rag"}, timeout=60)

    def sources(question: str) -> list[str]:
        return [s["passage_id"] for s in ask(question).json()["sources"]]

    try:
        wait_for(lambda: _healthy(url), "the server to start", server)
        for n in range(300, 700):
            (folder / f"note-{n:04d}.txt").write_text(f"Later note{n} on the kakapo parrot.\n", encoding="utf-8")
        sync = index_process(folder, index_dir)
        statuses = []
        while sync.poll() is None:
            statuses.append(ask("What is number12 about?").status_code)
        assert sync.returncode == 0, sync.stderr.read()
        assert statuses and set(statuses) == {200}  # answered all through the sync
        found = wait_for(lambda: "note-0650.txt#0" in sources("note650 kakapo parrot"), "the new documents", server)
        assert found
    finally:
        server.terminate()
        server.wait()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


# --- real manuals, end to end through the CLI -------------------------------------------------------

POSTGRES_HTML = Path("/usr/share/doc/postgresql-doc-15/html")
R_MANUALS = Path("/usr/share/R/doc/manual")
NAV_LINE = re.compile(r"^(?:Prev|Next|Up|Home)(?:\s+(?:Prev|Next|Up|Home))*$|Submit correction", re.M)


def test_a_real_html_manual_indexes_every_page_without_navigation_or_markup(tmp_path):
    if not POSTGRES_HTML.is_dir():
        pytest.skip("needs Debian's postgresql-doc-15 (apt-get install postgresql-doc-15); CI installs it")
    pages = sorted(POSTGRES_HTML.glob("*.html"))
    proc = run_cli(
        "index", str(POSTGRES_HTML), "--index", str(tmp_path / "index"), "--retrieval", "bm25"
    )  # reading, not vectors
    assert proc.returncode == 0, proc.stderr
    assert f"indexed {len(pages):,} documents" in proc.stdout
    skipped = [
        line for line in proc.stderr.splitlines() if "skipped" in line
    ]  # "a.png: unsupported file type ..., skipped"
    assert skipped and all(re.search(r"\.(svg|css|png)\b", line) for line in skipped)  # images and style sheet only
    retriever = open_retriever(tmp_path / "index")
    passages = {
        h.passage_id: h.passage
        for q in ("vacuum", "index", "table", "function", "server", "query", "role")
        for h in retriever.search(q, 200)
    }
    assert len(passages) > 500
    for passage in passages.values():
        assert not NAV_LINE.search(passage.text), passage.passage_id
        assert not re.search(r"</?[a-z]+[ >]|&(?:amp|lt|gt|nbsp);", passage.text), passage.passage_id
    assert sum(bool(p.section) for p in passages.values()) > len(passages) / 2
    answer = json.loads(
        run_cli(
            "ask",
            "How do I reclaim disk space from dead rows?",
            "--index",
            str(tmp_path / "index"),
            "--method",
            "rag",
            "--json",
        ).stdout
    )
    assert answer["sources"] and all("section" in s for s in answer["sources"])
    assert any(s["section"] for s in answer["sources"])


def test_real_pdf_manuals_give_a_page_on_every_source(tmp_path):
    manuals = [R_MANUALS / "R-intro.pdf", R_MANUALS / "R-admin.pdf"]
    if not all(m.is_file() for m in manuals):
        pytest.skip("needs Debian's r-doc-pdf (apt-get install r-doc-pdf); CI installs it")
    folder = tmp_path / "pdfs"
    folder.mkdir()
    for manual in manuals:
        shutil.copy(manual, folder / manual.name)  # a copy: a link leading out of the folder is skipped by design
    # A hang guard, not a speed bound. The PDF reader's pages are the subject, not vectors (tests/test_hybrid.py):
    # embedding the two manuals' 933 passages took 30 s of CPU of the 32 their index took.
    assert (
        run_cli("index", str(folder), "--index", str(tmp_path / "index"), "--retrieval", "bm25", timeout=900).returncode
        == 0
    )  # pages, not vectors
    result = json.loads(
        run_cli(
            "ask",
            "How do I install packages into a personal library?",
            "--index",
            str(tmp_path / "index"),
            "--method",
            "rag",
            "--json",
            timeout=900,
        ).stdout
    )
    assert result["sources"] and all(isinstance(s["page"], int) and s["page"] >= 1 for s in result["sources"])
    assert any(s["section"] for s in result["sources"])


def test_a_docx_made_by_python_docx_indexes_with_its_headings_as_sections(tmp_path):
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_heading("Field guide", level=0)
    document.add_heading("Marsupials", level=1)
    document.add_paragraph("The quokka is a small marsupial found on Rottnest Island.")
    document.add_heading("Birds", level=1)
    document.add_paragraph("The kakapo is a flightless nocturnal parrot of New Zealand.")
    folder = tmp_path / "docs"
    folder.mkdir()
    document.save(folder / "guide.docx")
    assert run_cli("index", str(folder), "--index", str(tmp_path / "index")).returncode == 0
    hit = open_retriever(tmp_path / "index").search("kakapo parrot", 1)[0]
    assert (hit.passage.title, hit.passage.section) == ("Field guide", "Birds")


def test_a_sync_after_the_chunker_changed_rebuilds_every_file(tmp_path, monkeypatch):
    """Passages of unchanged files were cut by the old rules: an index from another chunker version is rebuilt."""
    import typedrag.index.tantivy.build as tantivy_build

    folder = write_folder(tmp_path / "docs", 3)
    build_index([folder], tmp_path / "index", show_progress=False)
    monkeypatch.setattr(tantivy_build, "CHUNKER_VERSION", 99)
    summary = sync_index([folder], tmp_path / "index", show_progress=False)
    assert not summary.synced and summary.documents == 3
    assert open_retriever(tmp_path / "index").manifest["engine"]["chunker"] == 99


# --- issue 55 E7: which files of a folder are read (--include / --exclude), kept by later syncs ---------------------


def write_manual(folder: Path) -> Path:
    pages = {
        "index.html": "Welcome to the manual of the frobnicator, a tool that sorts your socks.",
        "guide/install.html": "Install the frobnicator with pip, then run frob init in your sock drawer.",
        "changelog.html": "Version two of the frobnicator fixed the sock parser and changed the drawer layout.",
        "changes/changelog-1.html": "Version one of the frobnicator was the first release to sort woollen socks.",
        "release-3.html": "Release three of the frobnicator brings faster sorting of striped socks.",
        "notes.md": "# Notes\n\nA Markdown note on how the frobnicator treats odd socks.",
    }
    for name, text in pages.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            text if name.endswith(".md") else f"<html><body><h1>{name}</h1><p>{text}</p></body></html>",
            encoding="utf-8",
        )
    return folder


def held_files(index_dir: Path) -> list[str]:
    return sorted(json.loads((index_dir / "manifest.json").read_text())["corpus"]["files"])


def test_include_and_exclude_choose_the_files_of_a_folder_and_a_later_sync_keeps_them(tmp_path):
    """Issue 55 E7: a manual's changelog pages were cited by 11 of 24 answers, and `typedrag index` had no way to leave
    them out. The filters are recorded in the index, so a sync given no filters applies them again; new ones
    replace them, and files they now leave out leave the index (with --keep-missing too)."""
    folder = write_manual(tmp_path / "manual")
    index_dir = tmp_path / "index"
    args = ["index", str(folder), "--index", str(index_dir)]
    built = run_cli(*args, "--include", "*.html", "--exclude", "changelog*", "--exclude", "release-*")
    assert built.returncode == 0, built.stderr
    assert held_files(index_dir) == ["guide/install.html", "index.html"]
    assert (
        "left out 4 files of the folders by --include '*.html' --exclude 'changelog*' --exclude 'release-*'"
        in built.stderr
    )
    manifest = json.loads((index_dir / "manifest.json").read_text())
    assert manifest["corpus"]["filters"] == {"include": ["*.html"], "exclude": ["changelog*", "release-*"]}

    (folder / "changelog.html").write_text("<p>Version four of the frobnicator.</p>", encoding="utf-8")
    (folder / "changes" / "changelog-5.html").write_text("<p>Version five of the frobnicator.</p>", encoding="utf-8")
    synced = run_cli(*args)  # no filters given: the index's
    assert synced.returncode == 0, synced.stderr
    assert "added 0, updated 0, removed 0, unchanged 2" in synced.stdout
    assert held_files(index_dir) == ["guide/install.html", "index.html"]

    widened = run_cli(*args, "--exclude", "changes/")  # new filters: every file but the changes/ folder's
    assert widened.returncode == 0, widened.stderr
    assert held_files(index_dir) == ["changelog.html", "guide/install.html", "index.html", "notes.md", "release-3.html"]

    narrowed = run_cli(*args, "--keep-missing", "--exclude", "*.md", "--exclude", "**/release-*")
    assert narrowed.returncode == 0, narrowed.stderr
    assert "removed 2" in narrowed.stdout
    assert held_files(index_dir) == [
        "changelog.html",
        "changes/changelog-1.html",
        "changes/changelog-5.html",
        "guide/install.html",
        "index.html",
    ]
    assert [
        hit.passage_id
        for hit in open_retriever(index_dir).search("striped socks release three", 10)
        if "release" in hit.passage_id
    ] == []

    cleared = run_cli(*args, "--include", "*")
    assert cleared.returncode == 0, cleared.stderr
    assert len(held_files(index_dir)) == 7


def test_a_file_named_on_the_command_line_is_read_whatever_the_filters(tmp_path):
    folder = write_manual(tmp_path / "manual")
    index_dir = tmp_path / "index"
    summary = sync_index(
        [folder, folder / "notes.md"], index_dir, show_progress=False, filters=FileFilter(exclude=("*.md", "changes"))
    )
    assert held_files(index_dir) == ["changelog.html", "guide/install.html", "index.html", "notes.md", "release-3.html"]
    assert summary.left_out == 2  # notes.md in the folder, and changes/changelog-1.html


def test_index_help_explains_the_filters():
    shown = " ".join(word for word in run_cli("index", "--help", env={"COLUMNS": "250"}).stdout.split() if word != "│")
    assert (
        "--include" in shown
        and "--exclude" in shown
        and "'changelog*'" in shown
        and "a later sync applies the same filters" in shown
    )
