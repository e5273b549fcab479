"""Output checks made before any work: :func:`check_outputs` refuses an output that is a directory,
sits under a regular file or in a read-only folder, or is the same file as an input."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

from rankkit.errors import RankkitError
from rankkit.files.failures import environment_failure
from rankkit.files.paths import PathLike, first_existing, is_stream
from rankkit.files.temporaries import remove_stale_temporaries, writable_dir


def _identity(path: PathLike) -> tuple[Any, ...]:
    """What makes two paths the same file: device and inode when it exists, else the resolved path."""
    try:
        st = os.stat(path)
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", os.path.realpath(path))


def check_output(path: PathLike, option: str = "--output") -> None:
    """Refuse, before any work, an output path that cannot be written (one line naming ``option``).

    Accepted: ``-`` and other stream outputs, a new or existing regular file (or a symlink to one)
    in a folder that exists or can be created. Refused: a directory, a path below a regular file,
    a read-only folder.
    """
    if is_stream(path):
        return
    shown = Path(path)
    if shown.is_dir():
        raise RankkitError(f"{option} {shown}: is a directory, expected a file")
    _check_parent(shown, option)


def _check_parent(shown: Path, option: str) -> None:
    """Refuse an output whose nearest existing ancestor (its parents are created) is no writable folder."""
    existing = first_existing(Path(os.path.realpath(shown)).parent)
    if not existing.is_dir():
        raise RankkitError(f"{option} {shown}: {existing} is not a directory")
    if not writable_dir(existing):
        if _read_only_file_system(existing):  # the machine's state, not the command's mistake: exit 1
            raise environment_failure(shown, errno.EROFS)
        raise RankkitError(f"{option} {shown}: folder {existing} is not writable")


def _read_only_file_system(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def check_output_dir(path: PathLike, option: str = "--index") -> None:
    """Refuse, before any work, an output folder that is a file or whose parent cannot be written."""
    shown = Path(path)
    if os.path.lexists(shown) and not shown.is_dir():
        raise RankkitError(f"{option} {shown}: exists and is not a directory")
    _check_parent(shown, option)


def check_outputs(
    outputs: Sequence[tuple[str, PathLike | None]],
    inputs: Iterable[tuple[str, PathLike | None]] = (),
) -> None:
    """Check every output (see :func:`check_output`), that no two are the same file, and none is an input.

    ``outputs`` and ``inputs`` are ``(option, path)`` pairs; ``None`` paths are skipped. Pass only the
    inputs an output must not replace: an in-place rewrite of the same kind (``fuse A B -o A``,
    ``validate RUN --fix RUN``) reads its input whole before writing and is safe.
    Also removes stale temporaries of killed earlier runs beside each output.
    """
    given = [(option, path) for option, path in outputs if path is not None]
    for option, path in given:
        check_output(path, option)
    seen: dict[tuple[Any, ...], tuple[str, PathLike]] = {}
    for option, path in given:
        if is_stream(path):
            continue
        key = _identity(path)
        if key in seen:
            other, other_path = seen[key]
            raise RankkitError(f"{option} {path} is the same file as {other} {other_path}; give two different files")
        seen[key] = (option, path)
    for name, source in inputs:
        if source is None or str(source) == "-":
            continue
        key = _identity(source)
        if key in seen:
            option, path = seen[key]
            raise RankkitError(f"{option} {path} is the input {name} {source}; refusing to overwrite an input")
        if os.path.isdir(source):  # an input folder (an index): nothing may be written inside it
            inside = os.path.realpath(source) + os.sep
            for option, path in given:
                if not is_stream(path) and os.path.realpath(path).startswith(inside):
                    raise RankkitError(
                        f"{option} {path} is inside the input {name} {source}; refusing to write into an input"
                    )
    for _, path in given:
        if not is_stream(path):
            remove_stale_temporaries(Path(os.path.realpath(path)))
