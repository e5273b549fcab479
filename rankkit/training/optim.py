"""Optimisation: optimisers, learning-rate schedules, seeding."""

from __future__ import annotations

import random
from typing import Callable

import numpy as np
import torch

from rankkit.errors import RankkitError

OPTIMIZERS = ("adamw", "adafactor")


def warmup_steps(warmup: float, total_steps: int) -> int:
    """``--warmup`` below 1 is a fraction of the total steps, from 1 on a number of steps."""
    if warmup < 0:
        raise RankkitError(f"--warmup must be >= 0, got {warmup}")
    return int(round(warmup * total_steps)) if warmup < 1 else int(warmup)


#: ``--lr-schedule`` choices: what the rate does after the warm-up.
LR_SCHEDULES = ("linear", "inverse-time")


def warmup_factor(step: int, warmup: int) -> float:
    """Linear warm-up: ``(step + 1) / (warmup + 1)`` of the peak during the first ``warmup`` steps."""
    return (step + 1) / (warmup + 1)


def linear_schedule(warmup: int, total: int, decay_to: float = 0.0) -> Callable[[int], float]:
    """Linear warm-up to the peak learning rate, then linear decay to ``decay_to`` x the peak at
    ``total`` steps (``rankkit train --lr-decay-to``).

    ``decay_to`` 0 (the default) is the usual decay to 0; 1 keeps the peak after the warm-up (a
    constant rate, as a Lightning run without a scheduler). The default computes exactly the
    factors rankkit used before the option existed, so older runs reproduce bit for bit.
    """
    if not 0.0 <= decay_to <= 1.0:
        raise RankkitError(f"--lr-decay-to must be between 0 and 1 (a fraction of the peak rate), got {decay_to}")

    def factor(step: int) -> float:
        if step < warmup:
            return warmup_factor(step, warmup)
        remaining = max(0.0, (total - step) / max(1, total - warmup))
        if decay_to == 0.0:
            return remaining
        return decay_to + (1.0 - decay_to) * remaining

    return factor


def inverse_time_schedule(warmup: int, rate: float, every: float) -> Callable[[int], float]:
    """Linear warm-up, then ``1 / (1 + rate * t)`` of the peak with ``t = (step - warmup) / every``.

    This is what PARADE's "linear decay rate of 0.1 after the warm-up" (Li et al., 2023, §4.2) is in
    the authors' implementation: Capreolus' ``decaytype=linear`` with ``decay=0.1`` multiplies the
    rate by ``1 / (1 + decay * epoch)``, ``epoch`` counting training iterations (4,096 pairs) after
    the warm-up (capreolus/trainer/__init__.py, ``Trainer.lr_multiplier``, commit 789288c).
    ``every`` is the steps of one such iteration (``--lr-decay-every``).
    """
    if not (rate >= 0.0 and every > 0.0):
        raise RankkitError(f"--lr-decay-rate must be >= 0 and --lr-decay-every > 0, got {rate} and {every}")

    def factor(step: int) -> float:
        if step < warmup:
            return warmup_factor(step, warmup)
        return 1.0 / (1.0 + rate * (step - warmup) / every)

    return factor


def lr_schedule(kind: str, warmup: int, total: int, *, decay_to: float = 0.0, rate: float | None = None,
                every: float | None = None) -> Callable[[int], float]:
    """The learning-rate factor of each step for ``--lr-schedule kind`` (:data:`LR_SCHEDULES`)."""
    if kind == "linear":
        return linear_schedule(warmup, total, decay_to)
    if kind == "inverse-time":
        if rate is None or every is None:
            raise RankkitError("--lr-schedule inverse-time needs --lr-decay-rate R and --lr-decay-every STEPS")
        return inverse_time_schedule(warmup, rate, every)
    raise RankkitError(f"unknown --lr-schedule {kind!r}; use {' or '.join(LR_SCHEDULES)}")


def build_optimizer(model: torch.nn.Module, name: str, lr: float, weight_decay: float,
                    betas: tuple[float, float] = (0.9, 0.999)) -> torch.optim.Optimizer:
    """AdamW (or Adafactor) with no weight decay on biases and normalisation weights (1-d tensors)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=1e-8)
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(groups, lr=lr, scale_parameter=False, relative_step=False, warmup_init=False)
    raise RankkitError(f"unknown optimizer {name!r}; use {' or '.join(OPTIMIZERS)}")


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA); data sampling does not use these streams."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
