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


def max_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Element-wise maximum of the token vectors where ``attention_mask`` is 1 (sentence-transformers'
    ``max`` pooling: padding is set to -inf first)."""
    mask = attention_mask.unsqueeze(-1).expand_as(hidden)
    return hidden.masked_fill(mask == 0, float("-inf")).max(dim=1).values


#: The pooling modes rankkit computes, by sentence-transformers' names.
POOLING_MODES = ("mean", "cls", "max")


def pool(mode: str, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """One text vector per row by ``mode`` (``mean``, ``cls`` or ``max``), as sentence-transformers' Pooling."""
    if mode == "mean":
        return mean_pool(hidden, attention_mask)
    if mode == "cls":
        return cls_pool(hidden)
    if mode == "max":
        return max_pool(hidden, attention_mask)
    raise ValueError(f"unknown pooling mode {mode!r}; known: {', '.join(POOLING_MODES)}")
