"""Passage *score* aggregation (PARADE §3.2, Figure 1a; BERT-MaxP/FirstP/SumP): ``maxp``, ``firstp``,
``sump``, ``avgp``, ``kmaxp``.

Each passage gets a point-wise cross-encoder score ``s_i = w . p_i + b`` (a linear layer on the
[CLS] vector of PARADE Eq. 1, as ``mono``); the document score is

* ``maxp``: ``max_i s_i`` over the document's real passages (BERT-MaxP);
* ``firstp``: ``s_1``, the first passage only (BERT-FirstP; only the first window is encoded);
* ``sump``: ``sum_i s_i`` over the real passages;
* ``avgp``: ``(1/n) sum_i s_i``, the mean over the n real passages (Figure 1a's average pooling);
* ``kmaxp``: the mean of the k highest passage scores (Figure 1a's k-max pooling, ``--k``, default
  3 as Birch's top-3 sentences; a document with fewer than k passages averages all of them).

By default they train end to end on document labels (the group losses see the document scores:
PARADE Table 7's "MaxP (e2e)"). ``--loss passage-ce`` trains them the way BERT-MaxP and PARADE's
ELECTRA-MaxP baseline were trained: every real passage is an example of its own, labelled with its
document's label (relevant or not), point-wise cross-entropy on its score
(:class:`~rankkit.models.losses.PassageCrossEntropyLoss`); the aggregation is then used at
inference only. The models return a :class:`~rankkit.models.outputs.PassageScoreOutput` (document
scores plus every passage score) so both objectives apply.
"""

from __future__ import annotations

from typing import ClassVar, Sequence

import numpy as np
import torch
from torch import nn

from rankkit.models.documents.base import PerDocumentModel
from rankkit.models.documents.configs import AVGP, FIRSTP, KMAXP, MAXP, PASSAGE_SCORE_PAPER, SUMP
from rankkit.models.inputs import GroupBatch
from rankkit.models.outputs import PassageScoreOutput


def masked_max(x: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Max of ``x`` over the True entries of ``mask`` along ``dim`` (``mask`` broadcasts to ``x``);
    a row without any True entry gives 0, never ``-inf``."""
    mask = mask.expand_as(x)
    best = x.masked_fill(~mask, torch.finfo(x.dtype).min).amax(dim=dim)
    return torch.where(mask.any(dim=dim), best, torch.zeros_like(best))


class PassageScoreModel(PerDocumentModel):
    """A linear score per passage, aggregated into a document score by :meth:`pool`."""

    paper: ClassVar[str] = PASSAGE_SCORE_PAPER

    output_type = PassageScoreOutput

    def build_head(self, dim: int) -> None:
        self.scorer = nn.Linear(dim, 1)

    def forward(self, batch: GroupBatch) -> PassageScoreOutput:  # type: ignore[override]
        """Document scores ``[G, S]`` plus every passage's score ``[G, S, N]`` and the passage mask."""
        p, pmask = self.passages(batch)
        pmask = pmask & batch.mask[..., None]
        passage_scores = self.scorer(p).squeeze(-1)
        g, s = batch.mask.nonzero(as_tuple=True)
        doc = self.pool(passage_scores[g, s], pmask[g, s])
        scores = doc.new_zeros(batch.mask.shape).index_put((g, s), doc)
        return PassageScoreOutput(scores=scores, passage_scores=passage_scores, passage_mask=pmask)

    def pool(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Document scores ``[D]`` from passage scores ``s [D, N]`` (max by default)."""
        return masked_max(s, mask, dim=1)

    def document_scores(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.pool(self.scorer(p).squeeze(-1), mask)


class MaxP(PassageScoreModel, spec=MAXP):
    """BERT-MaxP: the best passage's score."""


class FirstP(PassageScoreModel, spec=FIRSTP):
    """BERT-FirstP: the first passage's score (the only passage split off and encoded)."""

    def split(self, ids: Sequence[int], rng: np.random.Generator | None) -> list[list[int]]:
        # Only the first window is ever scored, so the others are never encoded.
        return [list(ids[: self.config.window])]

    def pool(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return s[:, 0]


class SumP(PassageScoreModel, spec=SUMP):
    """SumP: the sum of the real passages' scores."""

    def pool(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return s.masked_fill(~mask, 0.0).sum(dim=1)


class AvgP(PassageScoreModel, spec=AVGP):
    """AvgP (PARADE Figure 1a, average pooling): the mean of the real passages' scores."""

    def pool(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return s.masked_fill(~mask, 0.0).sum(dim=1) / mask.sum(dim=1).clamp(min=1).to(s.dtype)


def kmax_mean(s: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """The mean of the ``k`` largest real entries of each row of ``s [D, N]`` (all of them when a row
    has fewer than ``k``; 0 for a row without any)."""
    k = min(k, s.shape[1])
    top = s.masked_fill(~mask, torch.finfo(s.dtype).min).topk(k, dim=1).values
    count = mask.sum(dim=1).clamp(max=k)
    keep = torch.arange(k, device=s.device)[None, :] < count[:, None]
    return top.masked_fill(~keep, 0.0).sum(dim=1) / count.clamp(min=1).to(s.dtype)


class KMaxP(PassageScoreModel, spec=KMAXP):
    """k-max average pooling (PARADE Figure 1a): the mean of the k highest passage scores."""

    def pool(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return kmax_mean(s, mask, int(self.config.k))
