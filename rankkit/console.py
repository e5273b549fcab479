"""Logging to stderr and rich progress bars shared by every stage (results go to files or stdout)."""

from __future__ import annotations

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


def progress_bar(unit: str = "it", *, transient: bool = False) -> Progress:
    """A rich progress bar on stderr with count, items/s, elapsed time and ETA.

    Use as ``with progress_bar("q") as bar: task = bar.add_task("searching", total=n)``.
    When stderr is not a terminal (logs, CI, pipes) the bar is off: a redrawn bar is noise in a file.
    """
    return Progress(
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
        disable=not err_console.is_terminal,
    )
