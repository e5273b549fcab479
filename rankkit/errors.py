"""User-facing errors: the CLI prints them as one line and exits with the error's ``exit_code``.

Code 2 is a usage error (the input, the options: the user can fix the command); code 1 an
environment failure (a full disk, a read-only file system, an I/O error: the command was right,
the machine could not carry it out).
"""

from __future__ import annotations

from os import PathLike


def excerpt(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters: error lines quote what they must, not a whole input."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 3]}... ({len(text):,} characters)"


class RankkitError(Exception):
    """A mistake in the user's input or options; never a bug in rankkit."""

    #: The ``rankkit`` command's exit code for this error.
    exit_code: int = 2


class EnvironmentFailure(RankkitError):
    """The machine failed a correct command: no space left, quota, read-only file system, I/O error (exit 1).

    ``path`` and ``errno`` name the output and the operating system's error, when there are such.
    """

    exit_code = 1

    def __init__(self, message: str, path: str | None = None, errno: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno


class InputError(RankkitError):
    """A problem at a known place in an input file, printed as ``file:line: problem``."""

    def __init__(self, path: str | PathLike[str], line: int | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


def is_out_of_memory(err: BaseException) -> bool:
    """True for an allocation failure: ``MemoryError``, torch's ``OutOfMemoryError`` (CUDA) or its CPU
    allocator's ``RuntimeError`` (``DefaultCPUAllocator: can't allocate memory``)."""
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError":
        return True
    text = str(err) if isinstance(err, RuntimeError) else ""
    return "can't allocate memory" in text or "out of memory" in text.lower()


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so that every clean-up path runs for them too."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by signal {signum}")
