"""``--backend torch``: the model's own torch code, on the CPU or CUDA; fp32, TF32 (CUDA), bf16 (CPU: autocast;
CUDA: bf16 encoder weights) or fp16 (CUDA: fp16 encoder weights): :mod:`rankkit.runtime.precision`."""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING, ClassVar

from rankkit.runtime.registry import Availability, Backend, RuntimeSettings

if TYPE_CHECKING:  # declared without importing torch: the command line checks --backend before any model loads
    import torch


class TorchBackend(Backend):
    name = "torch"
    engine = "torch"
    devices = ("cpu", "cuda")
    quantizations: ClassVar[dict[str, str]] = {"none": "fp32, TF32 (CUDA), bf16, fp16 (CUDA)"}
    precisions = ("fp32", "bf16", "fp16", "tf32")
    swaps_encoders = False

    def available(self) -> Availability:
        try:
            return Availability(True, f"torch {metadata.version('torch')}")
        except metadata.PackageNotFoundError:
            return Availability(False, "torch is not installed", "pip install torch")

    def supports(self, runtime: RuntimeSettings, device: torch.device | None = None) -> str | None:
        problem = super().supports(runtime, device)
        if problem is None and runtime.precision in ("fp16", "tf32") and device is not None and device.type != "cuda":
            return (f"--precision {runtime.precision} needs a CUDA device (not supported on CPU); "
                    "use bf16 or fp32 on CPU")
        return problem


__all__ = ["TorchBackend"]
