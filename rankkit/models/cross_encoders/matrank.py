"""MatRank (Luo, Yang, Guo, Li, Niu and Xu, 2022, "MatRank: Text Re-ranking by Latent Preference
Matrix", §3.1, Eqs. 1-8) and its one-direction ablations of Table 3 (``matrank-row``: beta only;
``matrank-col``: omega only, the "column-wise only MatRank" of §4.3).

* Eq. 1: ``h_i = encode_[CLS](q, t_i)`` (:mod:`rankkit.models.cross_encoders.pair_encoders`;
  ``--encoder bi`` is the documented CPU variant).
* Eqs. 2-3: ``s_ij = MLP([h_i ; h_j])``, ``S = [s_ij]`` with ``s_ii = 0``. The MLP is
  ``w2 . act(W [h_i; h_j] + b1) + b2``; its first layer is split, ``W [h_i; h_j] = W_a h_i + W_b h_j``,
  so each candidate's two projections are computed once and S is built in row blocks: no M^2
  encoder passes and no ``M^2 x 2d`` tensor (memory ``block x M x hidden``).
* Eqs. 4-5: ``r = row means``, ``c = column means`` of S (divided by the query's M real candidates).
* Eqs. 6-7: ``beta = softmax(r)``, ``omega = softmax(-c)``.
* Eq. 8: ``loss = -(sum_u y_u log beta_u + sum_v y_v log omega_v)`` (the paper prints it without
  the minus sign); with several positives ``y`` spreads the target mass evenly over them.
  ``matrank-row`` keeps only the beta term, ``matrank-col`` only the omega term. The loss itself
  is :class:`rankkit.models.losses.MatRankLoss`;
  the model returns the matrix aggregates (:class:`~rankkit.models.outputs.PreferenceOutput`).
* Inference (§3.1, last paragraph): rank by beta and by omega and fuse the two lists by Borda
  voting, each candidate getting ``M - rank`` from each list; ties go to the better beta. The
  written score is the vote plus a fraction below 1 that encodes the beta order (see :func:`borda_vote`).

For training-time group losses (``--loss kl`` etc.) and dev evaluation, the output's ``scores`` are
the differentiable ``r - c`` (``log beta + log omega`` up to a per-query constant), ``r`` for the row
ablation and ``-c`` for the column ablation.
With ``--encoder bi`` the cosine skip adds ``w (cos_i - cos_j)`` to ``s_ij`` so that r and -c both
start at the zero-shot ranking (the MLP's last layer starts at zero).
"""

from __future__ import annotations

from typing import ClassVar, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rankkit.models.cross_encoders.candidate_list import CandidateListModel
from rankkit.models.cross_encoders.configs import MATRANK, MATRANK_COL, MATRANK_ROW, MatRankConfig
from rankkit.models.inputs import GroupBatch
from rankkit.models.losses import matrank_loss
from rankkit.models.outputs import MatrixOutput, PreferenceMatrix, PreferenceOutput, RankingOutput

#: Elements of one ``[G, block, M, hidden]`` activation tensor while building S (64 MiB in float32;
#: at depth 1000 and hidden 384 that is 43 rows per block, about 200 MB peak: small blocks are
#: slower because the broadcast add and GELU are memory-bound).
BLOCK_ELEMENTS = 1 << 24


def blockwise_preference_matrix(a: torch.Tensor, b: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor,
                                activation: nn.Module, block: int | None = None) -> torch.Tensor:
    """Eqs. 2-3 without the diagonal rule: ``S[g, i, j] = w2 . act(a[g, i] + b[g, j]) + b2``.

    ``a = W_a h + b1`` and ``b = W_b h`` are ``[G, M, H]`` (the split first layer). Rows are built
    ``block`` at a time so peak memory is ``G x block x M x H`` elements, not ``G x M^2 x 2d``.
    """
    g, m, hdim = a.shape
    if block is None:
        block = max(1, BLOCK_ELEMENTS // max(1, g * m * hdim))
    rows = []
    for start in range(0, m, block):
        act = activation(a[:, start:start + block, None, :] + b[:, None, :, :])  # [G, blk, M, H]
        rows.append((act.reshape(-1, hdim) @ w2).reshape(act.shape[:3]) + b2)
    return torch.cat(rows, dim=1) if rows else a.new_zeros((g, 0, m))


def split_mlp_matrix(h: torch.Tensor, mlp_in: nn.Linear, mlp_out: nn.Linear, activation: nn.Module,
                     block: int | None = None) -> torch.Tensor:
    """Eq. 2 for all pairs: ``MLP([h_i ; h_j])`` of ``h [G, M, d]`` with the first layer split,
    ``W [h_i; h_j] = W_a h_i + W_b h_j``, each projection computed once per candidate."""
    d = h.shape[-1]
    weight = mlp_in.weight
    a = h @ weight[:, :d].T + mlp_in.bias  # W_a h_i + b1, once per candidate
    b = h @ weight[:, d:].T  # W_b h_j, once per candidate
    return blockwise_preference_matrix(a, b, mlp_out.weight[0], mlp_out.bias[0], activation, block)


def masked_log_softmax(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``log softmax`` over the real slots of each row (masked slots get a very negative value)."""
    neg = torch.finfo(x.dtype).min
    return F.log_softmax(x.masked_fill(~mask, neg), dim=-1)


def aggregate(S: torch.Tensor, mask: torch.Tensor) -> MatrixOutput:
    """Eqs. 3-7 from a raw ``[G, M, M]`` matrix: zero the diagonal (and masked rows/columns), take
    row and column means over the query's real candidates, then the two softmaxes."""
    S = S.float()  # means and softmaxes in fp32 under --precision bf16/fp16 (no-op in fp32)
    m = S.shape[-1]
    pair = mask[:, :, None] & mask[:, None, :] & ~torch.eye(m, dtype=torch.bool, device=S.device)
    S = S * pair.to(S.dtype)
    count = mask.sum(dim=1, keepdim=True).clamp(min=1).to(S.dtype)
    r = S.sum(dim=2) / count
    c = S.sum(dim=1) / count
    return MatrixOutput(S, r, c, masked_log_softmax(r, mask), masked_log_softmax(-c, mask))


def descending_ranks(x: torch.Tensor) -> torch.Tensor:
    """0-based rank of each entry when sorted descending (stable: ties keep input order)."""
    order = torch.sort(x, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    ranks[order] = torch.arange(x.numel(), device=x.device)
    return ranks


def borda_vote(beta: torch.Tensor, omega: torch.Tensor | None) -> torch.Tensor:
    """§3.1's voting fusion of the beta and omega rankings of one query's M candidates.

    Each list gives a candidate ``M - rank`` points (rank 1 = best); the vote is their sum.
    Returned (float64): ``vote + (M - rank_beta) / M``: the integer part is the Borda vote, the
    fraction (below 1, so it never changes the vote order) breaks ties by beta. With ``omega``
    ``None`` (MatRank_row) only the beta list votes.
    """
    m = beta.numel()
    rb = descending_ranks(beta).double() + 1
    vote = m - rb
    if omega is not None:
        vote = vote + (m - (descending_ranks(omega).double() + 1))
    return vote + (m - rb) / m


def vote_scores(output: RankingOutput, mask: torch.Tensor) -> torch.Tensor:
    """Inference scores ``[G, S]`` of a MatRank forward pass: each group's :func:`borda_vote` over its real
    slots, of beta and omega, or the one direction an ablation keeps (``use_beta``/``use_omega``)."""
    assert isinstance(output, PreferenceOutput)
    m = output.matrix
    scores = torch.zeros(mask.shape, dtype=torch.float64, device=mask.device)
    for g, row in enumerate(mask):
        real = row.nonzero().flatten()
        beta, omega = m.log_beta[g, real], m.log_omega[g, real]
        if not output.use_beta:
            vote = borda_vote(omega, None)
        else:
            vote = borda_vote(beta, omega if output.use_omega else None)
        scores[g, real] = vote.to(scores.device)
    return scores


class MatRank(CandidateListModel, spec=MATRANK):
    """MatRank: a latent preference matrix over a query's candidates (Eqs. 1-8)."""

    #: MatRank_row: the beta ranking only, in the loss and at inference.
    row_only: ClassVar[bool] = False
    #: The column-only ablation: the omega ranking only, in the loss and at inference.
    col_only: ClassVar[bool] = False

    def build_head(self, dim: int, hidden: int) -> None:
        hidden = hidden if hidden > 0 else dim
        #: The MLP of Eq. 2 over ``[h_i ; h_j]`` (one Linear(2d, H); split at use into W_a, W_b).
        self.mlp_in = nn.Linear(2 * dim, hidden)
        self.activation = nn.GELU()
        self.mlp_out = nn.Linear(hidden, 1)
        if self.config.encoder == "bi":
            nn.init.zeros_(self.mlp_out.weight)
            nn.init.zeros_(self.mlp_out.bias)

    def raw_matrix(self, h: torch.Tensor, skip: torch.Tensor | None, block: int | None = None) -> torch.Tensor:
        """``MLP([h_i ; h_j])`` for all ``i, j`` of ``h [G, M, d]`` (Eq. 2), built blockwise; the
        ``bi`` encoder's cosine skip adds ``w (cos_i - cos_j)``."""
        S = split_mlp_matrix(h, self.mlp_in, self.mlp_out, self.activation, block)
        if skip is not None:
            S = S + self.skip_weight * (skip[:, :, None] - skip[:, None, :])
        return S

    def matrix(self, h: torch.Tensor, skip: torch.Tensor | None, mask: torch.Tensor) -> MatrixOutput:
        """Eqs. 2-7 for ``h [G, M, d]`` with real slots ``mask [G, M]``."""
        return aggregate(self.raw_matrix(h, skip), mask)

    def forward(self, batch: GroupBatch) -> PreferenceOutput:  # type: ignore[override]
        """The matrix aggregates; ``scores`` = differentiable ``r - c`` (``r`` for the row ablation,
        ``-c`` for the column ablation)."""
        h, skip = self.grouped(batch)
        out = self.matrix(h, skip, batch.mask)
        scores = out.r if self.row_only else -out.c if self.col_only else out.r - out.c
        return PreferenceOutput(scores=scores, matrix=out, use_omega=not self.row_only, use_beta=not self.col_only)

    def inference_scores(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        """The Borda vote (§3.1) of each group's real candidates, from the forward pass's matrix aggregates."""
        return vote_scores(output, batch.mask)

    def vote(self, out: MatrixOutput) -> torch.Tensor:
        """The final scores of one query (batch of 1): the Borda vote of beta and omega, or the one
        direction an ablation keeps (ties broken by that direction)."""
        if self.col_only:
            return borda_vote(out.log_omega[0], None)
        return borda_vote(out.log_beta[0], None if self.row_only else out.log_omega[0])

    def list_scores(self, h: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        """The Borda vote of one query's candidates (:func:`borda_vote`)."""
        return self.vote(self.explain(h, skip))

    def explain(self, h: torch.Tensor, skip: torch.Tensor | None) -> MatrixOutput:
        """The matrix and its aggregates for one query's candidates ``h [M, d]`` (batch of 1)."""
        mask = torch.ones((1, h.shape[0]), dtype=torch.bool, device=h.device)
        return self.matrix(h[None], None if skip is None else skip[None], mask)

    def preference_matrix(self, query: str, texts: Sequence[str]) -> PreferenceMatrix:
        """S (Eq. 3) over one query's candidate texts, with beta, omega and the vote (Fig. 2)."""
        feats = self.pairs.features([query] * len(texts), list(texts))
        h, skip = self.pairs({k: v.to(self.device) for k, v in feats.items()})
        out = self.explain(h, skip)
        return PreferenceMatrix(out.S[0], [(i, 0) for i in range(len(texts))], out.log_beta[0], out.log_omega[0],
                                self.vote(out))


class MatRankRow(MatRank, spec=MATRANK_ROW):
    """MatRank_row (the paper's ablation): beta only, in the loss and at inference."""

    row_only = True


class MatRankCol(MatRank, spec=MATRANK_COL):
    """The column-only MatRank (§4.3: "the column-wise only MatRank has the same performance" as
    MatRank_row): omega = softmax(-c) only (Eq. 7), in the loss and at inference."""

    col_only = True


__all__ = ["MatRank", "MatRankCol", "MatRankConfig", "MatRankRow", "MatrixOutput", "aggregate", "blockwise_preference_matrix",
           "borda_vote", "descending_ranks", "masked_log_softmax", "matrank_loss", "split_mlp_matrix", "vote_scores"]
