"""The trainer's objectives: a network composed with a loss, and distillation from a teacher checkpoint.

Distillation follows Li, Yates, MacAvaney, He and Sun, 2023, "PARADE: Passage Representation
Aggregation for Document Reranking", §6 "Distilling Knowledge", Eq. 12.

``rankkit train ... --teacher-checkpoint CK --alpha A`` trains the student on one of two forms
(``--distillation``):

``eq12`` (the default, Eq. 12 as written)::

    L = A * L_CE + (1 - A) * ||z^t - z^s||^2                                    (Eq. 12)

with ``L_CE`` the point-wise cross-entropy of each document alone (relevant or not, the sigmoid of
its score: PARADE's two-class softmax with the non-relevant logit at 0) and the squared difference
of each document's teacher and student logits, both averaged over the batch's real documents
(each document of a sampled group is one single-document example, as PARADE trains its Table 9
models "with a cross-entropy loss using a single positive or negative document").
:func:`rankkit.models.losses.parade_eq12`. ``--loss`` is not used (refused if given).

``loss-mse`` (rankkit's earlier approximation, kept as a named option)::

    L = A * L_student + (1 - A) * MSE(z^t, z^s)

``L_student`` the student's own ``--loss`` (or the model's default, e.g. a group-wise softmax) and
the MSE averaged over each group's real candidates, then over groups. Checkpoints written before
``--distillation`` existed were trained with this form.

The teacher is any rankkit checkpoint (:func:`rankkit.models.checkpoint.load_model`), frozen, in
eval mode, and run under :func:`torch.no_grad` on the same sampled group as the student: it
tokenises its own copy of the batch (teacher and student may use different tokenizers and input
forms, e.g. a ``mono`` teacher for a ``repbert`` student).

Unlike ``--teacher RUN`` (teacher *scores from a run file*, used by ranknet/margin-mse/kl), the
teacher here is a model scoring exactly the candidates the student sees.
"""

from __future__ import annotations

import os
from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar

import torch

from rankkit.errors import RankkitError
from rankkit.models import RankingModel
from rankkit.models.checkpoint import load_model
from rankkit.models.inputs import GroupBatch
from rankkit.models.losses import Loss, parade_eq12
from rankkit.models.outputs import RankingOutput

Output = TypeVar("Output", bound=RankingOutput)


def _fp32(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.float() if value.is_floating_point() else value
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple such as MatrixOutput
        return type(value)(*(_fp32(v) for v in value))
    return value


def fp32_output(output: Output) -> Output:
    """``output`` with every floating tensor in float32 (the same object's tensors when already fp32).

    Under ``--precision bf16|fp16`` the network's outputs come out of autocast in half precision;
    the losses then run on fp32 copies with autocast off (CPU autocast would keep softmax and
    log-softmax in bf16), so only the network's matmuls run in reduced precision.
    """
    assert is_dataclass(output)
    return replace(output, **{f.name: _fp32(getattr(output, f.name)) for f in fields(output) if f.init})


def fp32_loss(loss: Loss, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
    """``loss(output, batch)`` in float32 with autocast switched off (see :func:`fp32_output`)."""
    with torch.autocast(output.scores.device.type, enabled=False):
        return loss(fp32_output(output), batch)


#: ``--distillation`` forms: Eq. 12 as written, or the student's own loss plus a per-group MSE.
DISTILLATION_FORMS = ("eq12", "loss-mse")


def check_alpha(alpha: float) -> float:
    """``alpha`` of Eq. 12, which must lie in [0, 1]."""
    if not 0.0 <= alpha <= 1.0:
        raise RankkitError(f"--alpha must be between 0 and 1 (weight of the student's own loss), got {alpha}")
    return float(alpha)


def check_distillation(form: str) -> str:
    """``--distillation``'s value, one of :data:`DISTILLATION_FORMS`."""
    if form not in DISTILLATION_FORMS:
        raise RankkitError(f"--distillation must be one of {', '.join(DISTILLATION_FORMS)}, got {form!r}")
    return form


def distillation_mse(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The ``loss-mse`` form's teacher term: mean squared score difference over each group's real
    candidates, then the mean over groups (``[G, S]`` scores, ``mask`` marks real slots)."""
    weight = mask.to(student.dtype)
    squared = (teacher.to(student.dtype) - student) ** 2 * weight
    per_group = squared.sum(dim=1) / weight.sum(dim=1).clamp(min=1.0)
    return per_group.mean()


class TrainingObjective(torch.nn.Module):
    """A network composed with a loss: the module the trainer calls (and wraps in DDP).

    ``forward`` runs the model once on a prepared batch and returns ``loss(output, batch)``.
    """

    def __init__(self, model: RankingModel, loss: Loss) -> None:
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, batch: GroupBatch, teacher_scores: torch.Tensor | None = None) -> torch.Tensor:  # type: ignore[override]
        return fp32_loss(self.loss, self.model(batch), batch)


class Teacher:
    """A frozen rankkit model that scores the student's sampled groups."""

    def __init__(self, model: RankingModel, device: torch.device | str) -> None:
        self.model = model.to(device)
        self.model.eval()
        self.model.requires_grad_(False)
        self.device = torch.device(device)

    @classmethod
    def load(cls, folder: str | os.PathLike[str], device: torch.device | str) -> "Teacher":
        """The teacher saved in ``folder`` by ``rankkit train`` (any registered model)."""
        return cls(load_model(folder), device)

    @torch.no_grad()
    def scores(self, batch: GroupBatch) -> torch.Tensor:
        """Teacher scores ``[G, S]`` (float32, on the teacher's device) of ``batch``'s candidates.

        The teacher prepares its own features on a copy of the batch, so the student's are untouched.
        """
        own = self.model.prepare(replace(batch, features=None)).to(self.device)
        return self.model(own).scores.float()


class DistillationObjective(TrainingObjective):
    """Distillation around a student (module doc): ``eq12`` = ``alpha * L_CE + (1 - alpha) *
    ||z^t - z^s||^2`` (PARADE Eq. 12), ``loss-mse`` = ``alpha * L_student + (1 - alpha) * MSE``.

    One student forward pass serves both terms (its output feeds the loss and the distance).
    ``loss`` is the student's own loss, read by the ``loss-mse`` form only.
    """

    def __init__(self, model: RankingModel, loss: Loss, alpha: float, form: str = "eq12") -> None:
        super().__init__(model, loss)
        self.alpha = check_alpha(alpha)
        self.form = check_distillation(form)

    def forward(self, batch: GroupBatch, teacher_scores: torch.Tensor | None = None) -> torch.Tensor:  # type: ignore[override]
        if teacher_scores is None:
            raise ValueError("DistillationObjective needs the teacher's scores")
        output = fp32_output(self.model(batch))
        with torch.autocast(output.scores.device.type, enabled=False):
            if self.form == "eq12":
                return parade_eq12(output.scores, teacher_scores, batch.labels, batch.mask, self.alpha)
            own = self.loss(output, batch) if self.alpha > 0 else output.scores.sum() * 0.0
            return self.alpha * own + (1.0 - self.alpha) * distillation_mse(output.scores, teacher_scores, batch.mask)
