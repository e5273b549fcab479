"""The runtime layer: how a model runs at inference time, between the model library and inference.

::

    settings.py          Runtime (--backend, --quantize, --threads, --precision) and the one device rule
    registry.py          Backend (devices, quantizations, precisions, supports, available + install hint), BACKENDS
    torch_backend.py     --backend torch: the model's own code (CPU or CUDA; fp32, bf16, fp16 autocast)
    onnx_backend.py      --backend onnx: ONNX Runtime on the CPU, fp32 or dynamic int8
    openvino_backend.py  --backend openvino: OpenVINO on the CPU, fp32, bf16 or NNCF static int8
    export.py            the checked ONNX export (traced, checked against torch on probe batches)
    cache.py             the export cache (keyed by the weights, beside a checkpoint or in the cache folder)
    adapter.py           OrtEncoder: a session called exactly as the encoder it replaces
    compose.py           load_for_inference(name, checkpoint, runtime, device): load, device, swap, numerics
    precision.py         Numerics: how torch computes (bf16/fp16 encoder weights on CUDA, autocast, TF32), the half check
    session.py           InferenceSession: what runs a loaded model (numerics, attention kernels, batching, prefetch)
    auto.py              --backend/--quantize/--precision auto: the measured table, the quality check, the fallbacks

Importing this package declares the backends and the runtime settings only (no torch, no engine): a command line
checks ``--backend``/``--quantize``/``--precision`` in a fraction of a second, and the ONNX scorer path
(:mod:`rankkit.runtime.scorer`) re-ranks without torch. What runs a model (the composer, the session, numerics)
loads on first use.

A model declares which encoders a backend may run (:mod:`rankkit.models.encoder_slots`) and never
imports this layer. A new backend is one file (a :class:`Backend` subclass) plus one
``register_backend(...)`` line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rankkit.runtime.onnx_backend import OnnxBackend
from rankkit.runtime.openvino_backend import OpenVinoBackend
from rankkit.runtime.registry import (
    BACKENDS,
    Availability,
    Backend,
    RuntimeSettings,
    backend_names,
    get_backend,
    register_backend,
)
from rankkit.runtime.settings import QUANTIZATIONS, Runtime, device_name, inference_device
from rankkit.runtime.torch_backend import TorchBackend

if TYPE_CHECKING:
    from rankkit.runtime.compose import LoadedModel, load_for_inference, swap_encoders, use_runtime
    from rankkit.runtime.precision import Numerics
    from rankkit.runtime.session import InferenceSession

register_backend(TorchBackend)
register_backend(OnnxBackend)
register_backend(OpenVinoBackend)

#: Names that need torch, imported on first use (PEP 562).
_LAZY = {"LoadedModel": "compose", "load_for_inference": "compose", "swap_encoders": "compose",
         "use_runtime": "compose", "Numerics": "precision", "InferenceSession": "session"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rankkit.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rankkit.runtime.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["BACKENDS", "QUANTIZATIONS", "Availability", "Backend", "InferenceSession", "LoadedModel", "Numerics", "Runtime",
           "RuntimeSettings", "backend_names",
           "device_name", "get_backend", "inference_device", "load_for_inference", "register_backend",
           "swap_encoders", "use_runtime"]
