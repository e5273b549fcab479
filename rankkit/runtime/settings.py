"""How a model runs at inference time (:class:`Runtime`) and the one device rule of every inference command.

``--backend``, ``--quantize``, ``--threads`` and ``--precision`` become a :class:`Runtime`, whose
values are validated against the registered backends when it is made (a bad value or combination
is refused in one line before any work). The device rule, the same for ``rerank``, ``explain``,
``index --kind dense``, ``retrieve``, the Python API and the benchmarks: ``--device auto`` is CUDA
only for a backend that runs there (torch) and the CPU otherwise; an explicit device the backend
does not run on is refused. The combination of a runtime and its device (``--precision fp16`` needs
CUDA) is checked once, by :func:`rankkit.runtime.compose.load_for_inference`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rankkit.devices import DEVICES, PRECISIONS, pick_device
from rankkit.errors import RankkitError
from rankkit.runtime.registry import get_backend

QUANTIZATIONS = ("none", "int8")


@dataclass(frozen=True)
class Runtime:
    """How a model runs at inference time (``--backend``, ``--quantize``, ``--threads``, ``--precision``)."""

    backend: str = "torch"
    quantize: str = "none"
    threads: int | None = None
    precision: str = "fp32"

    def __post_init__(self) -> None:
        backend = get_backend(self.backend)  # refuses an unknown name
        if self.quantize not in QUANTIZATIONS and self.quantize not in backend.quantizations:
            raise RankkitError(f"unknown quantization {self.quantize!r}; use {' or '.join(QUANTIZATIONS)}")
        if self.precision not in PRECISIONS:
            raise RankkitError(f"unknown precision {self.precision!r}; use {', '.join(PRECISIONS)}")
        if self.threads is not None and self.threads < 1:
            raise RankkitError(f"--threads must be at least 1, got {self.threads}")
        problem = backend.supports(self)
        if problem is not None:
            raise RankkitError(problem)

    def check(self, device: torch.device) -> None:
        """Refuse a runtime ``device`` cannot run (one line, before any work)."""
        problem = get_backend(self.backend).supports(self, device)
        if problem is not None:
            raise RankkitError(problem)

    @property
    def torch_precision(self) -> str:
        """The autocast precision of the model's torch code: the backend's own on torch, else fp32
        (an exported encoder runs at its backend's precision; the heads around it stay fp32)."""
        return self.precision if self.backend == "torch" else "fp32"

    def describe(self) -> str:
        """``onnx int8, 2 threads`` style summary for log lines."""
        parts = [self.backend + (" int8" if self.quantize == "int8" else "")]
        if self.precision != "fp32":
            parts.append(self.precision)
        if self.threads is not None:
            parts.append(f"{self.threads} thread{'s' * (self.threads > 1)}")
        return ", ".join(parts)

    def numerics(self) -> dict[str, str]:
        """What computes the numbers (recorded in dense index manifests): backend, quantization, precision."""
        return {"backend": self.backend, "quantize": self.quantize, "precision": self.precision}


def device_name(requested: str | None, runtime: Runtime) -> str:
    """The device rule on names: ``auto`` stays ``auto`` (CUDA when present) for a backend that runs on
    CUDA and is the CPU for one that does not; an explicit device the backend does not run on is refused."""
    name = requested or "auto"
    backend = get_backend(runtime.backend)
    if name == "auto":
        return "auto" if "cuda" in backend.devices else "cpu"
    if name in DEVICES and name not in backend.devices:
        problem = backend.supports(runtime, torch.device(name))
        raise RankkitError(problem or f"--backend {runtime.backend} does not run on {name}")
    return name


def inference_device(requested: str | torch.device | None, runtime: Runtime, local_rank: int = 0) -> torch.device:
    """The device a model runs on under ``runtime`` (:func:`device_name`'s rule; a ``torch.device`` is taken as is)."""
    if isinstance(requested, torch.device):
        return requested
    return pick_device(device_name(requested, runtime), local_rank)


__all__ = ["QUANTIZATIONS", "Runtime", "device_name", "inference_device"]
