"""Training: sampling and batching, optimisation, the loop, step checkpoints and resume, distribution.

Built on the model library (:mod:`rankkit.models`), never the other way round. Entry point:
:func:`train` with a :class:`TrainConfig`; ``rankkit mine`` (:mod:`rankkit.training.mine`) builds
the training groups it reads.
"""

from rankkit.training.config import StepInfo, TrainConfig, TrainResult
from rankkit.training.loop import train

__all__ = ["StepInfo", "TrainConfig", "TrainResult", "train"]
