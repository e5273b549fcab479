"""``--backend torch``: the model's own torch code, on the CPU or CUDA, fp32 or under bf16/fp16 autocast."""

from __future__ import annotations

from typing import ClassVar

import torch

from rankkit.devices import PRECISIONS
from rankkit.runtime.registry import Availability, Backend, RuntimeSettings


class TorchBackend(Backend):
    name = "torch"
    engine = "torch"
    devices = ("cpu", "cuda")
    quantizations: ClassVar[dict[str, str]] = {"none": "fp32, bf16 or fp16 autocast"}
    precisions = PRECISIONS
    swaps_encoders = False

    def available(self) -> Availability:
        return Availability(True, f"torch {torch.__version__}")

    def supports(self, runtime: RuntimeSettings, device: torch.device | None = None) -> str | None:
        problem = super().supports(runtime, device)
        if problem is None and runtime.precision == "fp16" and device is not None and device.type != "cuda":
            return ("--precision fp16 needs a CUDA device (fp16 autocast is not supported on CPU); "
                    "use bf16 or fp32 on CPU")
        return problem


__all__ = ["TorchBackend"]
