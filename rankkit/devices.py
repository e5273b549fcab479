"""Device and precision selection, shared by training and inference (``--device``, ``--precision``)."""

from __future__ import annotations

import contextlib

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


#: ``--precision`` values: fp32 everywhere; bf16 autocast on CPU and CUDA; fp16 autocast on CUDA only.
PRECISIONS = ("fp32", "bf16", "fp16")


def check_precision(precision: str, device: torch.device) -> None:
    """Refuse a precision the device cannot run (one line, before any work starts)."""
    if precision not in PRECISIONS:
        raise RankkitError(f"unknown precision {precision!r}; use fp32, bf16 or fp16")
    if precision == "fp16" and device.type != "cuda":
        raise RankkitError("--precision fp16 needs a CUDA device (fp16 autocast is not supported on CPU); "
                           "use bf16 or fp32 on CPU")


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[object]:
    """Autocast for ``precision`` on ``device``: weights stay fp32, matmuls run in bf16/fp16.

    fp32 returns a no-op context, so callers wrap their forward pass unconditionally.
    """
    check_precision(precision, device)
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)
