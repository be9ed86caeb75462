"""Progress of a build where nobody watches a terminal (a log file, a CI job, `docker logs`).

rich draws its bars only on a terminal; elsewhere it prints the finished bar once, so a 40-minute embedding run
shows nothing until it ends. `LoggedProgress` is a rich `Progress` that, on no terminal, also prints one plain
line every PLAIN_EVERY seconds: what it does, how far, how fast and about how long is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.progress import Progress, Task, TaskID

PLAIN_EVERY = 30.0  # seconds between two plain lines


class LoggedProgress(Progress):
    """A rich `Progress`; on no terminal, `line(task)` is printed at most every PLAIN_EVERY seconds as it advances."""

    def __init__(self, *columns: Any, line: Callable[[Task], str], **options: Any) -> None:
        super().__init__(*columns, **options)
        self._line = line
        self._printed = time.monotonic()

    def update(self, task_id: TaskID, **changes: Any) -> None:
        super().update(task_id, **changes)
        if self.disable or self.console.is_terminal:
            return
        now = time.monotonic()
        if now - self._printed >= PLAIN_EVERY:
            self._printed = now
            self.console.print(self._line(self._tasks[task_id]), highlight=False, soft_wrap=True)


def left(task: Task) -> str:
    """About how long the task has left ("about 4 min left"), or "" before rich can tell."""
    seconds = task.time_remaining
    if seconds is None:
        return ""
    return f", about {seconds / 60:.0f} min left" if seconds >= 90 else f", about {seconds:.0f} s left"
