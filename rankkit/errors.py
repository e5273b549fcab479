"""User-facing errors: the CLI prints them as one line and exits with code 2."""

from __future__ import annotations

from os import PathLike


class RankkitError(Exception):
    """A mistake in the user's input or options; never a bug in rankkit."""


class InputError(RankkitError):
    """A problem at a known place in an input file, printed as ``file:line: problem``."""

    def __init__(self, path: str | PathLike[str], line: int | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so that every clean-up path runs for them too."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by signal {signum}")
