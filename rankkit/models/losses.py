"""Training objectives: a loss class per objective, consuming what a model's ``forward`` returns.

The network and the objective are apart (as sentence-transformers' losses wrap a model, and
lightning-ir's loss classes consume a typed model output): a model returns a
:class:`~rankkit.models.outputs.RankingOutput`, a :class:`Loss` turns it (and the batch's labels,
mask and teacher scores) into a scalar, and the trainer composes the two. Each loss names the output
type it needs (:attr:`Loss.requires`), whether it needs teacher scores (``--teacher RUN``), and
the paper it comes from.

Two shapes occur:

* in-batch losses on a ``[Q, N]`` matrix (every query against every document in the batch), used
  by bi-encoders: :class:`MultiLabelMarginLoss` (RepBERT Eq. 4), :class:`InBatchSoftmaxLoss`
  (DenseTrans Eqs. 6-7); MatRank's Eq. 8 on its preference matrix (:class:`MatRankLoss`);
* group losses on ``[G, S]`` scores of each group's own candidates (slot 0 = the positive, ``mask``
  marks real slots), usable by any model: ``listwise-ce``, ``ranknet``, ``hinge``, ``pointwise-ce``,
  ``margin-mse``, ``kl`` (the last two need ``--teacher RUN``); and PARADE's Eq. 12 distillation
  terms (:func:`parade_eq12`), which the trainer's distillation objective calls.

Every loss is a mean over queries (or pairs), so it does not grow with the batch size.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, ClassVar

from rankkit.errors import RankkitError
from rankkit.models.outputs import InBatchOutput, MatrixOutput, PassageScoreOutput, PreferenceOutput, RankingOutput

# torch is imported where a loss is computed: the command line reads the losses' names and the outputs they
# need (``rankkit train --help``) without it.
if TYPE_CHECKING:
    import torch

    from rankkit.models.inputs import GroupBatch


def multilabel_margin(scores: torch.Tensor, positive: torch.Tensor, valid: torch.Tensor | None = None,
                      margin: float = 1.0) -> torch.Tensor:
    """RepBERT Eq. 4: ``1/n * sum_{i pos, j neg} max(0, margin - (s_i - s_j))``, averaged over queries.

    ``scores``/``positive``/``valid`` are ``[Q, N]``; ``n`` is the number of valid candidates of the
    query (all N when ``valid`` is None), exactly as ``torch.nn.MultiLabelMarginLoss`` divides by the
    number of classes. A query without any negative (or positive) contributes 0.
    """
    import torch
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
    import torch.nn.functional as F
    if exclude is not None:
        keep_target = F.one_hot(target, scores.shape[1]).bool()
        scores = scores.masked_fill(exclude & ~keep_target, float("-inf"))
    return F.cross_entropy(scores, target)


def listwise_softmax_ce(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax cross-entropy of each group's positive (slot 0) against its other candidates."""
    import torch
    target = torch.zeros(scores.shape[0], dtype=torch.long, device=scores.device)
    return softmax_cross_entropy(scores, target, exclude=~mask)


def ranknet(scores: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """RankNet (Burges et al. 2005): ``log(1 + exp(-(s_i - s_j)))`` over pairs with ``target_i > target_j``.

    Averaged over all such pairs of the batch; ``targets`` are teacher scores or graded labels.
    """
    import torch.nn.functional as F
    better = (targets.unsqueeze(2) > targets.unsqueeze(1)) & mask.unsqueeze(2) & mask.unsqueeze(1)
    diff = scores.unsqueeze(2) - scores.unsqueeze(1)
    count = better.sum()
    if count == 0:
        return scores.sum() * 0.0
    return F.softplus(-diff)[better].sum() / count


def pairwise_hinge(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """PARADE's pairwise hinge loss (§4.2): ``max(0, margin - (s_i - s_j))`` over the pairs with
    ``label_i > label_j`` (every positive against every negative), averaged over all such pairs."""
    import torch
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
    import torch
    import torch.nn.functional as F
    neg_inf = torch.finfo(scores.dtype).min
    log_p_student = F.log_softmax((scores / temperature).masked_fill(~mask, neg_inf), dim=1)
    log_p_teacher = F.log_softmax((teacher / temperature).masked_fill(~mask, neg_inf), dim=1)
    p_teacher = log_p_teacher.exp()
    terms = p_teacher * (log_p_teacher - log_p_student)
    return terms.masked_fill(~mask, 0.0).sum(dim=1).mean()


def pointwise_cross_entropy(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """PARADE's point-wise cross-entropy on single documents (§6, Table 9; Eq. 12's ``L_CE``):
    ``-[y log sigmoid(s) + (1 - y) log(1 - sigmoid(s))]`` with ``y = 1`` for a relevant document
    (``labels > 0``), averaged over every real document of the batch.

    One logit ``s`` per document is PARADE's two-class softmax over (non-relevant, relevant) with the
    non-relevant logit fixed at 0 (``softmax(0, s)[1] = sigmoid(s)``).
    """
    import torch.nn.functional as F
    weight = mask.to(scores.dtype)
    target = (labels > 0).to(scores.dtype)
    per_doc = F.binary_cross_entropy_with_logits(scores, target, reduction="none")
    return (per_doc * weight).sum() / weight.sum().clamp(min=1.0)


def squared_logit_distance(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Eq. 12's ``||z^t - z^s||^2`` of PARADE (Li et al., 2023, §6): each document's squared logit
    difference (its one logit), averaged over every real document of the batch, as a batch of
    single-document examples averages its per-example losses."""
    weight = mask.to(student.dtype)
    return (((teacher.to(student.dtype) - student) ** 2) * weight).sum() / weight.sum().clamp(min=1.0)


def parade_eq12(scores: torch.Tensor, teacher: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor,
                alpha: float) -> torch.Tensor:
    """PARADE Eq. 12 as written: ``alpha * L_CE + (1 - alpha) * ||z^t - z^s||^2`` with ``L_CE`` the
    point-wise cross-entropy of single documents (:func:`pointwise_cross_entropy`) and the squared
    norm of each document's logit difference (:func:`squared_logit_distance`), both averaged over the
    batch's real documents (every document of a group is one single-document example)."""
    ce = pointwise_cross_entropy(scores, labels, mask) if alpha > 0 else scores.sum() * 0.0
    return alpha * ce + (1.0 - alpha) * squared_logit_distance(scores, teacher, mask)


def matrank_loss(out: MatrixOutput, labels: torch.Tensor, mask: torch.Tensor, *, row_only: bool = False,
                 col_only: bool = False) -> torch.Tensor:
    """MatRank Eq. 8 with its sign corrected, mean over groups: ``-(y . log beta + y . log omega)``.

    ``y`` is 1 on positives (``labels > 0``), normalised to sum 1 (several positives share the
    target mass). ``row_only``: the MatRank_row ablation (beta term only); ``col_only``: the
    column-only ablation (omega term only). Groups without a positive contribute 0.
    """
    import torch
    if row_only and col_only:
        raise ValueError("matrank_loss: row_only and col_only leave no term")
    y = ((labels > 0) & mask).to(out.log_beta.dtype)
    total = y.sum(dim=1, keepdim=True)
    y = y / total.clamp(min=1)
    zero = torch.zeros_like(out.log_beta)
    loss = zero.sum(dim=1)
    if not col_only:
        loss = loss - (y * torch.where(mask, out.log_beta, zero)).sum(dim=1)
    if not row_only:
        loss = loss - (y * torch.where(mask, out.log_omega, zero)).sum(dim=1)
    return loss.mean()


# -- loss classes ----------------------------------------------------------------------------------

class Loss(abc.ABC):
    """A training objective over a model output and its batch (labels, mask, teacher scores)."""

    name: ClassVar[str]
    help: ClassVar[str]
    #: Author, year and title of the paper the objective comes from.
    citation: ClassVar[str]
    #: The model output this loss reads (models whose output is not one cannot use it).
    requires: ClassVar[type[RankingOutput]] = RankingOutput
    #: True when the loss cannot run without ``--teacher RUN`` scores.
    needs_teacher: ClassVar[bool] = False
    #: True when the loss reads teacher scores if given (else ``--teacher`` is ignored, with a warning).
    uses_teacher: ClassVar[bool] = False
    #: True when the loss takes slot 0 as the group's one positive (sampled groups); whole teacher
    #: lists (``rankkit train --whole-lists``) put the teacher's first candidate there instead.
    first_slot_positive: ClassVar[bool] = False

    @abc.abstractmethod
    def __call__(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        """The scalar loss of one (micro-)batch."""

    @classmethod
    def accepts(cls, output_type: type[RankingOutput]) -> bool:
        """Whether a model returning ``output_type`` can train with this loss."""
        return issubclass(output_type, cls.requires)

    def teacher(self, batch: GroupBatch) -> torch.Tensor:
        if batch.teacher is None:
            raise RankkitError(f"--loss {self.name} needs --teacher RUN")
        return batch.teacher


class ListwiseSoftmaxLoss(Loss):
    name = "listwise-ce"
    help = "softmax cross-entropy of the positive among its group's candidates (LCE)"
    citation = ("Gao, Dai and Callan, 2021, Rethink Training of BERT Rerankers in Multi-Stage Retrieval "
                "Pipeline (localised contrastive estimation)")
    first_slot_positive = True

    def __call__(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        return listwise_softmax_ce(output.scores, batch.mask)


class RankNetLoss(Loss):
    name = "ranknet"
    help = "pairwise logistic loss on teacher scores (or graded labels without a teacher)"
    citation = "Burges et al., 2005, Learning to Rank using Gradient Descent"
    uses_teacher = True

    def __call__(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        targets = batch.teacher if batch.teacher is not None else batch.labels
        return ranknet(output.scores, targets, batch.mask)


class PairwiseHingeLoss(Loss):
    name = "hinge"
    help = "pairwise hinge max(0, 1 - (s_pos - s_neg)) over positive-negative pairs (PARADE)"
    citation = ("Li, Yates, MacAvaney, He and Sun, 2023, PARADE: Passage Representation Aggregation for "
                "Document Reranking (§4.2)")

    def __call__(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        return pairwise_hinge(output.scores, batch.labels, batch.mask)


class MarginMSELoss(Loss):
    name = "margin-mse"
    help = "MSE between student and teacher positive-negative margins"
    citation = ("Hofstätter, Althammer, Schröder, Sertkan and Hanbury, 2020, Improving Efficient Neural "
                "Ranking Models with Cross-Architecture Knowledge Distillation")
    needs_teacher = True
    uses_teacher = True
    first_slot_positive = True

    def __call__(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        return margin_mse(output.scores, self.teacher(batch), batch.mask)


class KLDivergenceLoss(Loss):
    name = "kl"
    help = "KL divergence from the teacher's softmax over each group"
    citation = "Hinton, Vinyals and Dean, 2015, Distilling the Knowledge in a Neural Network"
    needs_teacher = True
    uses_teacher = True

    def __call__(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        return kl_divergence(output.scores, self.teacher(batch), batch.mask)


class PointwiseCrossEntropyLoss(Loss):
    name = "pointwise-ce"
    help = "cross-entropy of each document alone: relevant (label > 0) or not, sigmoid of its score (PARADE Table 9)"
    citation = ("Li, Yates, MacAvaney, He and Sun, 2023, PARADE: Passage Representation Aggregation for "
                "Document Reranking (§6, Table 9 and Eq. 12's L_CE)")

    def __call__(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        return pointwise_cross_entropy(output.scores, batch.labels, batch.mask)


class PassageCrossEntropyLoss(Loss):
    name = "passage-ce"
    help = ("point-wise cross-entropy of every passage alone, labelled with its document's label "
            "(BERT-MaxP's passage-level training; passage-score models maxp/avgp/kmaxp/sump/firstp)")
    citation = ("Dai and Callan, 2019, Deeper Text Understanding for IR with Contextual Neural Language Modeling "
                "(BERT-MaxP); Li et al., 2023, PARADE (ELECTRA-MaxP, Table 7)")
    requires = PassageScoreOutput

    def __call__(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        assert isinstance(output, PassageScoreOutput)
        labels = batch.labels[..., None].expand_as(output.passage_scores)  # inherited from the document
        return pointwise_cross_entropy(output.passage_scores, labels, output.passage_mask)


class MultiLabelMarginLoss(Loss):
    name = "multilabel-margin"
    help = "RepBERT Eq. 4: MultiLabelMarginLoss over the in-batch matrix (in-batch negatives)"
    citation = ("Zhan, Mao, Liu, Zhang and Ma, 2020, RepBERT: Contextualized Text Embeddings for "
                "First-Stage Retrieval (Eq. 4)")
    requires = InBatchOutput
    first_slot_positive = True

    def __call__(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        assert isinstance(output, InBatchOutput)
        return multilabel_margin(output.in_batch, output.positive)


class InBatchSoftmaxLoss(Loss):
    name = "softmax-ce"
    help = "DenseTrans Eqs. 6-7: softmax CE of each positive over mined + in-batch negatives"
    citation = ("Cai, Fan, Guo, Zhang, Lan and Cheng, 2021, A Discriminative Semantic Ranker for Question "
                "Retrieval (DenseTrans, Eqs. 6-7)")
    requires = InBatchOutput
    first_slot_positive = True

    def __call__(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        assert isinstance(output, InBatchOutput)
        return softmax_cross_entropy(output.in_batch, output.target, exclude=output.positive)


class MatRankLoss(Loss):
    name = "matrank"
    help = ("MatRank Eq. 8 (sign corrected): -(y . log beta + y . log omega); beta only for matrank-row, "
            "omega only for matrank-col")
    citation = ("Luo, Yang, Guo, Li, Niu and Xu, 2022, MatRank: Text Re-ranking by Latent Preference Matrix "
                "(Eq. 8; Eq. 12 for MatRank-Split)")
    requires = PreferenceOutput

    def __call__(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        assert isinstance(output, PreferenceOutput)
        return matrank_loss(output.matrix, batch.labels, batch.mask, row_only=not output.use_omega,
                            col_only=not output.use_beta)


LOSSES: dict[str, type[Loss]] = {cls.name: cls for cls in (
    ListwiseSoftmaxLoss, RankNetLoss, PairwiseHingeLoss, PointwiseCrossEntropyLoss, MarginMSELoss, KLDivergenceLoss,
    PassageCrossEntropyLoss, MultiLabelMarginLoss, InBatchSoftmaxLoss, MatRankLoss,
)}


def get_loss(name: str, output_type: type[RankingOutput] = RankingOutput, model: str | None = None) -> Loss:
    """The loss called ``name``, checked to accept ``output_type`` (the model's output)."""
    if name not in LOSSES:
        raise RankkitError(f"unknown loss {name!r}; known: {', '.join(sorted(LOSSES))}")
    cls = LOSSES[name]
    if not cls.accepts(output_type):
        usable = sorted(n for n, c in LOSSES.items() if c.accepts(output_type))
        raise RankkitError(f"model {model or output_type.__name__!r} cannot train with loss {name!r}; "
                           f"known: {', '.join(usable)}")
    return cls()
