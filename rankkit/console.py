"""Logging to stderr and rich progress bars shared by every stage (results go to files or stdout).

On a terminal a progress bar redraws in place. Off a terminal (a log file, CI, ``nohup``, a pipe)
a redrawn bar is noise, so the bar is off and a heartbeat line is printed instead every
``$RANKKIT_HEARTBEAT`` seconds (default 5; ``0`` turns it off)::

    re-ranking: 1,234/6,980 q (17.7%), 41.2 q/s, elapsed 0:00:30, ETA 0:02:19

so that a long job in a log says what it is doing and when it will end.
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

err_console = Console(stderr=True, soft_wrap=True)


def log(message: str) -> None:
    """Print one progress/status line to stderr (rich markup allowed)."""
    err_console.print(message, highlight=False)


def warn(message: str) -> None:
    """Print a warning line to stderr."""
    err_console.print(f"[yellow]warning:[/yellow] {message}", highlight=False)


class RateColumn(ProgressColumn):
    """Items per second, e.g. ``1,234.5 q/s``."""

    def __init__(self, unit: str = "it") -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if speed is None:
            return Text(f"? {self.unit}/s", style="progress.data.speed")
        return Text(f"{speed:,.1f} {self.unit}/s", style="progress.data.speed")


HEARTBEAT_ENV = "RANKKIT_HEARTBEAT"
DEFAULT_HEARTBEAT_SECONDS = 5.0


def heartbeat_seconds() -> float:
    """Seconds between heartbeat lines off a terminal (``$RANKKIT_HEARTBEAT``, default 5; 0: none)."""
    text = os.environ.get(HEARTBEAT_ENV, "").strip()
    if not text:
        return DEFAULT_HEARTBEAT_SECONDS
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_HEARTBEAT_SECONDS
    return max(value, 0.0)


def _clock(seconds: float | None) -> str:
    return "?" if seconds is None else str(timedelta(seconds=int(seconds)))


def heartbeat_line(task: Task, unit: str) -> str:
    """``description: done/total unit (pct), rate unit/s, elapsed H:MM:SS, ETA H:MM:SS`` of one task."""
    done = f"{task.completed:,.0f}"
    if task.total is not None:
        done += f"/{task.total:,.0f} {unit} ({task.percentage:.1f}%)"
    else:
        done += f" {unit}"
    speed = task.finished_speed or task.speed
    rate = f"{speed:,.1f} {unit}/s" if speed else f"? {unit}/s"
    line = f"{task.description}: {done}, {rate}, elapsed {_clock(task.elapsed)}"
    if task.total is not None and not task.finished:
        line += f", ETA {_clock(task.time_remaining)}"
    return line


class HeartbeatProgress(Progress):
    """A rich :class:`Progress` that, when its display is off, prints :func:`heartbeat_line` every ``interval`` s.

    A final line per task is printed when the bar stops, if any heartbeat was printed.
    """

    def __init__(self, *columns: Any, unit: str = "it", interval: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*columns, **kwargs)
        self.unit = unit
        self.interval = interval
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._beats = 0

    def _beat(self) -> None:
        for task in self.tasks:
            if task.visible and task.started:
                err_console.print(heartbeat_line(task, self.unit), highlight=False, markup=False)
        self._beats += 1

    def _run(self) -> None:
        while not self._halt.wait(self.interval):
            self._beat()

    def start(self) -> None:
        super().start()
        if self.interval > 0 and self._thread is None:
            self._halt.clear()
            self._thread = threading.Thread(target=self._run, name="rankkit-heartbeat", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._halt.set()
            self._thread.join()
            self._thread = None
            if self._beats:
                self._beat()  # where it ended: the log's last word on this step
        super().stop()


def progress_bar(unit: str = "it", *, transient: bool = False) -> Progress:
    """A rich progress bar on stderr with count, items/s, elapsed time and ETA.

    Use as ``with progress_bar("q") as bar: task = bar.add_task("searching", total=n)``.
    When stderr is not a terminal (logs, CI, pipes) the bar is off (a redrawn bar is noise in a
    file) and a heartbeat line is printed every :func:`heartbeat_seconds` instead.
    """
    terminal = err_console.is_terminal
    return HeartbeatProgress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        RateColumn(unit),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err_console,
        transient=transient,
        disable=not terminal,
        unit=unit,
        interval=0.0 if terminal else heartbeat_seconds(),
    )
