"""MatRank (paper 000, §3.1, Eqs. 1-8) and its MatRank_row ablation (``matrank-row``).

* Eq. 1: ``h_i = encode_[CLS](q, t_i)`` (:mod:`rankkit.models.cross_encoder`; ``--encoder bi`` is
  the documented CPU variant).
* Eqs. 2-3: ``s_ij = MLP([h_i ; h_j])``, ``S = [s_ij]`` with ``s_ii = 0``. The MLP is
  ``w2 . act(W [h_i; h_j] + b1) + b2``; its first layer is split, ``W [h_i; h_j] = W_a h_i + W_b h_j``,
  so each candidate's two projections are computed once and S is built in row blocks: no M^2
  encoder passes and no ``M^2 x 2d`` tensor (memory ``block x M x hidden``).
* Eqs. 4-5: ``r = row means``, ``c = column means`` of S (divided by the query's M real candidates).
* Eqs. 6-7: ``beta = softmax(r)``, ``omega = softmax(-c)``.
* Eq. 8: ``loss = -(sum_u y_u log beta_u + sum_v y_v log omega_v)`` (the paper prints it without
  the minus sign); with several positives ``y`` spreads the target mass evenly over them.
  ``matrank-row`` keeps only the beta term.
* Inference (§3.1, last paragraph): rank by beta and by omega and fuse the two lists by Borda
  voting, each candidate getting ``M - rank`` from each list; ties go to the better beta. The
  written score is the vote plus a fraction below 1 that encodes the beta order (see :func:`borda_vote`).

For training-time group losses (``--loss kl`` etc.) and dev MRR, :meth:`MatRank.score` is the
differentiable ``r - c`` (``log beta + log omega`` up to a per-query constant), or ``r`` for the row ablation.
With ``--encoder bi`` the cosine skip adds ``w (cos_i - cos_j)`` to ``s_ij`` so that r and -c both
start at the zero-shot ranking (the MLP's last layer starts at zero).
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from rankkit.models.cross_encoder import CandidateListModel
from rankkit.training.batching import GroupBatch

#: Elements of one ``[G, block, M, hidden]`` activation tensor while building S (64 MiB in float32;
#: at depth 1000 and hidden 384 that is 43 rows per block, about 200 MB peak: small blocks are
#: slower because the broadcast add and GELU are memory-bound).
BLOCK_ELEMENTS = 1 << 24


class MatrixOutput(NamedTuple):
    """The latent preference matrix and everything derived from it (Eqs. 3-7)."""

    S: torch.Tensor  # [G, M, M], zero diagonal, zero rows/columns for masked slots
    r: torch.Tensor  # [G, M] row means (Eq. 4)
    c: torch.Tensor  # [G, M] column means (Eq. 5)
    log_beta: torch.Tensor  # [G, M] log softmax(r) over real slots (Eq. 6)
    log_omega: torch.Tensor  # [G, M] log softmax(-c) over real slots (Eq. 7)


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


def masked_log_softmax(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``log softmax`` over the real slots of each row (masked slots get a very negative value)."""
    neg = torch.finfo(x.dtype).min
    return F.log_softmax(x.masked_fill(~mask, neg), dim=-1)


def aggregate(S: torch.Tensor, mask: torch.Tensor) -> MatrixOutput:
    """Eqs. 3-7 from a raw ``[G, M, M]`` matrix: zero the diagonal (and masked rows/columns), take
    row and column means over the query's real candidates, then the two softmaxes."""
    m = S.shape[-1]
    pair = mask[:, :, None] & mask[:, None, :] & ~torch.eye(m, dtype=torch.bool, device=S.device)
    S = S * pair.to(S.dtype)
    count = mask.sum(dim=1, keepdim=True).clamp(min=1).to(S.dtype)
    r = S.sum(dim=2) / count
    c = S.sum(dim=1) / count
    return MatrixOutput(S, r, c, masked_log_softmax(r, mask), masked_log_softmax(-c, mask))


def matrank_loss(out: MatrixOutput, labels: torch.Tensor, mask: torch.Tensor, *, row_only: bool = False) -> torch.Tensor:
    """Eq. 8 with its sign corrected, mean over groups: ``-(y . log beta + y . log omega)``.

    ``y`` is 1 on positives (``labels > 0``), normalised to sum 1 (several positives share the
    target mass). ``row_only``: the MatRank_row ablation (beta term only). Groups without a
    positive contribute 0.
    """
    y = ((labels > 0) & mask).to(out.log_beta.dtype)
    total = y.sum(dim=1, keepdim=True)
    y = y / total.clamp(min=1)
    zero = torch.zeros_like(out.log_beta)
    loss = -(y * torch.where(mask, out.log_beta, zero)).sum(dim=1)
    if not row_only:
        loss = loss - (y * torch.where(mask, out.log_omega, zero)).sum(dim=1)
    return loss.mean()


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


class MatRank(CandidateListModel):
    """MatRank: a latent preference matrix over a query's candidates (Eqs. 1-8)."""

    name = "matrank"
    default_loss = "matrank"
    native_losses = ("matrank",)
    row_only: ClassVar[bool] = False

    def build_head(self, dim: int, hidden: int) -> None:
        hidden = hidden if hidden > 0 else dim
        #: The MLP of Eq. 2 over ``[h_i ; h_j]`` (one Linear(2d, H); split at use into W_a, W_b).
        self.mlp_in = nn.Linear(2 * dim, hidden)
        self.activation = nn.GELU()
        self.mlp_out = nn.Linear(hidden, 1)
        if self.hparams["encoder"] == "bi":
            nn.init.zeros_(self.mlp_out.weight)
            nn.init.zeros_(self.mlp_out.bias)

    def raw_matrix(self, h: torch.Tensor, skip: torch.Tensor | None, block: int | None = None) -> torch.Tensor:
        """``MLP([h_i ; h_j])`` for all ``i, j`` of ``h [G, M, d]`` (Eq. 2), built blockwise."""
        d = h.shape[-1]
        weight = self.mlp_in.weight
        a = h @ weight[:, :d].T + self.mlp_in.bias  # W_a h_i + b1, once per candidate
        b = h @ weight[:, d:].T  # W_b h_j, once per candidate
        S = blockwise_preference_matrix(a, b, self.mlp_out.weight[0], self.mlp_out.bias[0],
                                        self.activation, block)
        if skip is not None:
            S = S + self.skip_weight * (skip[:, :, None] - skip[:, None, :])
        return S

    def matrix(self, h: torch.Tensor, skip: torch.Tensor | None, mask: torch.Tensor) -> MatrixOutput:
        """Eqs. 2-7 for ``h [G, M, d]`` with real slots ``mask [G, M]``."""
        return aggregate(self.raw_matrix(h, skip), mask)

    def _batch_matrix(self, batch: GroupBatch) -> MatrixOutput:
        h, skip = self.grouped(batch)
        return self.matrix(h, skip, batch.mask)

    def native_loss(self, batch: GroupBatch) -> torch.Tensor:
        """Eq. 8 (sign corrected) over the batch's groups."""
        return matrank_loss(self._batch_matrix(batch), batch.labels, batch.mask, row_only=self.row_only)

    def score(self, batch: GroupBatch) -> torch.Tensor:
        """Differentiable ``r - c`` (``r`` for the row ablation), for group losses and dev MRR."""
        out = self._batch_matrix(batch)
        return out.r if self.row_only else out.r - out.c

    def list_scores(self, h: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        """The Borda vote of one query's candidates (:func:`borda_vote`)."""
        out = self.explain(h, skip)
        return borda_vote(out.log_beta[0], None if self.row_only else out.log_omega[0])

    def explain(self, h: torch.Tensor, skip: torch.Tensor | None) -> MatrixOutput:
        """The matrix and its aggregates for one query's candidates ``h [M, d]`` (batch of 1)."""
        mask = torch.ones((1, h.shape[0]), dtype=torch.bool, device=h.device)
        return self.matrix(h[None], None if skip is None else skip[None], mask)


class MatRankRow(MatRank):
    """MatRank_row (the paper's ablation): beta only, in the loss and at inference."""

    name = "matrank-row"
    row_only = True
