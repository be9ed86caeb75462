"""Issue 13, items 1 and 2: an index build never deletes what is not a typedrag index, takes a lock,
cleans up after a kill mid-swap; a read-only index opens, and its failure never says "rebuild"."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from typedrag.errors import UserError
from typedrag.index import build_index, open_retriever
from typedrag.index.base import IndexUnusableError
from typedrag.index.manifest import MANIFEST

from .conftest import assert_clean_failure, run_cli


@pytest.fixture
def corpus(small_index) -> Path:
    return small_index.parent / "corpus.jsonl"


def test_a_folder_with_a_foreign_manifest_json_is_never_replaced(corpus, tmp_path):
    web = tmp_path / "w"
    (web / "src").mkdir(parents=True)
    (web / MANIFEST).write_text("{}")
    (web / "src" / "main.js").write_text("code")
    proc = run_cli("index", str(corpus), "--index", str(web))
    assert_clean_failure(proc, "not a typedrag index")
    assert (web / "src" / "main.js").read_text() == "code"
    assert (web / MANIFEST).read_text() == "{}"


def test_an_index_with_a_foreign_file_added_is_not_replaced(corpus, small_index, tmp_path):
    index_dir = shutil.copytree(small_index, tmp_path / "index")
    (index_dir / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="notes.txt"):
        build_index([corpus], index_dir, show_progress=False)
    assert (index_dir / "notes.txt").read_text() == "mine"


def test_a_manifest_lookalike_without_typedrag_content_is_refused(corpus, tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    (target / MANIFEST).write_text(json.dumps({"format_version": 1, "files": {}}))  # no engine, no typedrag_version
    with pytest.raises(UserError, match="not a typedrag index"):
        build_index([corpus], target, show_progress=False)
    assert (target / MANIFEST).exists()


def test_a_typedrag_index_is_still_rebuilt_in_place(corpus, small_index, tmp_path):
    index_dir = shutil.copytree(small_index, tmp_path / "index")
    build_index([corpus], index_dir, passage_words=30, show_progress=False)
    assert json.loads((index_dir / MANIFEST).read_text())["engine"]["passage_words"] == 30


@pytest.mark.parametrize("where", ["dot", "parent"])
def test_index_into_the_current_folder_or_a_parent_is_a_one_line_error(corpus, tmp_path, where):
    work = tmp_path / "work" / "sub"
    work.mkdir(parents=True)
    (work / "keep.txt").write_text("keep")
    target = "." if where == "dot" else str(tmp_path / "work")
    proc = run_cli("index", str(corpus), "--index", target, cwd=work)
    assert_clean_failure(proc, "current folder")
    assert (work / "keep.txt").read_text() == "keep"


def test_index_onto_a_mount_point_is_refused(corpus, tmp_path):
    if not os.path.ismount("/proc"):
        pytest.skip("no /proc mount point to test with")
    with pytest.raises(UserError, match="mount point"):
        build_index([corpus], Path("/proc"), show_progress=False)


def test_a_concurrent_build_into_the_same_folder_is_refused(corpus, tmp_path):
    index_dir = tmp_path / "index"
    lock = tmp_path / ".index.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another build holds it
        with pytest.raises(UserError, match="another typedrag build"):
            build_index([corpus], index_dir, show_progress=False)
    assert not index_dir.exists()
    build_index([corpus], index_dir, show_progress=False)  # released: builds


def test_a_build_whose_lock_file_was_removed_while_it_opened_it_locks_the_name_again(corpus, tmp_path, monkeypatch):
    """Issue 55 E12: the lock file is removed when a build ends (the README's first command left `.demo-index.lock`
    in the user's checkout). A build that opened the file just before its holder removed it must not go on
    holding a lock on a file no other build can see: it locks the name anew."""
    from typedrag.index.tantivy import folder

    lock = tmp_path / ".index.lock"
    lock.write_bytes(b"")
    opened: list[str] = []

    def open_then_removed(path, mode="r", *args, **kwargs):
        handle = open(path, mode, *args, **kwargs)
        if Path(path) == lock:
            opened.append(mode)
            if len(opened) == 1:
                lock.unlink()  # the build that held it ended between this open and the flock
        return handle

    monkeypatch.setattr(folder, "open", open_then_removed, raising=False)
    build_index([corpus], tmp_path / "index", show_progress=False)
    assert len(opened) == 2 and not lock.exists() and open_retriever(tmp_path / "index").search("crocodile snout", 1)


def test_old_folders_left_by_a_kill_during_the_swap_are_cleaned_up(corpus, small_index, tmp_path):
    index_dir = shutil.copytree(small_index, tmp_path / "index")
    stale = shutil.copytree(small_index, tmp_path / ".index.old-deadbeef")  # killed after the swap's first rename
    build_index([corpus], index_dir, show_progress=False)
    assert not stale.exists()
    assert open_retriever(index_dir).search("crocodile snout", 1)


def test_a_kill_between_the_two_renames_restores_the_old_index(corpus, small_index, tmp_path):
    """Killed after `index -> .old-*` but before `.building -> index`: the old index is the only one there is."""
    old = shutil.copytree(small_index, tmp_path / ".index.old-deadbeef")
    before = (old / MANIFEST).read_bytes()
    index_dir = tmp_path / "index"
    with pytest.raises(Exception):
        build_index([tmp_path / "missing.jsonl"], index_dir, show_progress=False)  # the next build fails
    assert (index_dir / MANIFEST).read_bytes() == before  # ...and the old index is back in place
    assert not old.exists()


# --- item 2: read-only opening --------------------------------------------------------------------


def _read_only_copy(small_index: Path, tmp_path: Path):
    """A read-only view of a copy of the index: a read-only bind mount (root ignores chmod), else chattr +i."""
    copy = shutil.copytree(small_index, tmp_path / "rw")
    view = tmp_path / "ro"
    view.mkdir()
    bind = subprocess.run(["mount", "--bind", str(copy), str(view)], capture_output=True)
    if bind.returncode == 0:
        ro = subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], capture_output=True)
        if ro.returncode == 0:
            return view, lambda: subprocess.run(["umount", str(view)], check=False)
        subprocess.run(["umount", str(view)], check=False)
    view.rmdir()
    paths = [copy, *copy.iterdir()]
    chattr = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True)
    if chattr.returncode == 0:
        return copy, lambda: subprocess.run(["chattr", "-i", *map(str, paths)], check=False)
    if os.geteuid() != 0:
        copy.chmod(0o555)
        for p in copy.iterdir():
            p.chmod(0o444)
        return copy, lambda: copy.chmod(0o755)
    pytest.skip(f"cannot make a read-only folder here: mount said {bind.stderr!r}, chattr said {chattr.stderr!r}")


@pytest.fixture
def read_only_index(small_index, tmp_path):
    view, undo = _read_only_copy(small_index, tmp_path)
    try:
        with pytest.raises(OSError):
            (view / "probe").write_text("x")  # really read-only
        yield view
    finally:
        undo()


def test_a_read_only_index_opens_and_searches(read_only_index, small_index):
    before = sorted(p.name for p in read_only_index.iterdir())
    hits = open_retriever(read_only_index).search("crocodile snout", 3)
    assert hits and hits[0].passage.doc_id == "croc"
    assert [h.passage_id for h in hits] == [
        h.passage_id for h in open_retriever(small_index).search("crocodile snout", 3)
    ]
    assert sorted(p.name for p in read_only_index.iterdir()) == before


def test_ask_on_a_read_only_index_works(read_only_index):
    proc = run_cli("ask", "Crocodile or alligator: which is more dangerous?", "--index", str(read_only_index), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sources"]


def test_opening_never_writes_into_the_index_folder(small_index, tmp_path):
    index_dir = shutil.copytree(small_index, tmp_path / "index")
    for lock in index_dir.glob(".tantivy-*.lock"):
        lock.unlink()
    before = sorted(p.name for p in index_dir.iterdir())
    open_retriever(index_dir).search("bread", 1)
    assert sorted(p.name for p in index_dir.iterdir()) == before


def test_a_lock_failure_does_not_say_rebuild(small_index, tmp_path, monkeypatch):
    import tantivy

    def refuse(path):
        raise ValueError("Failed to acquire Lockfile: IoError(Os { code: 30, kind: ReadOnlyFilesystem })")

    monkeypatch.setattr(tantivy.Index, "open", staticmethod(refuse))
    with pytest.raises(IndexUnusableError) as caught:
        open_retriever(small_index)
    assert "rebuild" not in str(caught.value)
    assert "read-only" in str(caught.value) or "lock" in str(caught.value)
