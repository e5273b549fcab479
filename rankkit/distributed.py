"""torchrun processes: which process this is, the process group, and the collectives rankkit uses.

Shared by training (data parallelism, :mod:`rankkit.training.distributed`) and inference
(``rankkit index --kind dense`` and ``rankkit rerank`` split their work by rank), so it sits at the
bottom layer: dense and rerank never import training. A job is distributed when torchrun's
``WORLD_SIZE`` is above 1: gloo on CPU, nccl on GPU (one GPU per local rank); else :class:`Dist`
describes a single process and every collective is a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rankkit.devices import pick_device

# torch is imported by what needs it (a collective of a torchrun job, the CPU device of SINGLE): a single process
# that runs no torch model (the ONNX scorer of rankkit rerank) describes itself without it.
if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Dist:
    """This process's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device  # or anything with ``type`` where no torch model runs (the ONNX scorer's CPU)

    @property
    def main(self) -> bool:
        """Rank 0: the process that writes outputs."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def mine(self, item: int) -> bool:
        """Whether work unit ``item`` (0, 1, 2, ...) is this rank's: units are dealt round-robin."""
        return item % self.world_size == self.rank

    def mean(self, value: float) -> float:
        """The mean of ``value`` over all processes."""
        if not self.active:
            return value
        import torch

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(t)
        return float(t.item()) / self.world_size

    def gather(self, obj: Any) -> list[Any]:
        """Every process's ``obj``, in rank order (on every process)."""
        if not self.active:
            return [obj]
        out: list[Any] = [None] * self.world_size
        import torch

        torch.distributed.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.active:
            import torch

            torch.distributed.barrier()

    def close(self) -> None:
        if not self.active:
            return
        import torch

        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


if TYPE_CHECKING:
    SINGLE: Dist


def single_process(device: Any = None) -> Dist:
    """One process, on ``device`` (default: torch's CPU device)."""
    if device is None:
        import torch

        device = torch.device("cpu")
    return Dist(0, 1, 0, device)


def __getattr__(name: str) -> Any:
    # SINGLE (one process, on the CPU: what library calls get when they are not told otherwise) holds a
    # torch.device, so it is made on first use (PEP 562).
    if name == "SINGLE":
        value = single_process()
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rankkit.distributed' has no attribute {name!r}")


def init_distributed(device: str) -> Dist:
    """Join the torchrun process group when launched by torchrun, else a single-process setup."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = pick_device(device, local_rank)
    import torch

    if world > 1 and not torch.distributed.is_initialized():
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        torch.distributed.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
    return Dist(rank, world, local_rank, dev)
