"""Helpers shared by the dataset converters: the shared-data folder, checksums, numbered lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rankkit.errors import InputError
from rankkit.files import file_sha256
from rankkit.formats import open_text

#: ``../shared/data`` beside the checkout: where the default ``--source`` folders live.
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes (recorded in PROVENANCE.txt; :func:`rankkit.files.file_sha256`)."""
    return file_sha256(path)


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a (possibly gzipped) text file, newline stripped, blank lines skipped.

    An empty file is an :class:`~rankkit.errors.InputError`, like every rankkit reader reports it.
    """
    seen = False
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if line.strip():
                seen = True
                yield number, line
    if not seen:
        raise InputError(path, None, "file is empty")
