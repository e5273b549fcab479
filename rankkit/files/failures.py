"""Failures of the machine while writing: a full disk, a quota, a read-only file system, an I/O error.

Inside :func:`writing_to`, such a failure becomes one :class:`~rankkit.errors.EnvironmentFailure`
naming the output (``cannot write runs/x.run: No space left on device (ENOSPC)``, exit code 1),
whoever wrote the bytes: Python's own file objects (an ``OSError``), Rust's safetensors (``os error
28`` in its message), faiss (the ``strerror`` text in its C++ message) or torch's zip writer, whose
``unexpected pos`` says nothing of the cause: a library error after which the output's file system
has almost no room left is taken for a full disk. :func:`reserve` allocates a file's blocks before
it is memory-mapped, so a full disk is this error rather than a SIGBUS on the first page written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from pathlib import Path
from typing import Iterable, Iterator

from rankkit.errors import EnvironmentFailure, RankkitError

#: The errors of the machine, not of the command: exit code 1 (docs/RELIABILITY.md).
ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG})

#: A library's write error without an errno counts as a full disk when fewer bytes than this are free.
LOW_SPACE_BYTES = 1 << 20

_ERRNO_IN_TEXT = re.compile(r"\(os error (\d+)\)|\[Errno (\d+)\]|Os \{ code: (\d+)")
_STRERROR_IN_TEXT = {os.strerror(code): code for code in ENVIRONMENT_ERRNOS}


def free_bytes(folder: str | os.PathLike[str]) -> int | None:
    """Bytes an unprivileged writer may still use on ``folder``'s file system (None when unknown)."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def _library_error(err: BaseException) -> bool:
    """An error raised by compiled writer code (torch, safetensors, faiss), not a plain Python bug."""
    return isinstance(err, RuntimeError) or type(err).__module__.split(".")[0] not in ("builtins", "rankkit")


def failure_errno(err: BaseException, folder: str | os.PathLike[str] | None = None) -> int | None:
    """The errno of a machine failure behind ``err`` (see the module docstring), else None."""
    if isinstance(err, (KeyboardInterrupt, SystemExit, RankkitError, MemoryError)):
        return None
    if isinstance(err, OSError) and err.errno is not None:
        return err.errno if err.errno in ENVIRONMENT_ERRNOS else None
    if not _library_error(err) and not isinstance(err, OSError):
        return None
    text = str(err)
    for match in _ERRNO_IN_TEXT.finditer(text):
        code = int(next(group for group in match.groups() if group))
        if code in ENVIRONMENT_ERRNOS:
            return code
    for message, code in _STRERROR_IN_TEXT.items():
        if message in text:
            return code
    if folder is not None:
        free = free_bytes(folder)
        if free is not None and free < LOW_SPACE_BYTES:
            return errno.ENOSPC
    return None


def environment_failure(shown: str | os.PathLike[str], code: int) -> EnvironmentFailure:
    """``cannot write PATH: No space left on device (ENOSPC)`` (``.path`` and ``.errno`` kept for callers)."""
    return EnvironmentFailure(f"cannot write {shown}: {os.strerror(code)} ({errno.errorcode.get(code, code)})",
                              str(shown), code)


def write_failure(err: BaseException, shown: str | os.PathLike[str],
                  folder: str | os.PathLike[str] | None = None) -> EnvironmentFailure | None:
    """``err`` as an :class:`EnvironmentFailure` naming ``shown`` when the machine failed, else None."""
    code = failure_errno(err, folder)
    return None if code is None else environment_failure(shown, code)


def _inside(filename: object, owned: Iterable[Path]) -> bool:
    if not isinstance(filename, (str, os.PathLike)):
        return False
    real = os.path.realpath(filename)
    for path in owned:
        base = os.path.realpath(path)
        if real == base or real.startswith(base + os.sep):
            return True
    return False


@contextlib.contextmanager
def writing_to(shown: str | os.PathLike[str], folder: str | os.PathLike[str] | None = None,
            owned: Iterable[str | os.PathLike[str]] = ()) -> Iterator[None]:
    """Inside, a machine failure while writing is re-raised as one :class:`EnvironmentFailure` naming ``shown``.

    ``folder`` is where the bytes go (its free space tells a full disk behind a library's bare
    error); an ``OSError`` naming a file is converted only when that file is one of ``owned`` (the
    temporaries being written) or below one: a failure to read an input keeps its own name.
    """
    owned_paths = [Path(p) for p in owned]
    try:
        yield
    except EnvironmentFailure as inner:
        if inner.path is not None and inner.errno is not None and _inside(inner.path, owned_paths):
            raise environment_failure(shown, inner.errno) from None  # it named a temporary: name the output
        raise
    except BaseException as err:
        if isinstance(err, OSError) and err.filename is not None and not _inside(err.filename, owned_paths):
            raise
        failure = write_failure(err, shown, folder)
        if failure is None:
            raise
        raise failure from None


def reserve(fd: int, size: int, shown: str | os.PathLike[str]) -> None:
    """Allocate the first ``size`` bytes of the file open as ``fd`` now (``posix_fallocate``).

    A memory-mapped output must own its blocks before it is mapped: a page written into a hole
    that the full file system cannot fill kills the process with SIGBUS instead of raising.
    """
    if size <= 0:
        return
    allocate = getattr(os, "posix_fallocate", None)
    if allocate is None:  # pragma: no cover - not on Linux: write the bytes instead
        _write_zeros(fd, size, shown)
        return
    try:
        allocate(fd, 0, size)
    except OSError as err:
        if err.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            _write_zeros(fd, size, shown)
            return
        raise write_failure(err, shown) or err from None


def _write_zeros(fd: int, size: int, shown: str | os.PathLike[str]) -> None:
    block = bytes(1 << 20)
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        left = size
        while left > 0:
            left -= os.write(fd, block[:min(left, len(block))])
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError as err:
        raise write_failure(err, shown) or err from None
