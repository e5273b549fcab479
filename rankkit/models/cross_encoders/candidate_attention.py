"""``matrank-attn``: the "+Attention" row of MatRank's Table 3 (Luo, Yang, Guo, Li, Niu and Xu, 2022,
"MatRank: Text Re-ranking by Latent Preference Matrix", §4.3, Figure 5).

"We employ a Transformer encoder layer to build the attention among all query-passage pairs of q
and set the output dimension to 1 to score their relevance to the query":

* ``h_i = encode_[CLS](q, t_i)`` (Eq. 1; ``--encoder bi`` is rankkit's CPU variant);
* ``z_1..z_M = TransformerEncoderLayer(h_1..h_M)``: one post-LayerNorm encoder layer (multi-head
  self-attention plus a feed-forward block, each with a residual) over the query's M candidates,
  padded slots masked out of the attention; no position embeddings, so the scores do not depend on
  the candidates' order (training groups put the positive in slot 0: an order-aware head would
  learn the slot);
* ``score_i = w . z_i + b`` (output dimension 1), trained with the softmax cross-entropy of the
  positive among its group (``listwise-ce``, the multi-class classification the paper's List-wise
  rows use).

With ``--encoder bi`` the cosine skip ``w_skip cos(q, t_i)`` is added and the last layer starts at
zero, so the untrained model ranks by the zero-shot cosine (as ``mono``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rankkit.errors import RankkitError
from rankkit.models.cross_encoders.candidate_list import CandidateListModel
from rankkit.models.cross_encoders.configs import CANDIDATE_ATTENTION, CandidateAttentionConfig
from rankkit.models.inputs import GroupBatch
from rankkit.models.outputs import RankingOutput


class CandidateAttention(CandidateListModel, spec=CANDIDATE_ATTENTION):
    """MatRank's +Attention: the candidates' pair vectors attend to each other, then a linear score."""

    def build_head(self, dim: int, hidden: int) -> None:
        config = self.config
        assert isinstance(config, CandidateAttentionConfig)
        encoder: Any = self.pairs.encoder
        heads = int(config.attention_heads) or int(getattr(encoder.config, "num_attention_heads", 1))
        if dim % heads:
            raise RankkitError(f"--attention-heads {heads} does not divide the pair vector width {dim}")
        #: The Transformer encoder layer over the M candidates (post-LN, GELU, like BERT's own layers).
        self.attention = nn.TransformerEncoderLayer(
            d_model=dim, nhead=heads, dim_feedforward=hidden if hidden > 0 else 4 * dim,
            dropout=float(config.attention_dropout), activation="gelu", batch_first=True, norm_first=False)
        #: "set the output dimension to 1".
        self.score = nn.Linear(dim, 1)
        if config.encoder == "bi":
            # Start exactly at the zero-shot cosine ranking; training learns corrections.
            nn.init.zeros_(self.score.weight)
            nn.init.zeros_(self.score.bias)

    def head(self, h: torch.Tensor, skip: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor:
        """Scores ``[G, M]`` of pair vectors ``h [G, M, dim]`` with real slots ``mask [G, M]``."""
        z = self.attention(h, src_key_padding_mask=~mask)
        scores = self.score(z).squeeze(-1)
        if skip is not None:
            scores = scores + self.skip_weight * skip
        return scores.masked_fill(~mask, 0.0)

    def forward(self, batch: GroupBatch) -> RankingOutput:  # type: ignore[override]
        h, skip = self.grouped(batch)
        return RankingOutput(self.head(h, skip, batch.mask))

    def list_scores(self, h: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        mask = torch.ones((1, h.shape[0]), dtype=torch.bool, device=h.device)
        return self.head(h[None], None if skip is None else skip[None], mask)[0]
