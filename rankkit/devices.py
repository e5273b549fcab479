"""Device and precision selection, shared by training and inference (``--device``, ``--precision``)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from rankkit.errors import RankkitError

# torch is imported where a device is picked: the command line checks --device and --precision without it.
if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda")


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` = the local rank's GPU when CUDA is available, else the CPU."""
    if name not in DEVICES:
        raise RankkitError(f"unknown device {name!r}; use auto, cpu or cuda")
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise RankkitError("--device cuda but no CUDA device is available")
    if name == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", local_rank % torch.cuda.device_count())


#: ``--precision`` values: fp32 everywhere; bf16 autocast on CPU and CUDA; fp16 autocast on CUDA only.
PRECISIONS = ("fp32", "bf16", "fp16")
#: Smallest model ``auto`` runs in reduced precision (or on an exported backend): every speed-up that
#: decides ``auto`` was measured on all-MiniLM-L6-v2 (22.7M parameters) or larger; for tiny models the
#: autocast casts and a backend's one-time export cost more than their matrix products gain.
AUTO_MIN_PARAMETERS = 5_000_000


def resolve_precision(precision: str, device: torch.device, parameters: int | None = None) -> tuple[str, str]:
    """``--precision auto`` for training: the precision and why. CUDA: bf16 where the GPU has it (fp32's
    range, no loss scaling), else fp16 with loss scaling; CPU: bf16 where the CPU multiplies bf16 in
    hardware (AVX512-BF16, AMX; mono's training steps ~1.5x faster than fp32 on an AVX512-BF16 EPYC,
    docs/RESULTS.md issue 18) for models of :data:`AUTO_MIN_PARAMETERS` or more, else fp32. Any other
    value is returned as given."""
    if precision != "auto":
        return precision, "as given"
    if device.type == "cuda":
        import torch

        if torch.cuda.is_bf16_supported():
            return "bf16", f"{torch.cuda.get_device_name(device)} has bf16"
        return "fp16", f"{torch.cuda.get_device_name(device)} has no bf16: fp16 with loss scaling"
    from rankkit.cpu import describe_cpu, native_bf16

    if not native_bf16():
        return "fp32", f"CPU {describe_cpu()} has no native bf16 (bf16 would be emulated, slower than fp32)"
    if parameters is not None and parameters < AUTO_MIN_PARAMETERS:
        return "fp32", f"{parameters:,} parameters: below {AUTO_MIN_PARAMETERS:,}, bf16's casts cost more than it saves"
    return "bf16", f"CPU {describe_cpu()} has native bf16"


def check_precision(precision: str, device: torch.device) -> None:
    """Refuse a precision the device cannot run (one line, before any work starts)."""
    check_precision_on(precision, device.type)


def check_precision_on(precision: str, device_type: str) -> None:
    """:func:`check_precision` for a device named by its type (``cpu``, ``cuda``): no torch needed."""
    if precision not in PRECISIONS:
        raise RankkitError(f"unknown precision {precision!r}; use auto, fp32, bf16 or fp16")
    if precision == "fp16" and device_type != "cuda":
        raise RankkitError("--precision fp16 needs a CUDA device (fp16 autocast is not supported on CPU); "
                           "use bf16 or fp32 on CPU")


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[object]:
    """Autocast for ``precision`` on ``device``: weights stay fp32, matmuls run in bf16/fp16.

    fp32 returns a no-op context, so callers wrap their forward pass unconditionally.
    """
    check_precision(precision, device)
    if precision == "fp32":
        return contextlib.nullcontext()
    import torch

    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)
