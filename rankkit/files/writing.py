"""Atomic text outputs: a temporary beside the target, renamed over it on success.

A regular file is written to a hidden temporary beside it and renamed over it on success, so an
interrupted command never leaves a partial output; a symlink is followed and its target file
replaced (the link stays a link); ``-``, ``/dev/stdout``, a FIFO or any other non-regular file is
written through (never renamed over).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import IO, Iterator

from rankkit.errors import RankkitError
from rankkit.files.paths import PathLike, is_gzip, is_stream
from rankkit.files.temporaries import block_signals, lock_fd, make_parent, remove_stale_temporaries, temp_prefix, unblock_signals


def _is_stdout(path: PathLike) -> bool:
    return str(path) in ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


@contextlib.contextmanager
def _text_writer(binary: IO[bytes], gzipped: bool) -> Iterator[IO[str]]:
    """UTF-8 text with ``\\n`` line ends over ``binary``, gzipped when asked (mtime 0 and no file
    name, so gzipped outputs are byte-identical between runs)."""
    if gzipped:
        with gzip.GzipFile(filename="", mode="wb", fileobj=binary, mtime=0) as raw:
            with io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as handle:
                yield handle
    else:
        with io.TextIOWrapper(binary, encoding="utf-8", newline="\n") as handle:
            yield handle


@contextlib.contextmanager
def _write_through(path: PathLike) -> Iterator[IO[str]]:
    """Write into a stream output as it comes (a pipe cannot be renamed over, nor made atomic)."""
    if _is_stdout(path):
        sys.stdout.flush()
        yield sys.stdout
        sys.stdout.flush()
        return
    try:
        # Append: /dev/fd/N of a shell's `>>` must not be truncated; a FIFO or device does not care.
        binary = open(path, "ab")
    except OSError as err:
        raise RankkitError(f"cannot write {path}: {err.strerror or err}") from None
    with binary, _text_writer(binary, is_gzip(path)) as handle:
        yield handle


@contextlib.contextmanager
def atomic_write(path: PathLike) -> Iterator[IO[str]]:
    """Write a text file (gzipped if named ``*.gz``) through a temporary file renamed on success.

    An exception or interruption inside the block removes the temporary file and leaves any
    existing file at ``path`` untouched, so no half-written output is ever left behind. A symlink
    is followed (its target file is replaced); ``-``, ``/dev/stdout`` and FIFOs are written
    through. The yielded handle is a text wrapper whose ``.buffer`` takes bytes (figures).
    """
    if is_stream(path):
        with _write_through(path) as handle:
            yield handle
        return
    shown = Path(path)
    if shown.is_dir():
        raise RankkitError(f"cannot write {shown}: is a directory")
    # A symlink stays a link: the file it points to is what gets replaced.
    target = Path(os.path.realpath(shown))
    make_parent(target.parent, shown)
    remove_stale_temporaries(target)
    blocked = block_signals()
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f"{temp_prefix(target)}{os.getpid()}-", dir=target.parent)
    except OSError as err:
        unblock_signals(blocked)
        raise RankkitError(f"cannot write {shown}: {err.strerror or err} in {target.parent}") from None
    tmp = Path(tmp_name)
    try:
        unblock_signals(blocked)  # a signal held back since mkstemp arrives here, inside the try
        # The lock lives on fd's open file description, held until after the rename: a concurrent
        # run's clean-up sees this temporary as in use, never as a leftover.
        lock_fd(fd)
        binary = io.open(fd, "wb", closefd=False)
        with binary, _text_writer(binary, is_gzip(target)) as handle:
            yield handle
        try:
            # An in-place rewrite keeps the file's permissions; a new file gets what open() would give.
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
