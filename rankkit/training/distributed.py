"""Data-parallel training under torchrun: process group, collectives, replica checks.

Distributed runs are detected from torchrun's environment (``WORLD_SIZE`` > 1): gloo on CPU,
nccl on GPU, one GPU per local rank; only rank 0 writes files.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import torch

from rankkit.devices import pick_device


@dataclass(frozen=True)
class Dist:
    """This process's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def mean(self, value: float) -> float:
        """The mean of ``value`` over all processes."""
        if not self.active:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(t)
        return float(t.item()) / self.world_size

    def gather(self, obj: Any) -> list[Any]:
        """Every process's ``obj``, in rank order."""
        if not self.active:
            return [obj]
        out: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.active:
            torch.distributed.barrier()

    def close(self) -> None:
        if self.active and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def init_distributed(device: str) -> Dist:
    """Join the torchrun process group when launched by torchrun, else a single-process setup."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = pick_device(device, local_rank)
    if world > 1 and not torch.distributed.is_initialized():
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        torch.distributed.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
    return Dist(rank, world, local_rank, dev)


def params_digest(model: torch.nn.Module) -> str:
    """SHA-256 over every parameter's bytes: equal digests = identical replicas."""
    digest = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()
