"""Turning a sequence of token vectors into one text vector."""

from __future__ import annotations

import torch


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average of the token vectors where ``attention_mask`` is 1 (RepBERT Eq. 2, ``Average(BERT(...))``).

    ``hidden`` is ``[batch, length, dim]``, ``attention_mask`` ``[batch, length]``; padding never
    contributes. This is also sentence-transformers' ``pooling_mode_mean_tokens``.
    """
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    summed = (hidden * mask).sum(dim=1)
    # The clamp only matters for an all-padding row, which tokenisation never produces.
    counts = mask.sum(dim=1).clamp(min=1e-9)
    return summed / counts


def cls_pool(hidden: torch.Tensor) -> torch.Tensor:
    """The vector of the first token ([CLS]), ``[batch, dim]`` (DenseTrans §3.2.2)."""
    return hidden[:, 0]
