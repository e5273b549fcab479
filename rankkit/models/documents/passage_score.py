"""Passage *score* aggregation (PARADE §3.2, Figure 1a; BERT-MaxP/FirstP/SumP): ``maxp``, ``firstp``, ``sump``.

Each passage gets a point-wise cross-encoder score ``s_i = w . p_i + b`` (a linear layer on the
[CLS] vector of PARADE Eq. 1, as ``mono``); the document score is

* ``maxp``: ``max_i s_i`` over the document's real passages (BERT-MaxP);
* ``firstp``: ``s_1``, the first passage only (BERT-FirstP; only the first window is encoded);
* ``sump``: ``sum_i s_i`` over the real passages.

All three train end to end on document labels (the loss sees only the document scores), unlike
BERT-MaxP's original passage-level training.
"""

from __future__ import annotations

from typing import ClassVar, Sequence

import numpy as np
import torch
from torch import nn

from dataclasses import dataclass

from rankkit.models.config import ModelConfig, option
from rankkit.models.documents.base import PassageWindowConfig, PerDocumentModel


def masked_max(x: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Max of ``x`` over the True entries of ``mask`` along ``dim`` (``mask`` broadcasts to ``x``);
    a row without any True entry gives 0, never ``-inf``."""
    mask = mask.expand_as(x)
    best = x.masked_fill(~mask, torch.finfo(x.dtype).min).amax(dim=dim)
    return torch.where(mask.any(dim=dim), best, torch.zeros_like(best))


class PassageScoreModel(PerDocumentModel):
    """A linear score per passage, aggregated into a document score by :meth:`pool`."""

    def build_head(self, dim: int) -> None:
        self.scorer = nn.Linear(dim, 1)

    def pool(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Document scores ``[D]`` from passage scores ``s [D, N]`` (max by default)."""
        return masked_max(s, mask, dim=1)

    def document_scores(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.pool(self.scorer(p).squeeze(-1), mask)


class MaxP(PassageScoreModel):
    """BERT-MaxP: the best passage's score."""

    name = "maxp"


@dataclass
class FirstPConfig(PassageWindowConfig):
    """FirstP reads one window: stride and passage count do not apply."""

    stride: int = option(200, minimum=1, help="unused (one window)", cli=False)
    max_passages: int = option(16, minimum=1, help="unused (one window)", cli=False, rerank_flag="--max-passages")


class FirstP(PassageScoreModel):
    """BERT-FirstP: the first passage's score (the only passage split off and encoded)."""

    name = "firstp"
    config_class: ClassVar[type[ModelConfig]] = FirstPConfig

    def split(self, ids: Sequence[int], rng: np.random.Generator | None) -> list[list[int]]:
        # Only the first window is ever scored, so the others are never encoded.
        return [list(ids[: self.config.window])]

    def pool(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return s[:, 0]


class SumP(PassageScoreModel):
    """SumP: the sum of the real passages' scores."""

    name = "sump"

    def pool(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return s.masked_fill(~mask, 0.0).sum(dim=1)
