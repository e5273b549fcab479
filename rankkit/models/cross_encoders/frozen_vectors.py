"""Vectors of a frozen encoder computed once: a fixed table keyed by token ids, in memory or on disk.

A frozen encoder (``--encoder bi`` without ``--tune-encoder``) maps the same token ids to the same
vector at every step, so the trainer encodes every distinct query and passage of a run once
(:meth:`rankkit.models.cross_encoders.pair_encoders.BiPairEncoder.precompute`) and every step
looks the vectors up instead of running the encoder again.

Memory stays bounded: the table is a float32 array in memory while it fits ``memory_limit`` bytes,
else a memory-mapped file in a temporary folder (deleted when the table is dropped or the process
ends), whose hot rows the operating system keeps in its page cache. Keys are 16-byte BLAKE2b
digests of the token ids, so the index costs about 100 bytes per text whatever the text's length.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from rankkit.files import reserve

#: Vectors kept in memory at most, in bytes; a larger table goes to a memory-mapped file.
MEMORY_LIMIT = 1 << 30


def ids_key(ids: np.ndarray | bytes) -> bytes:
    """The table key of one text's token ids (int64 ids as bytes, hashed to 16 bytes)."""
    raw = ids if isinstance(ids, bytes) else np.ascontiguousarray(ids, dtype=np.int64).tobytes()
    return hashlib.blake2b(raw, digest_size=16).digest()


class FrozenVectors:
    """``count`` vectors of width ``dim`` looked up by :func:`ids_key`; filled once, then read-only."""

    def __init__(self, count: int, dim: int, *, memory_limit: int = MEMORY_LIMIT,
                 spill_dir: str | os.PathLike[str] | None = None) -> None:
        self.count, self.dim = int(count), int(dim)
        self.rows: dict[bytes, int] = {}
        self._spill: tempfile.TemporaryDirectory[str] | None = None
        shape = (max(self.count, 1), self.dim)
        if self.count * self.dim * 4 <= memory_limit:
            self.array: np.ndarray = np.zeros(shape, dtype=np.float32)
        else:
            self._spill = tempfile.TemporaryDirectory(prefix="rankkit-frozen-vectors-", dir=spill_dir)
            path = Path(self._spill.name) / "vectors.npy"
            self.array = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape)
            # The map's blocks are allocated now: on a full disk this is one line, never a SIGBUS later.
            fd = os.open(path, os.O_RDWR)
            try:
                reserve(fd, os.fstat(fd).st_size, path)
            except BaseException:
                del self.array
                self._spill.cleanup()
                raise
            finally:
                os.close(fd)

    @property
    def on_disk(self) -> bool:
        return self._spill is not None

    def __len__(self) -> int:
        return len(self.rows)

    def __contains__(self, key: bytes) -> bool:
        return key in self.rows

    def add(self, keys: list[bytes], vectors: torch.Tensor) -> None:
        """Store ``vectors[i]`` under ``keys[i]`` (each key once)."""
        start = len(self.rows)
        if start + len(keys) > self.count:
            raise ValueError(f"table of {self.count} vectors is full")
        self.array[start:start + len(keys)] = vectors.detach().float().cpu().numpy()
        for offset, key in enumerate(keys):
            self.rows[key] = start + offset

    def lookup(self, keys: list[bytes]) -> torch.Tensor:
        """The vectors of ``keys`` (every key must be present), as a new float32 tensor."""
        index = np.fromiter((self.rows[k] for k in keys), dtype=np.int64, count=len(keys))
        return torch.from_numpy(np.array(self.array[index], dtype=np.float32))

    def close(self) -> None:
        """Drop the table (and its file, when on disk)."""
        self.rows.clear()
        self.array = np.zeros((1, self.dim), dtype=np.float32)
        if self._spill is not None:
            self._spill.cleanup()
            self._spill = None
