"""``mono``: the point-wise cross-encoder (monoBERT-style; the "Point-wise" row of MatRank's Table 3).

``score(q, t_i) = w . h_i + b`` with ``h_i = encode_[CLS](q, t_i)`` (MatRank Eq. 1), trained with
softmax cross-entropy of each group's positive against its negatives (LCE, ``listwise-ce``, the
default; any group loss of :mod:`rankkit.models.losses` works, e.g. ``kl`` with ``--teacher``).

With ``--encoder bi`` the head is a small MLP on ``[q; t; q*t; |q-t|]`` plus the learned cosine
skip connection (see :mod:`rankkit.models.cross_encoders.candidate_list`), its last layer
initialised at zero so the untrained model ranks by the zero-shot cosine.
"""

from __future__ import annotations

import torch
from torch import nn

from rankkit.models.cross_encoders.candidate_list import CandidateListModel
from rankkit.models.inputs import GroupBatch
from rankkit.models.outputs import RankingOutput


class Mono(CandidateListModel):
    """Point-wise scores of each candidate, independent of the other candidates."""

    name = "mono"

    def build_head(self, dim: int, hidden: int) -> None:
        if hidden > 0:
            first = nn.Linear(dim, hidden)
            last = nn.Linear(hidden, 1)
            self.head: nn.Module = nn.Sequential(first, nn.GELU(), last)
        else:  # the paper-style linear layer on [CLS]
            last = nn.Linear(dim, 1)
            self.head = last
        if self.config.encoder == "bi":
            # Start exactly at the zero-shot cosine ranking; training learns corrections.
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    def pointwise(self, h: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        """Scores of pair vectors ``h [..., dim]`` (plus ``skip_weight * cos`` for the bi encoder)."""
        scores = self.head(h).squeeze(-1)
        if skip is not None:
            scores = scores + self.skip_weight * skip
        return scores

    def forward(self, batch: GroupBatch) -> RankingOutput:  # type: ignore[override]
        h, skip = self.grouped(batch)
        return RankingOutput(self.pointwise(h, skip))

    def list_scores(self, h: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        return self.pointwise(h, skip)
