"""Training on whole teacher lists (``rankkit train --whole-lists``): the Set-Encoder's distillation stage.

Schlatt et al., 2024, "Set-Encoder: Permutation-Invariant Inter-Passage Attention for Listwise
Passage Re-Ranking with Cross-Encoders", §4.2-4.3: after a first stage on 1 positive + sampled
negatives (LCE), the model is fine-tuned on an LLM teacher's ranking of 100 passages per query
with the RankNet loss: every pair of the list whose teacher order is known counts, so the list is
kept whole rather than sampled down to one positive.

``rankkit mine --teacher-list K`` writes such groups: the teacher run's top K per query, every
candidate with its teacher score, judged ones (rel >= ``--min-rel``) as positives with their
graded labels. With ``--whole-lists`` each group's list enters a batch whole and in teacher order
(:func:`~rankkit.training.sampling.whole_list`, up to ``--group-size`` slots), and the groups' own
scores are the teacher scores (``--teacher RUN`` may still replace them). Losses that read slot 0
as the one positive (``listwise-ce``, ``margin-mse``, the bi-encoders' in-batch losses) are
refused: use ``ranknet`` (the paper's), ``kl`` or ``hinge``.
"""

from __future__ import annotations

from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.models.losses import Loss
from rankkit.training.sampling import GroupScores, TeacherSource


def list_teacher(all_scored: bool, teacher: TeacherSource | None, *, announce: bool = True) -> TeacherSource | None:
    """The teacher scores of whole-list training: ``--teacher RUN`` if given, else the groups' own
    (when every candidate of every group carries one: ``all_scored``), read from each drawn group."""
    if teacher is not None:
        return teacher
    if not all_scored:
        return None
    if announce:
        log("whole lists: teacher scores from the groups (every candidate carries a score)")
    return GroupScores()


def check_list_loss(loss: Loss, group_size: int, longest: int, *, announce: bool = True) -> None:
    """Refuse losses that need a sampled positive in slot 0; say when lists (``longest`` candidates at
    most) are cut to ``group_size``."""
    if loss.first_slot_positive:
        raise RankkitError(f"--loss {loss.name} reads slot 0 as the group's one positive, but --whole-lists puts the "
                           "teacher's first candidate there; use --loss ranknet (Set-Encoder §4.3), kl or hinge")
    if longest > group_size and announce:
        log(f"whole lists: lists of up to {longest} candidates are cut to the teacher's top {group_size} "
            "(--group-size)")
