"""From training groups to batches: data files, data order, group sampling, collation, micro-batches.

Everything random here is a pure function of ``(seed, epoch, group index)``, never of a global RNG,
so a resumed run can skip the batches it already consumed and see exactly the same data as an
uninterrupted one, and every DDP rank draws the same candidates for the same group.

Group sampling (``group_size`` = S): slot 0 holds one positive drawn uniformly from the group's
positives; slots 1..S-1 hold negatives drawn without replacement from the group's negatives. A
group with fewer than S-1 negatives uses all of them and leaves the remaining slots *masked*
(``mask`` False, empty text, never encoded or scored): nothing is duplicated, so no negative
counts twice in a loss. Bi-encoders still see every other in-batch document as a negative.

The groups are any ``Sequence[TrainingGroup]``: :class:`rankkit.training.data.TrainingData` reads
each from disk when a step draws it, and ids-only groups get their texts looked up after sampling
(:meth:`MicroBatches.sampled_at`), for the drawn candidates only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np
import torch

from rankkit.errors import RankkitError
from rankkit.formats import TrainingGroup
from rankkit.models.inputs import GroupBatch
from rankkit.training.teacher_run import TeacherRun

if TYPE_CHECKING:
    from rankkit.training.data import TextSource, TrainingData


def epoch_order(num_groups: int, seed: int, epoch: int) -> np.ndarray:
    """The shuffled order of groups in ``epoch``: a deterministic function of ``(seed, epoch)``.

    NumPy's ``permutation(num_groups)`` drawn as a shuffle of 32-bit indices (the same draws, hence
    the same order, in half the memory: 4 bytes a group, 160 MB for 39.8M triples).
    """
    order = np.arange(num_groups, dtype=np.int32 if num_groups < 2**31 else np.int64)
    np.random.default_rng([seed, epoch]).shuffle(order)
    return order


def group_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator that samples group ``index``'s candidates in ``epoch``."""
    return np.random.default_rng([seed, epoch, index, 1])


@dataclass(frozen=True)
class SampledGroup:
    """One group's drawn candidates (slot 0 the positive); fewer than S when negatives run short.

    ``query`` and ``texts`` hold ``None`` for an ids-only group until they are looked up;
    ``scores`` are the candidates' own scores when every one has one (teacher lists).
    """

    qid: str
    query: str | None
    docids: tuple[str, ...]
    texts: tuple[str | None, ...]
    labels: tuple[int, ...]
    positives: frozenset[str]
    scores: tuple[float, ...] | None = None


def sample_group(group: TrainingGroup, group_size: int, rng: np.random.Generator) -> SampledGroup:
    """Draw 1 positive and up to ``group_size - 1`` negatives (without replacement) from ``group``."""
    if group_size < 1:
        raise RankkitError(f"group size must be at least 1, got {group_size}")
    pos = group.pos[int(rng.integers(len(group.pos)))]
    wanted = min(group_size - 1, len(group.neg))
    picked: Any = rng.choice(len(group.neg), size=wanted, replace=False) if wanted else []
    negs = [group.neg[int(i)] for i in picked]
    return SampledGroup(
        group.qid,
        group.query,
        (pos.docid, *(n.docid for n in negs)),
        (pos.text, *(n.text for n in negs)),
        (max(pos.label, 1), *(0 for _ in negs)),
        frozenset(p.docid for p in group.pos),
    )


def whole_list(group: TrainingGroup, group_size: int) -> SampledGroup:
    """A group's whole candidate list, no sampling: ``rankkit train --whole-lists``.

    For the Set-Encoder's distillation stage (Schlatt et al., 2024, Set-Encoder: Permutation-Invariant
    Inter-Passage Attention for Listwise Passage Re-Ranking with Cross-Encoders, §4.2-4.3: RankNet
    on the teacher's ranking of 100 passages per query): the candidates, positives and negatives
    together, in the teacher's order (score descending, ties by docid descending as trec_eval
    orders a run) when every candidate carries a score, else positives then negatives as stored;
    the first ``group_size``. Positives keep their graded labels (at least 1), negatives are 0.
    """
    cands = [(c, max(c.label, 1)) for c in group.pos] + [(c, 0) for c in group.neg]
    if all(c.score is not None for c, _ in cands):
        cands.sort(key=lambda item: item[0].docid, reverse=True)
        cands.sort(key=lambda item: -float(item[0].score or 0.0))
    cands = cands[:group_size]
    given = tuple(float(c.score) for c, _ in cands if c.score is not None)
    scores = given if len(given) == len(cands) else None
    return SampledGroup(group.qid, group.query, tuple(c.docid for c, _ in cands), tuple(c.text for c, _ in cands),
                        tuple(label for _, label in cands), frozenset(p.docid for p in group.pos), scores)


def all_candidates(group: TrainingGroup, limit: int | None = None) -> SampledGroup:
    """Every positive then every negative of ``group`` (first ``limit``), for dev evaluation."""
    cands = list(group.pos) + list(group.neg)
    if limit is not None:
        cands = cands[:limit]
    return SampledGroup(
        group.qid,
        group.query,
        tuple(c.docid for c in cands),
        tuple(c.text for c in cands),
        tuple(max(c.label, 1) if i < len(group.pos) else 0 for i, c in enumerate(cands)),
        frozenset(p.docid for p in group.pos),
    )


class TeacherScores:
    """Teacher scores per (qid, docid) from a run; members absent from the run rank below all present ones.

    An absent candidate gets ``min(query's teacher scores) - 1``, so it ranks below every scored
    document of that query without inventing a scale far outside the teacher's. The run is held as arrays
    (:class:`rankkit.training.teacher_run.TeacherRun`, 16 bytes a pair), read from its file by
    :meth:`TeacherRun.read`, or taken from ``{qid: {docid: score}}``.
    """

    def __init__(self, run: Mapping[str, Mapping[str, float]] | TeacherRun, source: str = "teacher run") -> None:
        self.table = run if isinstance(run, TeacherRun) else TeacherRun.from_mapping(run)
        self.source = source

    def check(self, data: "TrainingData") -> None:
        """Every training query must appear in the teacher run (else distillation is meaningless)."""
        missing, first = data.missing_qids(self.table.qids())
        if missing:
            raise RankkitError(
                f"{self.source} has no scores for {missing} of {len(data)} training queries "
                f"(first: {first!r}); the groups' qids must match the run's"
            )

    def scores(self, qid: str, docids: Iterable[str]) -> list[float]:
        return self.table.scores(qid, docids)

    def scores_of(self, sampled: SampledGroup) -> list[float]:
        """The teacher's scores of a sampled group's candidates."""
        return self.scores(sampled.qid, sampled.docids)


class GroupScores:
    """The teacher scores every candidate of the groups carries (teacher lists of ``rankkit mine
    --teacher-list``, ``--whole-lists``): read from each drawn group, never gathered into a table."""

    source = "the groups' scores"

    def scores_of(self, sampled: SampledGroup) -> list[float]:
        if sampled.scores is None:
            raise RankkitError(f"group {sampled.qid!r} has a candidate without a score; teacher lists carry one each")
        return list(sampled.scores)


TeacherSource = TeacherScores | GroupScores


def _texts(sampled: SampledGroup) -> tuple[str, list[str]]:
    """The query and candidate texts of a sampled group, which must have been looked up."""
    if sampled.query is None or any(t is None for t in sampled.texts):
        raise RankkitError(f"group {sampled.qid!r} holds ids only and its texts were not looked up "
                           "(give --collection and --queries)")
    return sampled.query, [t for t in sampled.texts if t is not None]


def collate(sampled: Sequence[SampledGroup], group_size: int | None = None,
            teacher: TeacherSource | None = None) -> GroupBatch:
    """Stack sampled groups into a :class:`GroupBatch` of S slots (S = ``group_size`` or the longest)."""
    if not sampled:
        raise ValueError("cannot collate an empty batch")
    width = group_size if group_size is not None else max(len(s.docids) for s in sampled)
    g = len(sampled)
    labels = torch.zeros((g, width), dtype=torch.float32)
    mask = torch.zeros((g, width), dtype=torch.bool)
    teach = torch.zeros((g, width), dtype=torch.float32) if teacher is not None else None
    docids: list[list[str]] = []
    texts: list[list[str]] = []
    queries: list[str] = []
    for i, s in enumerate(sampled):
        n = len(s.docids)
        query, own = _texts(s)
        queries.append(query)
        docids.append(list(s.docids) + [""] * (width - n))
        texts.append(own + [""] * (width - n))
        labels[i, :n] = torch.tensor(s.labels, dtype=torch.float32)
        mask[i, :n] = True
        if teach is not None and teacher is not None:
            teach[i, :n] = torch.tensor(teacher.scores_of(s), dtype=torch.float32)
    return GroupBatch(
        qids=[s.qid for s in sampled],
        queries=queries,
        docids=docids,
        texts=texts,
        labels=labels,
        mask=mask,
        positives=[s.positives for s in sampled],
        teacher=teach,
    )


def micro_batch_indices(order: np.ndarray, step_in_epoch: int, micro: int, dist_rank: int, world: int,
                        batch_size: int, grad_accum: int) -> np.ndarray:
    """Group indices of micro-batch ``micro`` of this rank at a step.

    Global step ``t`` takes the ``t``-th slice of the epoch's permutation (``batch_size *
    grad_accum * world`` groups) and splits it into micro-batches, micro-batch ``k = m * world +
    rank`` going to ``rank`` at accumulation step ``m``: W processes with grad-accum A see exactly
    the micro-batches of one process with grad-accum A*W.
    """
    global_batch = batch_size * grad_accum * world
    k = micro * world + dist_rank
    start = step_in_epoch * global_batch + k * batch_size
    return order[start:start + batch_size]


class MicroBatches:
    """The sampled, collated micro-batches of any global step: a pure function of ``(seed, step)``."""

    def __init__(self, groups: Sequence[TrainingGroup], *, seed: int, batch_size: int, group_size: int,
                 grad_accum: int, rank: int, world: int, teacher: TeacherSource | None,
                 whole_lists: bool = False, texts: "TextSource | None" = None) -> None:
        self.groups = groups
        self.seed = seed
        self.batch_size = batch_size
        self.group_size = group_size
        self.grad_accum = grad_accum
        self.rank = rank
        self.world = world
        self.teacher = teacher
        #: Each group's whole list (:func:`whole_list`) instead of 1 positive + sampled negatives.
        self.whole_lists = whole_lists
        #: Where the texts of ids-only groups come from (looked up after sampling, for the drawn candidates).
        self.texts = texts
        self.steps_per_epoch = len(groups) // (batch_size * grad_accum * world)
        self._order: tuple[int, np.ndarray] | None = None

    def order(self, epoch: int) -> np.ndarray:
        if self._order is None or self._order[0] != epoch:
            self._order = (epoch, epoch_order(len(self.groups), self.seed, epoch))
        return self._order[1]

    def sampled_at(self, step: int) -> list[list[SampledGroup]]:
        """This rank's ``grad_accum`` micro-batches of global step ``step`` (0-based), sampled, texts looked up."""
        epoch, i = divmod(step, self.steps_per_epoch)
        out = []
        for m in range(self.grad_accum):
            idx = micro_batch_indices(self.order(epoch), i, m, self.rank, self.world, self.batch_size,
                                      self.grad_accum)
            sampled = [whole_list(self.groups[int(j)], self.group_size) if self.whole_lists
                       else sample_group(self.groups[int(j)], self.group_size, group_rng(self.seed, epoch, int(j)))
                       for j in idx]
            out.append(sampled if self.texts is None else self.texts.fill(sampled))
        return out

    def at_step(self, step: int) -> list[GroupBatch]:
        """This rank's ``grad_accum`` micro-batches of global step ``step`` (0-based), collated, unprepared."""
        return [collate(sampled, self.group_size, self.teacher) for sampled in self.sampled_at(step)]
