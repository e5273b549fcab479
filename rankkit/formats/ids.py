"""Ids: stable keys for them (the docid tables of indexes and docstores share them), and the one rule they follow.

A qid or docid is a non-empty string without whitespace: runs and qrels are whitespace-separated
columns, so an id holding a space (a corpus's ``"id": "doc 1"``, a topic ``q 1<TAB>...``, a DataFrame
row) would write run lines that no reader, ``rankkit validate`` included, reads back as written. Ids
are checked where they enter (corpora, topics, training groups, DataFrames: the file and line, or the
row, named) and where runs leave (:func:`rankkit.formats.runs.write_run`).
"""

from __future__ import annotations

import hashlib
import re
from typing import Sequence

from rankkit.errors import InputError, RankkitError, excerpt
from rankkit.files import PathLike

#: Whitespace as ``str.split()`` sees it (Unicode spaces included): what separates a run's columns.
_SPACE = re.compile(r"\s")


def docid_hash(docid: str) -> int:
    """A stable 64-bit key for a docid (blake2b, so it does not depend on PYTHONHASHSEED)."""
    return int.from_bytes(hashlib.blake2b(docid.encode("utf-8"), digest_size=8).digest(), "little")


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be a qid or docid, or None."""
    if not value:
        return "is empty"
    match = _SPACE.search(value)
    if match is not None:
        return (f"holds whitespace ({match.group()!r} at character {match.start() + 1}); runs and qrels are "
                "whitespace-separated columns, so it would not read back as one id")
    return None


def check_id(value: str, what: str, path: PathLike | None = None, line: int | None = None) -> str:
    """``value`` when it is a valid id (:func:`id_problem`); else one line naming ``what`` (``docid``, ``qid``)
    and the file and line it came from (or, without ``path``, ``what`` alone: a DataFrame's row)."""
    problem = id_problem(value)
    if problem is None:
        return value
    if path is not None:
        raise InputError(path, line, f"{what} {excerpt(value)} {problem}")
    raise RankkitError(f"{what} {excerpt(value)} {problem}")


def all_valid(ids: Sequence[str]) -> bool:
    """True when every id of ``ids`` is valid: one C-speed test for the hot writers (split undoes the join only
    when no id is empty or holds whitespace)."""
    return " ".join(ids).split() == list(ids)


__all__ = ["all_valid", "check_id", "docid_hash", "id_problem"]
