"""Bounded reading of files written by someone else: checkpoint configs, index manifests, recipes.

A file from a downloaded checkpoint or a shared recipe is read only after checks that cost no more
than the limits themselves:

* it must be a regular file: a link to ``/dev/zero``, a FIFO or a folder is refused before a
  byte is read; a link must stay inside the folder it was found in (or, in a Hugging Face cache
  snapshot, point into that repository's ``blobs/``);
* its size is checked before reading (:data:`CONFIG_BYTES` for JSON/TOML settings), and no more
  than the limit is ever read, even from a file that grows;
* its nesting is measured on the raw text before parsing (:data:`MAX_DEPTH` levels of ``[``/``{``),
  so a file nested 100,000 levels deep is one line, not a ``RecursionError``.

Every refusal is one :class:`~rankkit.errors.InputError` naming the file.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from rankkit.errors import InputError
from rankkit.files.paths import PathLike

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: Largest JSON/TOML settings file read (config.json, rankkit.json, modules.json, recipes, manifests).
CONFIG_BYTES = 8 << 20
#: Largest tokenizer file handed to the tokenizer library (tokenizer.json of large vocabularies is ~30 MB).
TOKENIZER_BYTES = 256 << 20
#: Deepest nesting of arrays/objects (tables) accepted in a settings file; real configs stay under 10.
MAX_DEPTH = 64

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_TOML_SKIPPED = re.compile(
    r'"""(?:[^\\]|\\.)*?"""' r"|'''.*?'''" r'|"(?:[^"\\\n]|\\.)*"' r"|'[^'\n]*'" r"|#[^\n]*",
    re.DOTALL,
)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def size_text(size: int) -> str:
    """``8 MB``-style size for messages."""
    for unit, scale in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


def _allowed_roots(folder: Path) -> list[str]:
    roots = [os.path.realpath(folder)]
    if folder.parent.name == "snapshots":  # a Hugging Face cache snapshot links into ../../blobs
        roots.append(os.path.realpath(folder.parent.parent / "blobs"))
    return roots


def check_regular(path: PathLike, *, within: PathLike | None = None, limit: int | None = None) -> int:
    """Refuse ``path`` unless it is (or links to) a regular file, inside ``within``, of at most ``limit``
    bytes; returns its size."""
    shown = Path(path)
    try:
        st = os.stat(shown)
    except FileNotFoundError:
        raise InputError(shown, None, "no such file") from None
    except OSError as err:
        raise InputError(shown, None, f"cannot read: {err.strerror or err}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a device, FIFO or socket"
        raise InputError(shown, None, f"is {kind}, not a regular file; refusing to read it")
    if within is not None and not _inside(shown, Path(within)):
        raise InputError(shown, None, f"links outside its folder {within} (to {os.path.realpath(shown)}); "
                                      "refusing to follow it")
    if limit is not None and st.st_size > limit:
        raise InputError(shown, None, f"is {size_text(st.st_size)}, over the {size_text(limit)} a file of its kind may be")
    return st.st_size


def _inside(path: Path, folder: Path) -> bool:
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root + os.sep) for root in _allowed_roots(folder))


def read_bounded(path: PathLike, *, limit: int = CONFIG_BYTES, within: PathLike | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (checked before and while reading)."""
    check_regular(path, within=within, limit=limit)
    try:
        with open(path, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped since the check
                raise InputError(path, None, "is not a regular file; refusing to read it")
            data = handle.read(limit + 1)
    except OSError as err:
        raise InputError(path, None, f"cannot read: {err.strerror or err}") from None
    if len(data) > limit:
        raise InputError(path, None, f"is over the {size_text(limit)} a file of its kind may be")
    return data


def nesting_depth(text: str, *, toml: bool = False, stop: int = MAX_DEPTH) -> int:
    """Deepest nesting of ``[``/``{`` outside strings (and TOML comments), counted up to ``stop + 1``."""
    stripped = (_TOML_SKIPPED if toml else _JSON_STRING).sub("", text)
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", stripped):
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop:
                    return deepest
        else:
            depth = max(0, depth - 1)
    return deepest


def _decode(path: PathLike, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(path, None, f"not UTF-8 text ({err.reason} at byte {err.start})") from None


def _check_depth(path: PathLike, text: str, depth: int, toml: bool) -> None:
    if nesting_depth(text, toml=toml, stop=depth) > depth:
        raise InputError(path, None, f"nested more than {depth} levels deep; refusing to parse it")


def value_depth(value: Any, stop: int = MAX_DEPTH) -> int:
    """Nesting depth of parsed lists and dicts (iterative: no recursion on hostile input), up to ``stop + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, level)
            if deepest > stop:
                return deepest
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def loads_json(path: PathLike, text: str, *, depth: int = MAX_DEPTH) -> Any:
    """Parse JSON ``text`` read from ``path`` after the nesting check; one-line errors naming the file."""
    _check_depth(path, text, depth, toml=False)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(path, err.lineno, f"invalid JSON: {err.msg} (column {err.colno})") from None
    except (RecursionError, ValueError) as err:  # ValueError: an integer of over 4,300 digits
        raise InputError(path, None, f"invalid JSON: {' '.join(str(err).split())[:120]}") from None


def read_json(path: PathLike, *, limit: int = CONFIG_BYTES, depth: int = MAX_DEPTH,
              within: PathLike | None = None) -> Any:
    """A JSON file written by someone else, read within ``limit`` bytes and ``depth`` levels."""
    return loads_json(path, _decode(path, read_bounded(path, limit=limit, within=within)), depth=depth)


def read_toml(path: PathLike, *, limit: int = CONFIG_BYTES, depth: int = MAX_DEPTH) -> dict[str, Any]:
    """A TOML file (a recipe), read within ``limit`` bytes and ``depth`` levels (dotted keys included)."""
    text = _decode(path, read_bounded(path, limit=limit))
    _check_depth(path, text, depth, toml=True)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(path, getattr(err, "lineno", None), f"not valid TOML: {err}") from None
    except (RecursionError, ValueError) as err:
        raise InputError(path, None, f"not valid TOML: {' '.join(str(err).split())[:120]}") from None
    if value_depth(data, depth) > depth:
        raise InputError(path, None, f"nested more than {depth} levels deep; refusing it")
    return data
