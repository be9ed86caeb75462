"""A build whose output is no terminal (a log file, a CI job) still says how far it is, in plain lines."""

from __future__ import annotations

from typedrag.index import build_index
from typedrag.index import progress as build_progress


def test_a_build_on_no_terminal_prints_plain_progress_lines(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(build_progress, "PLAIN_EVERY", 0.0)  # a line at every step, not every 30 s
    for n in range(3):
        (tmp_path / "docs").mkdir(exist_ok=True)
        (tmp_path / "docs" / f"page{n}.txt").write_text(f"Page {n} says how comets glow when they near the Sun. " * 20)
    build_index([tmp_path / "docs"], tmp_path / "index", retrieval="hybrid", show_progress=True)
    out = capsys.readouterr()
    lines = (out.out + out.err).splitlines()
    assert any(line.startswith("reading: ") and " of 3 files" in line for line in lines), lines
    assert any(line.startswith("embedding (minilm): ") and " passages" in line for line in lines), lines
    assert not any("\x1b[" in line for line in lines)  # plain text, no terminal codes


def test_a_build_without_progress_prints_none(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(build_progress, "PLAIN_EVERY", 0.0)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.txt").write_text("Comets glow when they near the Sun. " * 20)
    build_index([tmp_path / "docs"], tmp_path / "index", retrieval="hybrid", show_progress=False)
    out = capsys.readouterr()
    assert "reading: " not in out.out + out.err and "embedding (" not in out.out + out.err
