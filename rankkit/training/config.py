"""What ``rankkit train`` accepts (:class:`TrainConfig`) and what the trainer reports back."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankkit.devices import PRECISIONS
from rankkit.errors import RankkitError
from rankkit.hub import ModelReference
from rankkit.models import get_model_class
from rankkit.training.curves import check_report_to

if TYPE_CHECKING:
    from rankkit.models.base import RankingModel


@dataclass
class TrainConfig:
    """Everything ``rankkit train`` accepts; ``None`` means the model's default.

    ``model_options`` are the chosen model's own settings (names of its config dataclass,
    :mod:`rankkit.models.config`); unset ones take the model's defaults.
    """

    model: str
    train: list[Path]
    output: Path
    #: A model reference (:mod:`rankkit.hub`): local folder or hub id; None: the packaged MiniLM.
    backbone: ModelReference | None = None
    epochs: int | None = None
    max_steps: int | None = None
    batch_size: int = 32
    group_size: int = 8
    grad_accum: int = 1
    lr: float | None = None
    warmup: float = 0.1
    #: After the warm-up: ``linear`` decay to ``lr_decay_to`` x the peak, or ``inverse-time``
    #: ``1 / (1 + lr_decay_rate * steps after warm-up / lr_decay_every)`` (:mod:`rankkit.training.optim`).
    lr_schedule: str = "linear"
    lr_decay_to: float = 0.0
    lr_decay_rate: float | None = None
    lr_decay_every: float | None = None
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
    teacher_checkpoint: ModelReference | None = None
    alpha: float = 0.5
    #: ``eq12`` (PARADE Eq. 12 as written) or ``loss-mse`` (the student's --loss plus a per-group MSE).
    distillation: str = "eq12"
    log_every: int = 10
    #: ``fp32``, ``bf16`` (autocast on CPU and CUDA) or ``fp16`` (autocast with loss scaling, CUDA only);
    #: the weights, the optimiser state and every checkpoint stay fp32 (:mod:`rankkit.devices`). ``auto``
    #: (the command's default) picks one from the device and the model (:func:`rankkit.devices.resolve_precision`).
    precision: str = "auto"
    #: Recompute the transformer blocks' activations in the backward pass (less memory, ~1 more forward).
    gradient_checkpointing: bool = False
    #: Start from this rankkit checkpoint's weights (fresh optimiser and schedule; :mod:`rankkit.training.warm_start`).
    init_checkpoint: ModelReference | None = None
    #: Processes preparing (sampling, collating, tokenising) batches ahead; 0 = on the training thread; None =
    #: auto (CUDA: enough to keep the GPU fed; CPU: 0; :func:`rankkit.training.loader.resolve_workers`).
    workers: int | None = None
    #: Each group's whole list in teacher order instead of 1 positive + sampled negatives
    #: (:mod:`rankkit.training.lists`; Set-Encoder distillation).
    whole_lists: bool = False
    #: Where else the loss and dev metrics go: ``tensorboard`` (OUTPUT/tensorboard/); metrics.csv and
    #: training.png are always written (:mod:`rankkit.training.curves`).
    report_to: list[str] = field(default_factory=list)
    #: Passage texts of ids-only ``--train`` files (qidpidtriples, ``rankkit mine --ids-only`` groups),
    #: looked up through the corpus's docid table when a step draws them (:mod:`rankkit.training.data`).
    collection: Path | None = None
    #: Query texts of ids-only ``--train`` files (any topics file).
    queries: Path | None = None
    model_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepInfo:
    """What callbacks see after each optimiser step (``loss``: this step's own loss; what is logged is the mean
    over the steps since the previous log line)."""

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


def check_schedule(config: TrainConfig) -> None:
    """The learning-rate schedule's settings, each given only to the schedule that reads it."""
    from rankkit.training.optim import LR_SCHEDULES

    if config.lr_schedule not in LR_SCHEDULES:
        raise RankkitError(f"unknown --lr-schedule {config.lr_schedule!r}; use {' or '.join(LR_SCHEDULES)}")
    if not (math.isfinite(config.lr_decay_to) and 0.0 <= config.lr_decay_to <= 1.0):
        raise RankkitError(f"--lr-decay-to must be between 0 and 1 (a fraction of the peak rate), got {config.lr_decay_to}")
    inverse = (config.lr_decay_rate, config.lr_decay_every)
    if config.lr_schedule == "linear":
        if any(value is not None for value in inverse):
            raise RankkitError("--lr-decay-rate and --lr-decay-every set --lr-schedule inverse-time, not linear")
        return
    if config.lr_decay_to != 0.0:
        raise RankkitError("--lr-decay-to sets where --lr-schedule linear ends; inverse-time takes --lr-decay-rate")
    if config.lr_decay_rate is None or config.lr_decay_every is None:
        raise RankkitError("--lr-schedule inverse-time needs --lr-decay-rate R and --lr-decay-every STEPS")
    if not (math.isfinite(config.lr_decay_rate) and config.lr_decay_rate >= 0.0):
        raise RankkitError(f"--lr-decay-rate must be a finite number >= 0, got {config.lr_decay_rate}")
    if not (math.isfinite(config.lr_decay_every) and config.lr_decay_every > 0.0):
        raise RankkitError(f"--lr-decay-every must be a finite number of steps > 0, got {config.lr_decay_every}")


#: ``(smallest, largest)`` of every numeric ``rankkit train`` setting, checked by name before any work
#: (flags and ``--config`` recipes alike). The upper ends are far past any real run and keep a typo
#: or a hostile recipe (``seed = 2**70``, ``group_size = 10**9``, ``lr = 1e300``) from reaching an
#: overflow or an allocation: 10^9 optimiser steps take years; 4,096 candidates per group and
#: 65,536 groups per batch are past any accelerator's memory.
TRAIN_RANGES: dict[str, tuple[float, float]] = {
    "seed": (0, 2**32 - 1),  # numpy's and torch's seeds
    "epochs": (1, 1_000_000),
    "max_steps": (1, 10**9),
    "batch_size": (1, 65_536),
    "group_size": (1, 4_096),
    "grad_accum": (1, 65_536),
    "log_every": (1, 10**9),
    "save_every": (1, 10**9),
    "keep_checkpoints": (0, 1_000_000),
    "workers": (0, 256),
    "dev_max_candidates": (1, 1_000_000),
    "max_query_length": (1, 1 << 20),
    "max_doc_length": (1, 1 << 20),
    "lr": (0.0, 10.0),
    "weight_decay": (0.0, 1000.0),
    "warmup": (0.0, 10**9),  # a fraction of the steps (< 1) or a number of steps
    "max_grad_norm": (0.0, 1e6),
}


def _shown(value: object) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{float(value):.3g}" if isinstance(value, (int, float)) else text[:21] + "..."


def check_ranges(config: TrainConfig) -> None:
    """Every numeric setting of :data:`TRAIN_RANGES` inside its range (one line naming the option)."""
    for name, (low, high) in TRAIN_RANGES.items():
        value = getattr(config, name)
        if value is None:
            continue
        flag = f"--{name.replace('_', '-')}"
        if isinstance(low, float) and (not math.isfinite(value) or value < low):
            raise RankkitError(f"{flag} must be a finite number >= {low:g}, got {value}")
        if value < low:
            raise RankkitError(f"{flag} must be at least {low:g}, got {_shown(value)}")
        if value > high:
            raise RankkitError(f"{flag} must be at most {high:g}, got {_shown(value)}")


def check_workers(workers: int) -> int:
    """A number of ``--workers`` processes, checked."""
    if workers < 0:
        raise RankkitError(f"--workers must be at least 0, got {workers}")
    return int(workers)


def workers_setting(value: object) -> int | None:
    """A ``--workers`` value (``auto``, a number, or already an int/None) as the setting: None for auto."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    if isinstance(value, bool):
        raise RankkitError(f"--workers must be auto or a number of processes, got {value!r}")
    try:
        number = int(value) if isinstance(value, (int, str)) else None
    except ValueError:
        number = None
    if number is None:
        raise RankkitError(f"--workers must be auto or a number of processes, got {value!r}")
    return check_workers(number)


def check_config(config: TrainConfig) -> type[RankingModel]:
    """The model class, after checking the numeric settings and the model's own options."""
    check_ranges(config)
    check_schedule(config)
    if not 0.0 <= config.alpha <= 1.0:
        raise RankkitError(f"--alpha must be between 0 and 1 (weight of the student's own loss), got {config.alpha}")
    if config.precision not in ("auto",) + PRECISIONS:
        raise RankkitError(f"unknown precision {config.precision!r}; use auto, {', '.join(PRECISIONS)}")
    check_report_to(config.report_to)
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
