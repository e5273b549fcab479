"""The inference backends: what a backend declares (:class:`Backend`) and the registry that finds it by name.

A backend is one file holding a :class:`Backend` subclass, plus one ``register_backend(...)`` line
(``rankkit/runtime/__init__.py`` for the built-in ones, anywhere for a plug-in; the pattern of
ir_measures' providers: ``supports``, ``available`` with an install hint). What a backend runs
(devices, quantizations, precisions) is declared once on its class; :class:`~rankkit.runtime.settings.Runtime`
validates ``--backend``/``--quantize``/``--precision`` against it, ``rankkit doctor`` lists
:meth:`Backend.available`, and :func:`rankkit.runtime.compose.load_for_inference` asks
:meth:`Backend.encoder` for each encoder slot a model declares.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from rankkit.errors import RankkitError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from rankkit.models.encoder_slots import EncoderSlot


class RuntimeSettings(Protocol):
    """What a backend reads of a :class:`~rankkit.runtime.settings.Runtime` (declared here so that the
    registry needs nothing above it)."""

    @property
    def backend(self) -> str: ...

    @property
    def quantize(self) -> str: ...

    @property
    def threads(self) -> int | None: ...

    @property
    def precision(self) -> str: ...


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run here: ``detail`` says what was found, ``hint`` how to install what is missing."""

    ok: bool
    detail: str
    hint: str = ""


class Backend:
    """One inference backend (``--backend NAME``).

    Class attributes declare what it runs: ``devices`` (``cpu``, ``cuda``), ``quantizations``
    (``--quantize`` value -> what it means on this backend), ``precisions`` (``--precision`` values),
    ``requires`` (modules that must be importable) and ``install_hint``. A backend that swaps a
    model's encoders (``swaps_encoders``) implements :meth:`encoder`; ``torch`` swaps nothing.
    """

    name: ClassVar[str]
    #: The engine's own name, for log lines and ``rankkit doctor``.
    engine: ClassVar[str]
    devices: ClassVar[tuple[str, ...]] = ("cpu",)
    quantizations: ClassVar[dict[str, str]] = {"none": "no quantization"}
    precisions: ClassVar[tuple[str, ...]] = ("fp32",)
    requires: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = ""
    swaps_encoders: ClassVar[bool] = True

    def available(self) -> Availability:
        """Whether the backend's packages are installed (versions in ``detail``; found without importing them)."""
        missing = [module for module in self.requires if importlib.util.find_spec(module) is None]
        if missing:
            return Availability(False, f"{', '.join(missing)} not installed", self.install_hint)
        return Availability(True, ", ".join(self.requires) or "built in")

    def supports(self, runtime: RuntimeSettings, device: torch.device | None = None) -> str | None:
        """Why ``runtime`` cannot run on this backend (on ``device`` when given), or None when it can."""
        if runtime.quantize not in self.quantizations:
            others = [b for b in BACKENDS.values() if runtime.quantize in b.quantizations]
            options = " or ".join(f"{b.name} ({b.quantizations[runtime.quantize]})" for b in others)
            return f"--quantize {runtime.quantize} needs --backend {options}"
        if runtime.precision not in self.precisions:
            names = [b.name for b in BACKENDS.values() if runtime.precision in b.precisions]
            quantized = [q for q in self.quantizations if q != "none"]
            also = f" (or --quantize {' or '.join(quantized)})" if quantized else ""
            return (f"--precision {runtime.precision} runs on --backend {' or '.join(names)}; --backend {self.name} "
                    f"runs --precision {' or '.join(self.precisions)}{also}")
        if device is not None and device.type not in self.devices:
            where = " or ".join("the CPU" if d == "cpu" else d for d in self.devices)
            return f"--backend {self.name} runs on {where}; use --device {self.devices[0]} (or --backend torch on {device.type})"
        return None

    def encoder(self, slot: EncoderSlot, runtime: RuntimeSettings, checkpoint: str | os.PathLike[str] | None,
                model: nn.Module) -> tuple[nn.Module, Path]:
        """The module to put in ``slot``'s place for ``runtime``, and the export file it runs."""
        raise RankkitError(f"--backend {self.name} does not swap encoders")

    def describe(self) -> str:
        """One line for ``rankkit doctor``: devices, quantizations and precisions."""
        quantize = ", ".join(q for q in self.quantizations if q != "none")
        return (f"{'/'.join(self.devices)}; precision {', '.join(self.precisions)}"
                + (f"; --quantize {quantize}" if quantize else ""))


#: Registered backends by name, in registration order (``torch`` first).
BACKENDS: dict[str, Backend] = {}


def register_backend(backend: type[Backend] | Backend) -> Backend:
    """Make ``backend`` available as ``--backend NAME`` (a class is instantiated once). Returns the instance."""
    instance = backend() if isinstance(backend, type) else backend
    name = getattr(instance, "name", None)
    if not isinstance(name, str) or not name or name == "auto":
        raise RankkitError(f"backend {type(instance).__name__} needs a name (not 'auto')")
    BACKENDS[name] = instance
    return instance


def get_backend(name: str) -> Backend:
    """The backend registered as ``name``, or a one-line refusal naming the known ones."""
    backend = BACKENDS.get(name)
    if backend is None:
        raise RankkitError(f"unknown backend {name!r}; use {' or '.join(BACKENDS)}")
    return backend


def backend_names() -> tuple[str, ...]:
    return tuple(BACKENDS)


__all__ = ["BACKENDS", "Availability", "Backend", "RuntimeSettings", "backend_names", "get_backend", "register_backend"]
