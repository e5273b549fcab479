"""Logging to stderr and rich progress bars shared by every stage (results go to files or stdout).

On a terminal a progress bar redraws in place. Off a terminal (a log file, CI, ``nohup``, a pipe)
a redrawn bar is noise, so the bar is off and a heartbeat line is printed instead every
``$RANKKIT_HEARTBEAT`` seconds (default 5; ``0`` turns it off)::

    re-ranking: 1,234/6,980 pair (17.7%), 12/70 q, 41.1 pair/s, elapsed 0:00:30, ETA 0:02:19

so that a long job in a log says what it is doing and when it will end: the count moves (long
inner loops report their batches through :func:`report_work`), the rate and the ETA come from the
work done so far, and the last line gives the true overall rate.

In a Jupyter notebook the bars are one output of the cell, updated in place through IPython's display
updates (plain text, and HTML for a live front end) rather than rich's live display, whose widget needs
a live front end: a notebook executed without one (``jupyter nbconvert --execute``, nbclient, papermill)
kept a bar frozen where its last redraw happened (97 %, even 0 %), showed ``Output()`` on GitHub and
logged "No such comm". The last update is the finished state, so a saved notebook shows each bar at its
true total, and GitHub renders the text.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.text import Text

err_console = Console(stderr=True, soft_wrap=True)


def in_notebook() -> bool:
    """True inside a Jupyter kernel (rich's test: an IPython ZMQ shell)."""
    return bool(err_console.is_jupyter)


def log(message: str) -> None:
    """Print one progress/status line to stderr (rich markup allowed)."""
    if in_notebook():  # a plain stderr line: rich's notebook output keeps ANSI colour codes in its saved text
        sys.stderr.write(Text.from_markup(message).plain + "\n")
        return
    err_console.print(message, highlight=False)


def warn(message: str) -> None:
    """Print a warning line to stderr."""
    log(f"[yellow]warning:[/yellow] {message}")


#: The task field holding how much was done when the task was added (a resumed training run).
START_FIELD = "rankkit_start"


def work_rate(task: Task) -> float | None:
    """Items per second of the work done since the task started (``completed`` less what it started
    with) over its elapsed time, up to its finish; None until some work is done. Not rich's sliding
    window, which forgets a rate during one long step between updates."""
    elapsed = task.finished_time if task.finished_time is not None else task.elapsed
    work = task.completed - float(task.fields.get(START_FIELD, 0.0))
    return work / elapsed if elapsed and work > 0 else None


def remaining_seconds(task: Task) -> float | None:
    """Seconds left at :func:`work_rate`; None when unknown (no total, nothing done yet)."""
    rate = work_rate(task)
    if task.total is None or not rate:
        return None
    return max(task.total - task.completed, 0) / rate


class RateColumn(ProgressColumn):
    """Items per second from the work done (:func:`work_rate`), e.g. ``1,234 q/s``."""

    def __init__(self, unit: str = "it") -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        rate = work_rate(task)
        return Text(f"{'?' if rate is None else format_rate(rate)} {self.unit}/s", style="progress.data.speed")


class EtaColumn(ProgressColumn):
    """``ETA H:MM:SS`` at the rate of the work done (:func:`remaining_seconds`); nothing once finished."""

    def __init__(self) -> None:
        super().__init__(table_column=Column(no_wrap=True, min_width=11))

    def render(self, task: Task) -> Text:
        if task.finished:
            return Text("")
        return Text(f"ETA {_clock(remaining_seconds(task))}", style="progress.remaining")


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


def format_rate(rate: float) -> str:
    """Items per second with three significant digits or more: ``1,234``, ``41.2``, ``0.56``."""
    if rate >= 100:
        return f"{rate:,.0f}"
    return f"{rate:.1f}" if rate >= 10 else f"{rate:.2f}"


def heartbeat_line(task: Task, unit: str) -> str:
    """``description: done/total unit (pct)[, detail], rate unit/s, elapsed H:MM:SS, ETA H:MM:SS`` of one task.

    The rate is the work done since the task started over its elapsed time (:func:`work_rate`), and
    the ETA the remaining work at that rate: both from the work done, not from a sliding window, so
    a long step between updates cannot blank them. Until some work is done there is neither. A
    finished task's line gives its true overall rate.
    """
    done = f"{task.completed:,.0f}"
    if task.total is not None:
        done += f"/{task.total:,.0f} {unit} ({task.percentage:.1f}%)"
    else:
        done += f" {unit}"
    parts = [f"{task.description}: {done}"]
    detail = task.fields.get("detail")
    if detail:
        parts.append(str(detail))
    rate = work_rate(task)
    if rate is not None:
        parts.append(f"{format_rate(rate)} {unit}/s")
    parts.append(f"elapsed {_clock(task.finished_time if task.finished_time is not None else task.elapsed)}")
    if task.total is not None and not task.finished:
        parts.append(f"ETA {_clock(remaining_seconds(task))}")
    return ", ".join(parts)


class HeartbeatProgress(Progress):
    """A rich :class:`Progress` that, when its display is off, prints :func:`heartbeat_line` every ``interval`` s.

    A final line per task is printed when the bar stops, if any heartbeat was printed. A task's
    ``detail`` field (``bar.update(task, detail="12/43 q")``) is shown after its count.
    """

    def __init__(self, *columns: Any, unit: str = "it", interval: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*columns, **kwargs)
        self.unit = unit
        self.interval = interval
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._beats = 0
        self._last: list[str] = []  # the lines of the last beat (the final one is not printed twice)

    def add_task(self, description: str, start: bool = True, total: float | None = 100.0, completed: int = 0,
                 visible: bool = True, **fields: Any) -> TaskID:
        # A resumed task's rate counts only the work done now.
        return super().add_task(description, start=start, total=total, completed=completed, visible=visible,
                                **{START_FIELD: float(completed), **fields})

    def heartbeat_lines(self) -> list[str]:
        """The heartbeat line of every visible, started task."""
        return [heartbeat_line(task, self.unit) for task in self.tasks if task.visible and task.started]

    def beat(self) -> None:
        """Print the heartbeat lines now (the heartbeat thread calls this every ``interval`` seconds)."""
        lines = self.heartbeat_lines()
        for line in lines:
            err_console.print(line, highlight=False, markup=False)
        self._beats += 1
        self._last = lines

    def _run(self) -> None:
        while not self._halt.wait(self.interval):
            self.beat()

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
        if self._beats and self.heartbeat_lines() != self._last:
            self.beat()  # where it ended, with the true overall rate: the log's last word on this step
        self._beats = 0
        super().stop()


#: The scoring loop's report of its own progress, when someone listens (:func:`work_reporter`).
_work_listener: ContextVar[Callable[[int, int], None] | None] = ContextVar("rankkit_work_listener", default=None)


def report_work(done: int, total: int) -> None:
    """Called by a long inner loop (a model scoring its batches): ``done`` of ``total`` units of this call.

    Costs a context-variable lookup when nobody listens; a listener (``rankkit rerank``'s progress)
    turns the fraction into moving counts between its own, coarser updates.
    """
    listener = _work_listener.get()
    if listener is not None:
        listener(done, total)


@contextmanager
def work_reporter(listener: Callable[[int, int], None]) -> Iterator[None]:
    """While inside, :func:`report_work` calls ``listener(done, total)`` (in this thread only)."""
    token = _work_listener.set(listener)
    try:
        yield
    finally:
        _work_listener.reset(token)


#: Seconds between a notebook's redraws of its bars (the display message is small; the eye sees no lag).
NOTEBOOK_REFRESH_SECONDS = 0.5
#: Characters of a notebook bar's text.
BAR_WIDTH = 30


def text_bar(task: Task, unit: str, width: int = BAR_WIDTH) -> str:
    """``━━━━━━━━━━────── re-ranking: 30/60 pairs (50.0%), ...`` of one task as plain text (a saved notebook,
    GitHub): a bar of its fraction done, then its :func:`heartbeat_line`; no bar without a total."""
    line = heartbeat_line(task, unit)
    if not task.total:
        return line
    filled = int(round(min(max(task.completed / task.total, 0.0), 1.0) * width))
    return f"{'━' * filled}{'─' * (width - filled)} {line}"


class NotebookProgress(HeartbeatProgress):
    """Progress in a notebook cell: one display output redrawn in place (``text/plain`` for any reader,
    ``text/html`` with a ``<progress>`` bar for a live front end) every :data:`NOTEBOOK_REFRESH_SECONDS`,
    and once more when the bars stop, with where they ended (a transient bar's output is cleared). No widget,
    so no comm: the saved notebook holds the final text."""

    def __init__(self, *columns: Any, unit: str = "it", **kwargs: Any) -> None:
        kwargs.pop("disable", None)
        kwargs.pop("interval", None)
        super().__init__(*columns, unit=unit, interval=NOTEBOOK_REFRESH_SECONDS, disable=True, **kwargs)
        self._handle: Any = None

    def _bundle(self) -> dict[str, str]:
        import html

        tasks = [task for task in self.tasks if task.visible and task.started]
        lines = [text_bar(task, self.unit) for task in tasks]
        rows = []
        for task in tasks:
            bar = (f'<progress value="{task.completed:g}" max="{task.total:g}" style="width:12em"></progress> '
                   if task.total else "")
            rows.append(f"<div>{bar}<code>{html.escape(heartbeat_line(task, self.unit))}</code></div>")
        return {"text/plain": "\n".join(lines), "text/html": "".join(rows)}

    def beat(self) -> None:
        bundle = self._bundle()
        if self._handle is None:
            from IPython.display import display

            self._handle = display(bundle, raw=True, display_id=True)
        else:
            self._handle.update(bundle, raw=True)

    def stop(self) -> None:
        if self._thread is not None:
            self._halt.set()
            self._thread.join()
            self._thread = None
        if self.live.transient:
            if self._handle is not None:
                self._handle.update({"text/plain": ""}, raw=True)
        elif any(task.visible and task.started for task in self.tasks):
            self.beat()  # the finished state: what the saved notebook keeps
        self._beats = 0
        super(HeartbeatProgress, self).stop()


def progress_bar(unit: str = "it", *, transient: bool = False,
                 get_time: Callable[[], float] | None = None) -> HeartbeatProgress:
    """A rich progress bar on stderr with count, items/s, elapsed time and ETA.

    Use as ``with progress_bar("q") as bar: task = bar.add_task("searching", total=n)``.
    When stderr is not a terminal (logs, CI, pipes) the bar is off (a redrawn bar is noise in a
    file) and a heartbeat line is printed every :func:`heartbeat_seconds` instead; in a notebook it is a
    :class:`NotebookProgress`. ``get_time`` is the clock (tests pass a fake one).
    """
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        RateColumn(unit),
        TimeElapsedColumn(),
        EtaColumn(),
    )
    if in_notebook():
        return NotebookProgress(*columns, console=err_console, transient=transient, unit=unit, get_time=get_time)
    terminal = err_console.is_terminal
    return HeartbeatProgress(*columns, console=err_console, transient=transient, disable=not terminal, unit=unit,
                             interval=0.0 if terminal else heartbeat_seconds(), get_time=get_time)
