"""Training: sampling and batching, optimisation, the loop, step checkpoints and resume, distribution.

Built on the model library (:mod:`rankkit.models`), never the other way round. Entry point:
:func:`train` with a :class:`TrainConfig`; ``rankkit mine`` (:mod:`rankkit.training.mine`) builds
the training groups it reads. The names below load on first use, so ``rankkit mine`` (which needs
no torch) starts fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"StepInfo": "config", "TrainConfig": "config", "TrainResult": "config", "train": "loop"}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"rankkit.training.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'rankkit.training' has no attribute {name!r}")


__all__ = ["StepInfo", "TrainConfig", "TrainResult", "train"]
