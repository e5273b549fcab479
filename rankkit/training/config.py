"""What ``rankkit train`` accepts (:class:`TrainConfig`) and what the trainer reports back."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rankkit.devices import PRECISIONS
from rankkit.errors import RankkitError
from rankkit.models import RankingModel, get_model_class


@dataclass
class TrainConfig:
    """Everything ``rankkit train`` accepts; ``None`` means the model's default.

    ``model_options`` are the chosen model's own settings (names of its config dataclass,
    :mod:`rankkit.models.config`); unset ones take the model's defaults.
    """

    model: str
    train: list[Path]
    output: Path
    backbone: Path | None = None
    epochs: int | None = None
    max_steps: int | None = None
    batch_size: int = 32
    group_size: int = 8
    grad_accum: int = 1
    lr: float | None = None
    warmup: float = 0.1
    optimizer: str = "adamw"
    weight_decay: float | None = None
    max_grad_norm: float = 1.0
    max_query_length: int | None = None
    max_doc_length: int | None = None
    seed: int = 42
    save_every: int | None = None
    keep_checkpoints: int = 1
    resume: bool = False
    device: str = "auto"
    dev: list[Path] = field(default_factory=list)
    dev_max_candidates: int = 100
    loss: str | None = None
    teacher: Path | None = None
    #: Knowledge distillation from a rankkit checkpoint (PARADE Eq. 12, :mod:`rankkit.training.objective`).
    teacher_checkpoint: Path | None = None
    alpha: float = 0.5
    #: ``eq12`` (PARADE Eq. 12 as written) or ``loss-mse`` (the student's --loss plus a per-group MSE).
    distillation: str = "eq12"
    log_every: int = 10
    #: ``fp32``, ``bf16`` (autocast on CPU and CUDA) or ``fp16`` (autocast with loss scaling, CUDA only);
    #: the weights, the optimiser state and every checkpoint stay fp32 (:mod:`rankkit.devices`).
    precision: str = "fp32"
    #: Recompute the transformer blocks' activations in the backward pass (less memory, ~1 more forward).
    gradient_checkpointing: bool = False
    #: Start from this rankkit checkpoint's weights (fresh optimiser and schedule; :mod:`rankkit.training.warm_start`).
    init_checkpoint: Path | None = None
    #: Processes preparing (sampling, collating, tokenising) batches ahead; 0 = on the training thread
    #: (:mod:`rankkit.training.loader`).
    workers: int = 0
    #: Each group's whole list in teacher order instead of 1 positive + sampled negatives
    #: (:mod:`rankkit.training.lists`; Set-Encoder distillation).
    whole_lists: bool = False
    #: Passage texts of ids-only ``--train`` files (qidpidtriples, ``rankkit mine --ids-only`` groups),
    #: looked up through the corpus's docid table when a step draws them (:mod:`rankkit.training.data`).
    collection: Path | None = None
    #: Query texts of ids-only ``--train`` files (any topics file).
    queries: Path | None = None
    model_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepInfo:
    """What callbacks see after each optimiser step."""

    step: int
    total_steps: int
    epoch: int
    loss: float
    lr: float


@dataclass
class TrainResult:
    """Where the model went and how training ended."""

    output: Path
    steps: int
    metrics: dict[str, float]


def check_config(config: TrainConfig) -> type[RankingModel]:
    """The model class, after checking the numeric settings and the model's own options."""
    if config.seed < 0:
        raise RankkitError(f"--seed must be at least 0, got {config.seed}")
    for name in ("batch_size", "group_size", "grad_accum", "log_every", "dev_max_candidates"):
        if getattr(config, name) < 1:
            raise RankkitError(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("keep_checkpoints", "workers"):
        if getattr(config, name) < 0:
            raise RankkitError(f"--{name.replace('_', '-')} must be at least 0")
    for name in ("save_every", "epochs", "max_steps"):
        if getattr(config, name) is not None and getattr(config, name) < 1:
            raise RankkitError(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("lr", "weight_decay", "warmup", "max_grad_norm"):
        value = getattr(config, name)
        if value is not None and (not math.isfinite(value) or value < 0):
            raise RankkitError(f"--{name.replace('_', '-')} must be a finite number >= 0, got {value}")
    if not 0.0 <= config.alpha <= 1.0:
        raise RankkitError(f"--alpha must be between 0 and 1 (weight of the student's own loss), got {config.alpha}")
    if config.precision not in PRECISIONS:
        raise RankkitError(f"unknown precision {config.precision!r}; use {', '.join(PRECISIONS)}")
    if config.distillation not in ("eq12", "loss-mse"):
        raise RankkitError(f"--distillation must be eq12 or loss-mse, got {config.distillation!r}")
    cls = get_model_class(config.model)
    own = {s.name for s in cls.config_class.model_options()}
    unknown = sorted(k for k, v in config.model_options.items() if v is not None and k not in own)
    if unknown:
        flags = ", ".join(s.flag for s in cls.config_class.model_options()) or "none"
        raise RankkitError(f"model {cls.name!r} has no option {', '.join('--' + u.replace('_', '-') for u in unknown)}; "
                           f"its options: {flags}")
    return cls
