"""Ranking losses on score tensors.

Two shapes occur:

* in-batch losses on a ``[Q, N]`` matrix (every query against every document in the batch), used
  by bi-encoders: :func:`multilabel_margin` (RepBERT Eq. 4), :func:`softmax_cross_entropy`
  (DenseTrans Eqs. 6-7);
* group losses on ``[G, S]`` scores of each group's own candidates (slot 0 = the positive, ``mask``
  marks real slots), usable by any model, selected with ``rankkit train --loss``:
  ``listwise-ce``, ``ranknet``, ``hinge``, ``margin-mse``, ``kl`` (the last two need ``--teacher RUN``).

Every loss is a mean over queries (or pairs), so it does not grow with the batch size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from rankkit.errors import RankkitError


def multilabel_margin(scores: torch.Tensor, positive: torch.Tensor, valid: torch.Tensor | None = None,
                      margin: float = 1.0) -> torch.Tensor:
    """RepBERT Eq. 4: ``1/n * sum_{i pos, j neg} max(0, margin - (s_i - s_j))``, averaged over queries.

    ``scores``/``positive``/``valid`` are ``[Q, N]``; ``n`` is the number of valid candidates of the
    query (all N when ``valid`` is None), exactly as ``torch.nn.MultiLabelMarginLoss`` divides by the
    number of classes. A query without any negative (or positive) contributes 0.
    """
    if valid is None:
        valid = torch.ones_like(positive, dtype=torch.bool)
    pos = positive & valid
    neg = (~positive) & valid
    # [Q, N_pos_index, N_neg_index]: hinge of every (positive i, negative j) pair.
    hinge = torch.relu(margin - (scores.unsqueeze(2) - scores.unsqueeze(1)))
    pairs = pos.unsqueeze(2) & neg.unsqueeze(1)
    per_query = (hinge * pairs.to(hinge.dtype)).sum(dim=(1, 2))
    n = valid.sum(dim=1).clamp(min=1).to(hinge.dtype)
    return (per_query / n).mean()


def softmax_cross_entropy(scores: torch.Tensor, target: torch.Tensor,
                          exclude: torch.Tensor | None = None) -> torch.Tensor:
    """DenseTrans Eqs. 6-7: ``-log softmax(scores)[target]`` averaged over queries.

    ``scores`` ``[Q, N]``, ``target`` ``[Q]`` (column of each query's positive); ``exclude`` ``[Q, N]``
    drops columns from the softmax denominator (other positives of the same query, padding). The
    target column is never excluded.
    """
    if exclude is not None:
        keep_target = F.one_hot(target, scores.shape[1]).bool()
        scores = scores.masked_fill(exclude & ~keep_target, float("-inf"))
    return F.cross_entropy(scores, target)


def listwise_softmax_ce(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax cross-entropy of each group's positive (slot 0) against its other candidates."""
    target = torch.zeros(scores.shape[0], dtype=torch.long, device=scores.device)
    return softmax_cross_entropy(scores, target, exclude=~mask)


def ranknet(scores: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """RankNet (Burges et al. 2005): ``log(1 + exp(-(s_i - s_j)))`` over pairs with ``target_i > target_j``.

    Averaged over all such pairs of the batch; ``targets`` are teacher scores or graded labels.
    """
    better = (targets.unsqueeze(2) > targets.unsqueeze(1)) & mask.unsqueeze(2) & mask.unsqueeze(1)
    diff = scores.unsqueeze(2) - scores.unsqueeze(1)
    count = better.sum()
    if count == 0:
        return scores.sum() * 0.0
    return F.softplus(-diff)[better].sum() / count


def pairwise_hinge(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """PARADE's pairwise hinge loss (§4.2): ``max(0, margin - (s_i - s_j))`` over the pairs with
    ``label_i > label_j`` (every positive against every negative), averaged over all such pairs."""
    better = (labels.unsqueeze(2) > labels.unsqueeze(1)) & mask.unsqueeze(2) & mask.unsqueeze(1)
    count = better.sum()
    if count == 0:
        return scores.sum() * 0.0
    return torch.relu(margin - (scores.unsqueeze(2) - scores.unsqueeze(1)))[better].sum() / count


def margin_mse(scores: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Margin-MSE (Hofstätter et al. 2020): ``((s_pos - s_neg) - (t_pos - t_neg))^2``, slot 0 the positive.

    Averaged over every (positive, real negative) pair of the batch.
    """
    student = scores[:, :1] - scores[:, 1:]
    target = teacher[:, :1] - teacher[:, 1:]
    valid = mask[:, 1:] & mask[:, :1]
    count = valid.sum()
    if count == 0:
        return scores.sum() * 0.0
    return ((student - target) ** 2)[valid].sum() / count


def kl_divergence(scores: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor,
                  temperature: float = 1.0) -> torch.Tensor:
    """``KL(softmax(teacher/T) || softmax(scores/T))`` over each group's real candidates, mean over groups."""
    neg_inf = torch.finfo(scores.dtype).min
    log_p_student = F.log_softmax((scores / temperature).masked_fill(~mask, neg_inf), dim=1)
    log_p_teacher = F.log_softmax((teacher / temperature).masked_fill(~mask, neg_inf), dim=1)
    p_teacher = log_p_teacher.exp()
    terms = p_teacher * (log_p_teacher - log_p_student)
    return terms.masked_fill(~mask, 0.0).sum(dim=1).mean()


@dataclass(frozen=True)
class GroupLoss:
    """A loss on ``[G, S]`` group scores; ``needs_teacher`` ones require ``--teacher RUN``."""

    name: str
    needs_teacher: bool
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]
    help: str


def _ranknet(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor,
             teacher: torch.Tensor | None) -> torch.Tensor:
    return ranknet(scores, teacher if teacher is not None else labels, mask)


def _needs(teacher: torch.Tensor | None, name: str) -> torch.Tensor:
    if teacher is None:
        raise RankkitError(f"--loss {name} needs --teacher RUN")
    return teacher


GROUP_LOSSES: dict[str, GroupLoss] = {
    loss.name: loss
    for loss in (
        GroupLoss("listwise-ce", False, lambda s, y, m, t: listwise_softmax_ce(s, m),
                  "softmax cross-entropy of the positive among its group's candidates"),
        GroupLoss("ranknet", False, _ranknet,
                  "pairwise logistic loss on teacher scores (or graded labels without a teacher)"),
        GroupLoss("hinge", False, lambda s, y, m, t: pairwise_hinge(s, y, m),
                  "pairwise hinge max(0, 1 - (s_pos - s_neg)) over positive-negative pairs (PARADE)"),
        GroupLoss("margin-mse", True, lambda s, y, m, t: margin_mse(s, _needs(t, "margin-mse"), m),
                  "MSE between student and teacher positive-negative margins"),
        GroupLoss("kl", True, lambda s, y, m, t: kl_divergence(s, _needs(t, "kl"), m),
                  "KL divergence from the teacher's softmax over each group"),
    )
}


def group_loss(name: str, scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor,
               teacher: torch.Tensor | None) -> torch.Tensor:
    """Apply the group loss called ``name``."""
    try:
        loss = GROUP_LOSSES[name]
    except KeyError:
        raise RankkitError(f"unknown loss {name!r}; known: {', '.join(sorted(GROUP_LOSSES))}") from None
    return loss.fn(scores, labels, mask, teacher)
