"""The one way rankkit hashes a file: SHA-256 of its bytes, streamed in 1 MiB blocks (constant memory)."""

from __future__ import annotations

import hashlib
from typing import Any

from rankkit.files.paths import PathLike

BLOCK = 1 << 20


def update_with_file(digest: Any, path: PathLike) -> None:
    """Feed the bytes of the file at ``path`` into ``digest`` (a :mod:`hashlib` object), block by block."""
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            digest.update(block)


def file_sha256(path: PathLike) -> str:
    """Hex SHA-256 of the file's bytes (checkpoint data fingerprints, export checksums, PROVENANCE files)."""
    digest = hashlib.sha256()
    update_with_file(digest, path)
    return digest.hexdigest()
