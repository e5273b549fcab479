"""Atomic outputs: a temporary beside the target, renamed over it on success.

:func:`atomic_write` for text (and bytes through its ``.buffer``), :func:`atomic_path` for writers that
need a file name (faiss, safetensors, numpy, ONNX and OpenVINO exports). A full disk, a quota, a
read-only file system or an I/O error while writing is one :class:`~rankkit.errors.EnvironmentFailure`
naming the output (exit code 1); the temporary is removed and the previous output stays as it was.

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
from pathlib import Path
from typing import IO, Iterator, Sequence

from rankkit.errors import RankkitError
from rankkit.files.failures import write_failure, writing_to
from rankkit.files.paths import PathLike, is_gzip, is_stream
from rankkit.files.temporaries import marked_temporary


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
        with writing_to("standard output" if str(path) == "-" else path):
            sys.stdout.flush()
            yield sys.stdout
            sys.stdout.flush()
        return
    try:
        # Append: /dev/fd/N of a shell's `>>` must not be truncated; a FIFO or device does not care.
        binary = open(path, "ab")
    except OSError as err:
        raise write_failure(err, path) or RankkitError(f"cannot write {path}: {err.strerror or err}") from None
    with writing_to(path, owned=[path]), binary, _text_writer(binary, is_gzip(path)) as handle:
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
    with marked_temporary(target, shown) as (fd, tmp):
        binary = io.open(fd, "wb", closefd=False)
        with writing_to(shown, target.parent, owned=[tmp]), binary, _text_writer(binary, is_gzip(target)) as handle:
            yield handle
        _commit(tmp, target, shown)


def _commit(tmp: Path, target: Path, shown: PathLike) -> None:
    """Give ``tmp`` the mode ``target`` has (or a new file would get) and rename it over ``target``."""
    try:
        # An in-place rewrite keeps the file's permissions; a new file gets what open() would give.
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    with writing_to(shown, target.parent, owned=[tmp, target]):
        os.chmod(tmp, mode)
        os.replace(tmp, target)


@contextlib.contextmanager
def atomic_path(path: PathLike, *, suffix: str = "", companions: Sequence[str] = ()) -> Iterator[Path]:
    """A temporary file name beside ``path`` for a writer that needs one; renamed over ``path`` on success.

    The name carries rankkit's temporary mark (a SIGKILLed run's leftover is removed by the next
    write of ``path``) and ends with ``suffix`` (writers that choose a format by extension); the
    file exists, empty, and is locked while in use. ``companions`` are suffixes of files the writer
    adds beside it (OpenVINO's ``.bin`` beside its ``.xml``): each is renamed onto ``path`` with that
    suffix, before ``path`` itself. Any exit but success removes them all and leaves ``path`` as it
    was; a machine failure while writing is one :class:`~rankkit.errors.EnvironmentFailure` naming
    ``path``::

        with atomic_path(folder / "model.safetensors") as tmp:
            safetensors.torch.save_file(state, str(tmp))
    """
    if companions and not suffix:
        raise ValueError("companion files need a suffix to replace")
    shown = Path(path)
    if shown.is_dir():
        raise RankkitError(f"cannot write {shown}: is a directory")
    target = Path(os.path.realpath(shown))
    with marked_temporary(target, shown, suffix) as (_, tmp):
        extras = [(tmp.with_suffix(extra), target.with_suffix(extra)) for extra in companions]
        try:
            with writing_to(shown, target.parent, owned=[tmp, *(made for made, _ in extras)]):
                yield tmp
            for made, final in extras:
                if not made.is_file():
                    raise RankkitError(f"cannot write {shown}: the writer made no {made.suffix} file beside it")
                with writing_to(shown, target.parent, owned=[made, final]):
                    os.replace(made, final)
            _commit(tmp, target, shown)
        except BaseException:
            for made, _ in extras:
                made.unlink(missing_ok=True)
            raise
