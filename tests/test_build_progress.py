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


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_plain_line_has_a_rate_and_time_left_when_a_batch_takes_longer_than_rich_looks_back(monkeypatch):
    """Issue 55 E6 / 57 P11: one batch of 256 passages every 40 s on a busy machine; rich estimates its speed from
    the last 30 s only, so it had none to show, and the plain lines said neither how fast nor how long."""
    from io import StringIO

    from rich.console import Console

    from typedrag.index.dense import _progress

    monkeypatch.setattr(build_progress, "PLAIN_EVERY", 30.0)
    clock = FakeClock()
    out = StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    progress, task = _progress(True, 2560, "embedding (minilm)", "passages", console=console, get_time=clock)
    for _ in range(3):
        clock.now += 40
        progress.update(task, advance=256)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("embedding")]
    assert len(lines) == 3, lines
    assert lines[0] == "embedding (minilm): 256 of 2,560 passages, 6.4 passages/s, about 6 min left", lines
    assert lines[-1] == "embedding (minilm): 768 of 2,560 passages, 6.4 passages/s, about 5 min left", lines
    column = build_progress.TimeLeft().render(progress._tasks[task]).plain
    assert (
        column == "about 5 min left"
        and build_progress.Rate("passages").render(progress._tasks[task]).plain == "6.4 passages/s"
    )


def test_the_bar_shows_every_passage_when_it_stops(tmp_path, monkeypatch):
    """Issue 57 P11: the last, partial batch was embedded after the bar stopped (10240/10356 on screen)."""
    shown: list[tuple[float, float]] = []
    stop = build_progress.LoggedProgress.stop

    def recording_stop(self):
        shown.extend((task.completed, task.total) for task in self.tasks if task.description == "embedding")
        stop(self)

    monkeypatch.setattr(build_progress.LoggedProgress, "stop", recording_stop)
    (tmp_path / "docs").mkdir()
    for n in range(3):
        (tmp_path / "docs" / f"page{n}.txt").write_text(f"Page {n} says how comets glow when they near the Sun. " * 20)
    build_index([tmp_path / "docs"], tmp_path / "index", retrieval="hybrid", embedder="static", show_progress=True)
    assert shown and all(done == total > 0 for done, total in shown), shown


def _group(pgid: int) -> list[str]:
    """The processes (zombies too) of process group `pgid`, as "pid state command"."""
    import os

    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
            state, _, group = stat[stat.rindex(")") + 2 :].split()[:3]
            if int(group) == pgid:
                found.append(f"{pid} {state} {open(f'/proc/{pid}/cmdline').read().replace(chr(0), ' ')[:120]}")
        except (OSError, ValueError):
            continue  # gone meanwhile
    return found


def test_typedrag_index_leaves_no_process_behind_in_its_group(tmp_path):
    """The read's worker pool and multiprocessing's resource tracker end before `typedrag index` does (issue 56 #6)."""
    import subprocess
    import sys

    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(30):  # enough files for the worker pool (ingest.POOL_MIN_FILES)
        (docs / f"page{n}.md").write_text(f"# Page {n}\n\nPage {n} says how comets glow when they near the Sun.\n")
    build = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "typedrag.cli",
            "index",
            str(docs),
            "--index",
            str(tmp_path / "index"),
            "--retrieval",
            "bm25",
        ],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, err = build.communicate()
    assert build.returncode == 0, err[-2000:]
    assert _group(build.pid) == []


def test_passages_taken_from_the_journal_move_the_bar_but_not_the_rate(monkeypatch):
    """Issue 56: a resumed build counted the passages its journal held as done at once, so its first rate was
    thousands a second and its time left near nothing."""
    from io import StringIO

    from rich.console import Console

    from typedrag.index.dense import _progress

    monkeypatch.setattr(build_progress, "PLAIN_EVERY", 30.0)
    clock = FakeClock()
    out = StringIO()
    progress, task = _progress(
        True,
        2560,
        "embedding (minilm)",
        "passages",
        console=Console(file=out, force_terminal=False, width=200),
        get_time=clock,
    )
    progress.update(task, advance=1024, taken=1024)  # the journal's, at once
    clock.now += 40
    progress.update(task, advance=256, taken=1024)  # one batch embedded in 40 s
    lines = [line for line in out.getvalue().splitlines() if line.startswith("embedding")]
    assert lines == ["embedding (minilm): 1,280 of 2,560 passages, 6.4 passages/s, about 3 min left"], lines


def test_a_resumed_build_shows_no_rate_for_what_its_journal_held(tmp_path, capsys, monkeypatch):
    """Every passage of this build is in the journal a killed build left: nothing is embedded, so no rate is shown
    (before, the journal's passages made the rate)."""
    from typedrag.index import dense
    from typedrag.index.tantivy import sync_index

    monkeypatch.setattr(build_progress, "PLAIN_EVERY", 0.0)
    monkeypatch.setattr(dense, "finished", lambda index_dir: None)  # keep the journal, as a killed build does
    (tmp_path / "docs").mkdir()
    for n in range(3):
        (tmp_path / "docs" / f"page{n}.txt").write_text(f"Page {n} says how comets glow when they near the Sun. " * 20)
    build_index([tmp_path / "docs"], tmp_path / "first", retrieval="hybrid", embedder="static", show_progress=False)
    (tmp_path / ".first.vectors-journal").rename(tmp_path / ".index.vectors-journal")
    watch = build_progress.BuildWatch()
    sync_index(
        [tmp_path / "docs"], tmp_path / "index", retrieval="hybrid", embedder="static", show_progress=True, watch=watch
    )
    out = capsys.readouterr()
    lines = [line for line in (out.out + out.err).splitlines() if line.startswith("embedding (static): ")]
    assert lines and all("/s" not in line and " left" not in line for line in lines), lines
    assert watch.vectors_done == watch.vectors_total == watch.vectors_taken > 0
    watch.phase = "embedding"
    assert watch.snapshot()["seconds_left"] is None
