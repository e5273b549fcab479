"""Opening (gzip-aware), line iteration and atomic writing shared by every format module."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator

from rankkit.errors import InputError

PathLike = str | os.PathLike[str]


def is_gzip(path: PathLike) -> bool:
    """True for files named ``*.gz``."""
    return str(path).endswith(".gz")


def open_text(path: PathLike) -> IO[str]:
    """Open a (possibly gzipped) UTF-8 text file for reading, with a clear error if it is missing."""
    p = Path(path)
    if not p.exists():
        raise InputError(p, None, "no such file")
    if p.is_dir():
        raise InputError(p, None, "is a directory, expected a file")
    if is_gzip(p):
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8", errors="replace", newline="\n")
    return open(p, encoding="utf-8", errors="replace", newline="\n")


def iter_lines(path: PathLike, *, skip_comments: bool = False) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` with the newline stripped, skipping blank lines.

    ``skip_comments`` drops lines starting with ``#`` (trec_eval accepts them in qrels and runs).
    Raises :class:`InputError` for an empty file so every reader reports it the same way.
    """
    seen = False
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            if skip_comments and line.lstrip().startswith("#"):
                continue
            seen = True
            yield number, line
    if not seen:
        raise InputError(path, None, "file is empty")


@contextlib.contextmanager
def atomic_write(path: PathLike) -> Iterator[IO[str]]:
    """Write a text file (gzipped if named ``*.gz``) through a temporary file renamed on success.

    An exception or interruption inside the block removes the temporary file and leaves any
    existing file at ``path`` untouched, so no half-written output is ever left behind.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        binary = io.open(fd, "wb")
        with binary:
            if is_gzip(target):
                # mtime=0 and no file name keep gzipped outputs byte-identical between runs.
                with gzip.GzipFile(filename="", mode="wb", fileobj=binary, mtime=0) as raw:
                    with io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as handle:
                        yield handle
            else:
                with io.TextIOWrapper(binary, encoding="utf-8", newline="\n") as handle:
                    yield handle
        # mkstemp creates 0600 files; give the output the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def parse_json_object(path: PathLike, number: int, line: str) -> dict[str, Any]:
    """One JSONL line that must hold a JSON object, or an ``InputError`` naming file and line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(path, number, f"invalid JSON: {err.msg}") from None
    if not isinstance(record, dict):
        raise InputError(path, number, "expected a JSON object")
    return record
