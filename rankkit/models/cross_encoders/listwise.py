"""``listwise``: the "List-wise" row of MatRank's Table 3 (Luo, Yang, Guo, Li, Niu and Xu, 2022,
"MatRank: Text Re-ranking by Latent Preference Matrix", §4.3, Figure 5).

"We concatenate the latent vectors obtained from the cross-encoder and employ an MLP model to
generate the passage score in a multi-class classification setting":

* ``h_i = encode_[CLS](q, t_i)`` (Eq. 1; ``--encoder bi`` is rankkit's CPU variant);
* ``x = [h_1; h_2; ...; h_L]``, the concatenation over a fixed number L of candidate slots
  (``--list-size``; slots past the query's M candidates hold zero vectors);
* ``(s_1..s_L) = W_2 GELU(W_1 x + b_1) + b_2``: one MLP maps the whole list to L logits, so each
  score can depend on every candidate (the interaction the paper wanted to test), trained as an
  L-way classification (softmax cross-entropy of the positive, ``listwise-ce``; padded slots are
  masked out of the softmax).

This is *not* ``mono --loss listwise-ce``: that model scores each candidate alone from its own
``h_i`` (the "Point-wise" row) and only the loss is list-wise; here the network itself reads the
list. Because a concatenation is order-aware and training groups hold the positive in slot 0, the
slots of every training group are shuffled before the concatenation (a permutation drawn from a
generator seeded by the batch's qids and docids, so runs are deterministic) and the scores put
back; in eval mode the candidates keep their given order (the first-stage ranking).

A query with more than L candidates cannot be scored by this network: ``rankkit rerank`` refuses
with a one-line error naming ``--depth``.

With ``--encoder bi`` the cosine skip ``w_skip cos(q, t_i)`` is added to each slot's logit and
the last layer starts at zero (the untrained model ranks by the zero-shot cosine, as ``mono``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rankkit.errors import RankkitError
from rankkit.models.cross_encoders.candidate_list import CandidateListModel
from rankkit.models.cross_encoders.configs import LISTWISE
from rankkit.models.inputs import GroupBatch, batch_rng
from rankkit.models.outputs import RankingOutput


def pad_slots(h: torch.Tensor, size: int) -> torch.Tensor:
    """``h [G, S, d]`` padded with zero vectors to ``[G, size, d]``."""
    return F.pad(h, (0, 0, 0, size - h.shape[1]))


class Listwise(CandidateListModel, spec=LISTWISE):
    """MatRank's List-wise: one MLP over the concatenated pair vectors of a query's candidates."""

    #: The concatenation gives each slot its own weights: the input order is part of the input.
    permutation_invariant: ClassVar[bool] = False

    def build_head(self, dim: int, hidden: int) -> None:
        size = int(self.config.list_size)  # type: ignore[attr-defined]
        hidden = hidden if hidden > 0 else dim
        self.mlp_in = nn.Linear(size * dim, hidden)
        self.activation = nn.GELU()
        self.mlp_out = nn.Linear(hidden, size)
        if self.config.encoder == "bi":
            nn.init.zeros_(self.mlp_out.weight)
            nn.init.zeros_(self.mlp_out.bias)

    @property
    def list_size(self) -> int:
        return int(self.mlp_out.out_features)

    def head(self, h: torch.Tensor, skip: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor:
        """Logits ``[G, S]`` of pair vectors ``h [G, S, dim]`` (``S <= L``; masked slots zeroed first)."""
        g, s, _ = h.shape
        if s > self.list_size:
            raise RankkitError(f"model {self.name} scores at most {self.list_size} candidates per query (its "
                               f"--list-size), got {s}: use --group-size, --dev-max-candidates or rerank --depth "
                               f"{self.list_size} or less")
        x = pad_slots(h * mask[..., None].to(h.dtype), self.list_size).reshape(g, -1)
        scores = self.mlp_out(self.activation(self.mlp_in(x)))[:, :s]
        if skip is not None:
            scores = scores + self.skip_weight * skip
        return scores.masked_fill(~mask, 0.0)

    def forward(self, batch: GroupBatch) -> RankingOutput:  # type: ignore[override]
        h, skip = self.grouped(batch)
        mask = batch.mask
        if not self.training:
            return RankingOutput(self.head(h, skip, mask))
        # Shuffle each group's slots so the positive's slot carries no signal; put the scores back.
        rng = batch_rng(batch)
        perm = torch.from_numpy(
            np.stack([rng.permutation(h.shape[1]) for _ in range(h.shape[0])]).reshape(h.shape[0], h.shape[1])
        ).to(device=h.device, dtype=torch.long)
        gather = perm[..., None].expand_as(h)
        shuffled = self.head(torch.gather(h, 1, gather), None if skip is None else torch.gather(skip, 1, perm),
                             torch.gather(mask, 1, perm))
        scores = torch.empty_like(shuffled).scatter(1, perm, shuffled)
        return RankingOutput(scores)

    def list_scores(self, h: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        mask = torch.ones((1, h.shape[0]), dtype=torch.bool, device=h.device)
        return self.head(h[None], None if skip is None else skip[None], mask)[0]
