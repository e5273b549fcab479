"""One composer for every inference entry point: load a model, choose its device, put it on its backend.

:func:`load_for_inference` is what ``rankkit rerank``, ``explain``, ``index --kind dense``,
``retrieve``, :mod:`rankkit.dense`, the Python API and the benchmarks call: the device follows the
one rule of :func:`rankkit.runtime.settings.inference_device`, the runtime is checked against that
device once, the model is loaded (:func:`rankkit.models.checkpoint.load_for_inference`: a rankkit
checkpoint, a Hugging Face folder used zero-shot, or the packaged default), its inference-time
settings are applied, and each encoder slot it declares is swapped for the backend's session
(:func:`use_runtime`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.models.base import RankingModel
from rankkit.models.encoder_slots import EncoderSlot
from rankkit.runtime.adapter import OrtEncoder
from rankkit.runtime.precision import Numerics, apply_numerics
from rankkit.runtime.registry import get_backend
from rankkit.runtime.settings import Runtime, inference_device


@dataclass(frozen=True)
class LoadedModel:
    """A model ready for inference: on ``device``, its encoders on ``runtime``'s backend (``exports`` in use);
    ``runtime`` is the one that runs (``auto`` resolved), ``numerics`` how torch computes around it (the
    weights' dtype, autocast, TF32: :mod:`rankkit.runtime.precision`). Run it through
    :class:`rankkit.runtime.session.InferenceSession`."""

    model: RankingModel
    runtime: Runtime
    device: torch.device
    exports: tuple[Path, ...] = ()
    numerics: Numerics = Numerics()


def load_for_inference(name: str, checkpoint: str | os.PathLike[str] | None, runtime: Runtime | None = None,
                       device: str | torch.device | None = "auto", *, settings: Mapping[str, Any] | None = None,
                       task: str = "rerank", sample: Any = None) -> LoadedModel:
    """Model ``name`` from ``checkpoint`` (``None``: its zero-shot form), on ``device`` and ``runtime``.

    ``device``: ``auto``, ``cpu``, ``cuda`` (the device rule of
    :func:`~rankkit.runtime.settings.inference_device`) or a ``torch.device`` already chosen (a
    torchrun process's own); ``settings``: inference-time settings (``rankkit rerank``'s model
    options) applied before the encoders are exported; ``task``: ``rerank`` or ``encode`` (a corpus or
    queries for dense retrieval), which ``auto`` chooses for (:mod:`rankkit.runtime.auto`); ``sample``: a few of
    the run's own inputs (:class:`rankkit.runtime.auto.InputSample`) on which ``auto``'s lossy choice must keep
    torch fp32's rankings.
    """
    from rankkit.models.checkpoint import load_for_inference as load_model

    runtime = runtime or Runtime()
    chosen = inference_device(device, runtime)
    runtime.check(chosen)  # the one check of the runtime against its device, before any work
    model = load_model(name, checkpoint)
    for key, value in (settings or {}).items():
        model.override(key, value)
    model.to(chosen)
    if runtime.resolved:
        exports = swap_encoders(model, runtime, checkpoint)
    else:  # --backend/--precision/--quantize auto: chosen for this CPU and model, logged (rankkit.runtime.auto)
        from rankkit.runtime.auto import choose

        runtime, exports = choose(model, runtime, chosen, checkpoint, task, sample)
    # The weights in the precision they run in (bf16 encoders on CUDA), once the runtime is settled.
    numerics = apply_numerics(model, runtime.backend, runtime.precision, chosen)
    return LoadedModel(model, runtime, chosen, tuple(exports), numerics)


def use_runtime(model: nn.Module, runtime: Runtime, *, checkpoint: str | os.PathLike[str] | None = None,
                device: torch.device | None = None) -> list[Path]:
    """Put an already loaded ``model`` on ``runtime`` (checked against ``device`` when given): threads
    set, and on a backend other than torch its encoders swapped for checked sessions of the (built or
    reused) export. Returns the export files in use.

    ``checkpoint`` is where the weights came from (exports live in the cache folder, keyed by the weights'
    content, never in the checkpoint). A model without an exportable encoder refuses a swapping backend in one line.
    """
    if device is not None:
        runtime.check(device)
    return swap_encoders(model, runtime, checkpoint)


def swap_encoders(model: nn.Module, runtime: Runtime, checkpoint: str | os.PathLike[str] | None) -> list[Path]:
    """:func:`use_runtime` without the device check (the composer has made it)."""
    if runtime.threads is not None:
        torch.set_num_threads(runtime.threads)
    backend = get_backend(runtime.backend)
    if not backend.swaps_encoders:
        return []
    slots: Sequence[EncoderSlot] = model.encoder_slots()  # type: ignore[operator]
    model.eval()
    used = []
    for slot in slots:
        module = slot.module
        if isinstance(module, OrtEncoder):
            raise RankkitError(f"{slot.name} already runs on {module.label}")
        encoder, path = backend.encoder(slot, runtime, checkpoint, model)
        setattr(slot.owner, slot.attribute, encoder)
        used.append(path)
    log(f"running {', '.join(s.name for s in slots)} on {backend.engine} ({runtime.describe()}): "
        + ", ".join(str(p) for p in used))
    return used


__all__ = ["LoadedModel", "load_for_inference", "swap_encoders", "use_runtime"]
