"""Device selection, shared by training and inference (``--device auto|cpu|cuda``)."""

from __future__ import annotations

import torch

from rankkit.errors import RankkitError

DEVICES = ("auto", "cpu", "cuda")


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` = the local rank's GPU when CUDA is available, else the CPU."""
    if name not in DEVICES:
        raise RankkitError(f"unknown device {name!r}; use auto, cpu or cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise RankkitError("--device cuda but no CUDA device is available")
    if name == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", local_rank % torch.cuda.device_count())
