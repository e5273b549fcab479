"""Stable keys for ids (the docid tables of indexes and docstores share them)."""

from __future__ import annotations

import hashlib


def docid_hash(docid: str) -> int:
    """A stable 64-bit key for a docid (blake2b, so it does not depend on PYTHONHASHSEED)."""
    return int.from_bytes(hashlib.blake2b(docid.encode("utf-8"), digest_size=8).digest(), "little")
