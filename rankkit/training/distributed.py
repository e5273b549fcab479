"""Data-parallel training under torchrun: the process group (:mod:`rankkit.distributed`) and replica checks.

Distributed runs are detected from torchrun's environment (``WORLD_SIZE`` > 1): gloo on CPU,
nccl on GPU, one GPU per local rank; only rank 0 writes files. :class:`Dist` and
:func:`init_distributed` live one layer down, shared with distributed encoding and re-ranking.
"""

from __future__ import annotations

import hashlib

import torch

from rankkit.distributed import Dist, init_distributed

__all__ = ["Dist", "init_distributed", "params_digest"]


def params_digest(model: torch.nn.Module) -> str:
    """SHA-256 over every parameter's bytes: equal digests = identical replicas."""
    digest = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()
