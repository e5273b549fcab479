"""``rankkit-index.json``: how an index folder was built, and the check every reader of one makes.

Every index rankkit builds (``rankkit index --kind KIND``) carries this file, so ``retrieve``
can refuse a folder that is not a rankkit index (or is one of another kind) with a clear message,
and anyone can see which corpus, options and versions produced it.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rankkit import __version__
from rankkit.errors import InputError, RankkitError
from rankkit.formats._files import PathLike

MANIFEST_NAME = "rankkit-index.json"
MANIFEST_FORMAT = 1


def corpus_record(corpus: Path) -> dict[str, Any]:
    """Path, size and modification time of a corpus file, as recorded in a manifest."""
    st = corpus.stat()
    return {
        "path": str(corpus.resolve()),
        "bytes": st.st_size,
        "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc).isoformat(timespec="seconds"),
    }


def new_manifest(kind: str, corpus: Path, options: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A manifest for an index of ``kind`` built from ``corpus`` with ``options``."""
    return {
        "rankkit_index": MANIFEST_FORMAT,
        "kind": kind,
        "rankkit_version": __version__,
        "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "corpus": corpus_record(corpus),
        "options": options,
        **fields,
    }


def write_manifest(index_dir: Path, manifest: dict[str, Any]) -> None:
    """Write ``rankkit-index.json`` into ``index_dir``."""
    (index_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def read_manifest(index_dir: PathLike, kinds: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The manifest of a rankkit index, checked; ``kinds`` lists the kinds the caller can use.

    Raises a one-line :class:`RankkitError` for a missing folder, a folder that is not a rankkit
    index, or an index of another kind.
    """
    folder = Path(index_dir)
    if not folder.exists():
        raise RankkitError(f"index {folder}: no such directory")
    if not folder.is_dir():
        raise RankkitError(f"index {folder}: not a directory")
    path = folder / MANIFEST_NAME
    if not path.is_file():
        raise RankkitError(
            f"{folder} is not a rankkit index (no {MANIFEST_NAME}); build one with `rankkit index`"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(path, None, f"unreadable index manifest: {err}") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("rankkit_index") != MANIFEST_FORMAT
        or "kind" not in manifest
    ):
        raise InputError(path, None, "not a rankkit index manifest (format 1)")
    if kinds is not None and manifest["kind"] not in kinds:
        wanted = " or ".join(repr(k) for k in kinds)
        raise RankkitError(f"{folder} is a {manifest['kind']!r} index; this needs a {wanted} index")
    return manifest


def is_empty_dir(folder: Path) -> bool:
    """True for an existing folder with nothing in it."""
    with os.scandir(folder) as entries:
        return next(entries, None) is None
