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


def linear_schedule(warmup: int, total: int) -> Callable[[int], float]:
    """Linear warm-up to the peak learning rate, then linear decay to 0 at ``total`` steps."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


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
