"""Progress of a build, on a terminal and where nobody watches one (a log file, a CI job, `docker logs`).

rich draws its bars only on a terminal; elsewhere it prints the finished bar once, so a 40-minute embedding run
shows nothing until it ends. `LoggedProgress` is a rich `Progress` that, on no terminal, also prints one plain
line every PLAIN_EVERY seconds: what it does, how far, how fast and about how long is left.

The rate and the time left are taken from the start of the task (`rate`, `left`, and the `Rate` and `TimeLeft`
columns), not from rich's last 30 seconds: an embedding batch can take longer than that on a busy machine, and
rich then has no speed to show (issue 55 E6: no rate for 25 of 27 minutes). Units done without work (a resumed
build's passages taken from its journal, in the task's `taken` field) move the bar but not the rate: counted in
it, a resumed build's first rate was thousands a second and its time left near nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.progress import Progress, ProgressColumn, Task, TaskID
from rich.text import Text

PLAIN_EVERY = 30.0  # seconds between two plain lines


class LoggedProgress(Progress):
    """A rich `Progress`; on no terminal, `line(task)` is printed at most every PLAIN_EVERY seconds as it advances."""

    def __init__(self, *columns: Any, line: Callable[[Task], str], **options: Any) -> None:
        super().__init__(*columns, **options)
        self._line = line
        self._printed = self.get_time()

    def update(self, task_id: TaskID, **changes: Any) -> None:
        super().update(task_id, **changes)
        if self.disable or self.console.is_terminal:
            return
        now = self.get_time()
        if now - self._printed >= PLAIN_EVERY:
            self._printed = now
            self.console.print(self._line(self._tasks[task_id]), highlight=False, soft_wrap=True)


def speed(task: Task) -> float | None:
    """Units worked on a second since the task started, those `taken` without work left out (None before any)."""
    elapsed = task.elapsed
    worked = task.completed - task.fields.get("taken", 0)
    if worked <= 0 or not elapsed:
        return None
    return worked / elapsed


def seconds_left(task: Task) -> float | None:
    """About how many seconds are left at the rate since the start (None before there is a rate)."""
    per_second = speed(task)
    if per_second is None or task.total is None:
        return None
    return max(task.total - task.completed, 0) / per_second


def rate(task: Task, unit: str) -> str:
    """ ", 12 passages/s" since the start, or "" before anything is done."""
    per_second = speed(task)
    if per_second is None:
        return ""
    return f", {per_second:,.0f} {unit}/s" if per_second >= 10 else f", {per_second:,.1f} {unit}/s"


def left(task: Task) -> str:
    """About how long the task has left (", about 4 min left"), or "" before there is a rate."""
    seconds = seconds_left(task)
    if seconds is None:
        return ""
    return f", about {seconds / 60:.0f} min left" if seconds >= 90 else f", about {seconds:.0f} s left"


class Rate(ProgressColumn):
    """The rate since the start, in `unit`s a second."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        return Text(rate(task, self.unit).removeprefix(", "))


class TimeLeft(ProgressColumn):
    """About how long is left, at the rate since the start."""

    def render(self, task: Task) -> Text:
        return Text(left(task).removeprefix(", "))


class BuildCancelled(Exception):
    """A watcher asked the build to stop (its collection is being deleted): the index in place is left as it was."""


class BuildWatch:
    """A build's progress for a watcher that is no terminal (the server's page polls it): files read and their
    passages, then passages embedded, with rates and the time left. The build's thread writes it; others read
    `snapshot()`. `cancel()` makes the build stop at its next file or batch, raising `BuildCancelled`."""

    def __init__(self) -> None:
        self.phase = "scanning"  # scanning, reading, embedding, writing
        self.files_total = self.files_done = self.passages = 0
        self.vectors_total = self.vectors_done = self.vectors_taken = 0
        self.started = self.phase_started = time.monotonic()
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    def check(self) -> None:
        if self._cancelled:
            raise BuildCancelled("the build was cancelled")

    def reading(self, files_done: int, files_total: int, passages: int) -> None:
        self.check()
        if self.phase != "reading":
            self.phase, self.phase_started = "reading", time.monotonic()
        self.files_done, self.files_total, self.passages = files_done, files_total, passages

    def embedding(self, done: int, total: int, taken: int = 0) -> None:
        """`done` of `total` passages have vectors, `taken` of them without embedding (from a journal)."""
        self.check()
        if self.phase != "embedding":
            self.phase, self.phase_started = "embedding", time.monotonic()
        self.vectors_done, self.vectors_total, self.vectors_taken = done, total, taken

    def writing(self) -> None:
        self.check()
        self.phase, self.phase_started = "writing", time.monotonic()

    def snapshot(self) -> dict[str, Any]:
        """What the build has done, and about how many seconds the current phase has left (None: not known yet)."""
        now = time.monotonic()
        done, total = {
            "reading": (self.files_done, self.files_total),
            "embedding": (self.vectors_done, self.vectors_total),
        }.get(self.phase, (0, 0))
        worked = done - (self.vectors_taken if self.phase == "embedding" else 0)
        spent = now - self.phase_started
        left = round((total - done) * spent / worked, 1) if worked > 0 and total >= done and spent > 0 else None
        return {
            "phase": self.phase,
            "files_done": self.files_done,
            "files_total": self.files_total,
            "passages": self.passages,
            "vectors_done": self.vectors_done,
            "vectors_total": self.vectors_total,
            "seconds": round(now - self.started, 1),
            "seconds_left": left,
        }
