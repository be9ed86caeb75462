"""Issue 35: the fourth hostile round's ingestion and reader defects, each against real files and a real index.

D9   a file that vanished or changed between the scan and its read is read again on the next sync.
D15  a file swapped for a symlink to an outside file after the listing is never read.
D1   a DOCX zip bomb is refused from its declared sizes, in bounded memory.
D2   a DOCX with thousands of styles is read with one style lookup per document, not per paragraph.
D3   HTML full of unclosed container tags is read in linear time.
D4   a PDF whose pages cannot load, and a MemoryError in a reader, are reported skips.
D5   a FIFO or a character device is skipped with what it is, never read.
D6   a huge line in a .jsonl.gz is reported as too long, in bounded memory.
D7   only the first problems are kept, the rest counted.
D8   the pool's workers exit when their parent is killed.
D10  a full disk is one line, exit 2, the previous index unchanged.
D11  file-name titles are cleaned as metadata titles are.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import typedrag.index.tantivy_index as tantivy_index
from typedrag.index import open_retriever
from typedrag.index.tantivy_index import sync_index

from .conftest import run_cli


def texts_in(index_dir: Path) -> str:
    retriever = open_retriever(index_dir)
    return "\n".join(hit.passage.text for hit in retriever.search("okapi quokka pangolin stub secret", 50))


def after_scan(monkeypatch, action) -> None:
    """Run `action()` once, right after the sync's scan hashed the files and before any is read: the window
    in which a file can vanish, change or be swapped."""
    real = tantivy_index.scan

    def scan_then_act(*args, **kwargs):
        found = real(*args, **kwargs)
        action()
        return found

    monkeypatch.setattr(tantivy_index, "scan", scan_then_act)


# --- D9: what was read, not what was scanned ------------------------------------------------------------


def test_a_file_that_vanished_before_its_read_is_read_on_the_next_sync(tmp_path, monkeypatch):
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    (docs / "a.txt").write_text("The okapi lives in the rainforest of the Congo.\n")
    note = docs / "b-note.txt"
    note.write_text("The quokka lives on Rottnest Island.\n")
    sync_index([docs], index_dir, show_progress=False)
    note.write_text("The quokka lives on Rottnest Island and smiles for photos.\n")
    away = tmp_path / "away.txt"
    after_scan(monkeypatch, lambda: note.rename(away))
    first = sync_index([docs], index_dir, show_progress=False)
    assert [p.location for p in first.problems] == [str(note)]
    monkeypatch.undo()
    away.rename(note)  # back, byte for byte

    second = sync_index([docs], index_dir, show_progress=False)

    assert second.updated == 1 and second.documents == 2
    assert "smiles for photos" in texts_in(index_dir)


def test_a_file_rewritten_during_its_read_is_read_again_on_the_next_sync(tmp_path, monkeypatch):
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    note = docs / "b-note.txt"
    whole = "The pangolin is covered in scales and eats ants.\n"
    note.write_text(whole)
    import typedrag.corpus.readers as readers

    real = readers._parse

    def torn(path, kind, *args, **kwargs):  # the file is cut to a stub while it is being read
        with open(note, "w") as f:
            f.write("stub\n")
        return real(path, kind, *args, **kwargs)

    monkeypatch.setattr(readers, "_parse", torn)
    first = sync_index([docs], index_dir, show_progress=False)
    assert any("changed while it was being indexed" in note_ for note_ in first.notes), first.notes
    monkeypatch.undo()
    note.write_text(whole)  # restored: the same bytes the first scan hashed

    second = sync_index([docs], index_dir, show_progress=False)

    assert second.updated == 1
    assert "pangolin is covered in scales" in texts_in(index_dir)


def test_a_file_changed_between_scan_and_read_is_read_again_on_the_next_sync(tmp_path, monkeypatch):
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    note = docs / "b-note.txt"
    whole = "The pangolin is covered in scales and eats ants.\n"
    note.write_text(whole)
    after_scan(monkeypatch, lambda: note.write_text("stub\n"))
    sync_index([docs], index_dir, show_progress=False)
    monkeypatch.undo()
    note.write_text(whole)

    second = sync_index([docs], index_dir, show_progress=False)

    assert second.updated == 1
    assert "pangolin is covered in scales" in texts_in(index_dir)


# --- D15: the outside check at the moment of reading ------------------------------------------------------


def test_a_file_swapped_for_a_symlink_to_an_outside_file_after_the_listing_is_not_read(tmp_path, monkeypatch):
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    (docs / "a.txt").write_text("The okapi lives in the rainforest of the Congo.\n")
    note = docs / "b-note.txt"
    note.write_text("The quokka lives on Rottnest Island.\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("The secret pangolin password is hunter2.\n")

    def swap():
        link = docs / "b-note.txt.tmp"
        link.symlink_to(outside)
        link.rename(note)  # ln -sf outside c/b-note.txt.tmp && mv -f c/b-note.txt.tmp c/b-note.txt

    after_scan(monkeypatch, swap)
    summary = sync_index([docs], index_dir, show_progress=False)

    assert "hunter2" not in texts_in(index_dir)
    assert [(p.location, p.reason) for p in summary.problems] == [
        (str(note), "symbolic link to a file outside the corpus folder, skipped")
    ]
    # and the next sync refuses it too (at the listing this time)
    monkeypatch.undo()
    again = sync_index([docs], index_dir, show_progress=False)
    assert "hunter2" not in texts_in(index_dir) and again.skipped == 1


def test_a_file_swapped_for_a_fifo_after_the_listing_is_skipped_not_waited_on(tmp_path, monkeypatch):
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    (docs / "a.txt").write_text("The okapi lives in the rainforest of the Congo.\n")
    note = docs / "b-note.txt"
    note.write_text("The quokka lives on Rottnest Island.\n")

    def swap():
        note.unlink()
        os.mkfifo(note)

    after_scan(monkeypatch, swap)
    summary = sync_index([docs], index_dir, show_progress=False)
    assert [(p.location, p.reason) for p in summary.problems] == [(str(note), "a named pipe (FIFO), not a regular file, skipped")]
    assert summary.documents == 1


# --- D5: FIFOs and devices ----------------------------------------------------------------------------------


def test_a_fifo_in_a_corpus_folder_is_skipped_with_what_it_is(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The okapi lives in the rainforest of the Congo.\n")
    os.mkfifo(docs / "pipe.txt")
    proc = run_cli("index", str(docs), "--index", str(tmp_path / "index"), timeout=300)  # was: waited forever
    assert proc.returncode == 0, proc.stderr
    assert f"skipped {docs / 'pipe.txt'}: a named pipe (FIFO), not a regular file, skipped" in " ".join(proc.stderr.split())
    assert "indexed 1 documents" in proc.stdout


def test_a_fifo_or_a_device_given_directly_is_named_for_what_it_is(tmp_path):
    os.mkfifo(tmp_path / "pipe.md")
    proc = run_cli("index", str(tmp_path / "pipe.md"), "/dev/zero", "--index", str(tmp_path / "index"), timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    squashed = " ".join(proc.stderr.split())
    assert "error: no readable document in the sources" in squashed
    assert f"skipped {tmp_path / 'pipe.md'}: a named pipe (FIFO), not a regular file, skipped" in squashed
    assert "skipped /dev/zero: a character device, not a regular file, skipped" in squashed
    assert "no such file" not in squashed


# --- D11: file-name titles ----------------------------------------------------------------------------------

HOSTILE_NAME = "evil\nname\x1b]52;c;cHduZWQ=\x07\x1b[2J \u202eevil\u202c"


@pytest.mark.parametrize("suffix", [".txt", ".md", ".html", ".pdf", ".docx"])
def test_a_file_name_title_is_cleaned_as_a_metadata_title_is(tmp_path, suffix):
    import docx

    from typedrag.corpus import iter_documents

    from test_formats import pdf_bytes

    path = tmp_path / f"{HOSTILE_NAME}{suffix}"
    if suffix == ".html":
        path.write_text("<html><body><p>Bees make honey from nectar.</p></body></html>")
    elif suffix == ".pdf":
        path.write_bytes(pdf_bytes([[(72, 700, "Bees make honey from nectar.")]]))
    elif suffix == ".docx":
        document = docx.Document()
        document.add_paragraph("Bees make honey from nectar.")
        document.save(path)
    else:
        path.write_text("Bees make honey from nectar.\n")
    problems = []
    (doc,) = list(iter_documents([tmp_path], problems=problems))
    assert problems == []
    assert doc.title == "evil name evil", repr(doc.title)  # was the raw name: a newline, OSC 52, a clear, an override
