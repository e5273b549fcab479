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
from types import SimpleNamespace
from typing import TYPE_CHECKING

from rankkit.devices import DEVICES, PRECISIONS, pick_device
from rankkit.errors import RankkitError
from rankkit.runtime.registry import get_backend

# torch is imported where a device is picked (inference_device): --backend, --quantize, --precision and --device are
# validated without it, so a mistake is one line at once (issue 39).
if TYPE_CHECKING:
    import torch

#: ``int8-u8`` is ONNX Runtime's dynamic int8 with unsigned weights (:mod:`rankkit.runtime.onnx_backend`).
QUANTIZATIONS = ("none", "int8", "int8-u8")
#: ``--precision`` at inference: training's (:data:`rankkit.devices.PRECISIONS`) and ``tf32`` (fp32 weights, TF32
#: matmuls on CUDA: :mod:`rankkit.runtime.precision`).
INFERENCE_PRECISIONS = (*PRECISIONS, "tf32")
#: The value of ``--backend``, ``--quantize`` and ``--precision`` that lets rankkit choose (:mod:`rankkit.runtime.auto`).
AUTO = "auto"


@dataclass(frozen=True)
class Runtime:
    """How a model runs at inference time (``--backend``, ``--quantize``, ``--threads``, ``--precision``).

    Any of backend, quantization and precision may be ``auto``: :func:`rankkit.runtime.load_for_inference`
    then chooses from this CPU's features, the model and the measured table of :mod:`rankkit.runtime.auto`
    (with an explicit backend, ``--quantize auto`` is none and ``--precision auto`` that backend's best).
    """

    backend: str = "torch"
    quantize: str = "none"
    threads: int | None = None
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.quantize != AUTO and self.quantize not in QUANTIZATIONS:
            raise RankkitError(f"unknown quantization {self.quantize!r}; use auto, {' or '.join(QUANTIZATIONS)}")
        if self.precision != AUTO and self.precision not in INFERENCE_PRECISIONS:
            raise RankkitError(f"unknown precision {self.precision!r}; use auto, {', '.join(INFERENCE_PRECISIONS)}")
        if self.threads is not None and self.threads < 1:
            raise RankkitError(f"--threads must be at least 1, got {self.threads}")
        if self.backend == AUTO:
            return
        problem = get_backend(self.backend).supports(self.given())  # an unknown name is refused here
        if problem is not None:
            raise RankkitError(problem)

    @property
    def resolved(self) -> bool:
        """Whether nothing is left to choose (no ``auto``)."""
        return AUTO not in (self.backend, self.quantize, self.precision)

    def check(self, device: torch.device) -> None:
        """Refuse a runtime ``device`` cannot run (one line, before any work); ``auto`` parts are chosen for it."""
        if self.backend == AUTO:
            return
        problem = get_backend(self.backend).supports(self.given(), device)
        if problem is not None:
            raise RankkitError(problem)

    def given(self) -> Runtime:
        """This runtime with an ``auto`` quantization as none and an ``auto`` precision as fp32: what the
        user fixed, to check against a backend (every backend runs those two)."""
        if self.resolved:
            return self
        return Runtime(self.backend, "none" if self.quantize == AUTO else self.quantize, self.threads,
                       "fp32" if self.precision == AUTO else self.precision)

    def describe(self) -> str:
        """``onnx int8, 2 threads`` style summary for log lines."""
        parts = [self.backend + (f" {self.quantize}" if self.quantize != "none" else "")]
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
    if runtime.backend == AUTO:  # torch on CUDA when there is one (and asked for), else the CPU table
        return name
    backend = get_backend(runtime.backend)
    if name == "auto":
        return "auto" if "cuda" in backend.devices else "cpu"
    if name in DEVICES and name not in backend.devices:
        problem = backend.supports(runtime.given(), SimpleNamespace(type=name))  # type: ignore[arg-type]
        raise RankkitError(problem or f"--backend {runtime.backend} does not run on {name}")
    return name


def inference_device(requested: str | torch.device | None, runtime: Runtime, local_rank: int = 0) -> torch.device:
    """The device a model runs on under ``runtime`` (:func:`device_name`'s rule; a ``torch.device`` is taken as is)."""
    import torch

    if isinstance(requested, torch.device):
        return requested
    return pick_device(device_name(requested, runtime), local_rank)


__all__ = ["AUTO", "INFERENCE_PRECISIONS", "QUANTIZATIONS", "Runtime", "device_name", "inference_device"]
