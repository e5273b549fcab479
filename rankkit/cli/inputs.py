"""Command-line inputs: ``-`` for standard input, and named inputs checked before anything heavy runs.

A stage that streams its input (``eval``, ``fuse``, ``validate``) reads ``-`` as standard input, as
trec_eval and the Unix tools do (``rankkit fuse a.run - -m rrf -o -``); it is read through
``/dev/stdin``, so a malformed line is reported as ``/dev/stdin:LINE``. A command that loads a model
first (``rerank``) checks that its input files exist before, so a typo costs a second, not a model load.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, TypeVar

from rankkit.errors import RankkitError

#: The name of standard input (and output) on the command line.
STDIN = "-"
#: Where standard input is read from (a path the file readers open like any other).
STDIN_PATH = "/dev/stdin"

P = TypeVar("P", str, Path)


def from_stdin(path: P) -> P:
    """``path``, or the path standard input is read through when it is ``-``."""
    if str(path) != STDIN:
        return path
    return type(path)(STDIN_PATH)


def one_stdin(paths: Iterable[object], what: str) -> None:
    """Refuse ``-`` given twice (standard input can be read once)."""
    if sum(str(path) == STDIN for path in paths) > 1:
        raise RankkitError(f"{what}: '-' (standard input) can be given once")


def check_inputs(inputs: Iterable[tuple[str, object]]) -> None:
    """Every named input exists (``(option, path)`` pairs; ``None``, ``-`` and ``irds:`` ids are skipped)."""
    for option, path in inputs:
        if path is None:
            continue
        text = str(path)
        if text == STDIN or text.startswith("irds:"):
            continue
        if not os.path.exists(text):
            raise RankkitError(f"{option} {text}: no such file or directory")


__all__ = ["STDIN", "STDIN_PATH", "check_inputs", "from_stdin", "one_stdin"]
