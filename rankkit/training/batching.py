"""From training groups to batches: data order, group sampling, collation, tokenisation, length sorting.

Everything random here is a pure function of ``(seed, epoch, group index)``, never of a global RNG,
so a resumed run can skip the batches it already consumed and see exactly the same data as an
uninterrupted one, and every DDP rank draws the same candidates for the same group.

Group sampling (``group_size`` = S): slot 0 holds one positive drawn uniformly from the group's
positives; slots 1..S-1 hold negatives drawn without replacement from the group's negatives. A
group with fewer than S-1 negatives uses all of them and leaves the remaining slots *masked*
(``mask`` False, empty text, never encoded or scored): nothing is duplicated, so no negative
counts twice in a loss. Bi-encoders still see every other in-batch document as a negative.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch

from rankkit.errors import RankkitError
from rankkit.formats import TrainingGroup


@dataclass
class GroupBatch:
    """A collated batch of G groups with S candidate slots each (slot 0 is the sampled positive).

    ``labels`` are graded relevance (the positive's label, at least 1; 0 for negatives), ``mask`` marks real
    candidates, ``positives`` holds every positive docid of each group (in-batch matching is by
    docid), ``teacher`` optional teacher scores. ``features`` are the model's tensors, filled by
    :meth:`rankkit.models.base.RankingModel.prepare`.
    """

    qids: list[str]
    queries: list[str]
    docids: list[list[str]]
    texts: list[list[str]]
    labels: torch.Tensor
    mask: torch.Tensor
    positives: list[frozenset[str]]
    teacher: torch.Tensor | None = None
    features: dict[str, torch.Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.qids)

    @property
    def group_size(self) -> int:
        return int(self.mask.shape[1])

    def to(self, device: torch.device | str) -> "GroupBatch":
        """A copy with every tensor on ``device``."""
        return replace(
            self,
            labels=self.labels.to(device),
            mask=self.mask.to(device),
            teacher=None if self.teacher is None else self.teacher.to(device),
            features={k: v.to(device) for k, v in self.features.items()},
        )

    def flat_documents(self) -> tuple[list[str], list[str], list[tuple[int, int]]]:
        """The unmasked candidates in row-major order: ``(docids, texts, (group, slot) positions)``."""
        docids: list[str] = []
        texts: list[str] = []
        where: list[tuple[int, int]] = []
        mask = self.mask.tolist()
        for g, row in enumerate(mask):
            for s, real in enumerate(row):
                if real:
                    docids.append(self.docids[g][s])
                    texts.append(self.texts[g][s])
                    where.append((g, s))
        return docids, texts, where


def epoch_order(num_groups: int, seed: int, epoch: int) -> np.ndarray:
    """The shuffled order of groups in ``epoch``: a deterministic function of ``(seed, epoch)``."""
    return np.random.default_rng([seed, epoch]).permutation(num_groups)


def group_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator that samples group ``index``'s candidates in ``epoch``."""
    return np.random.default_rng([seed, epoch, index, 1])


@dataclass(frozen=True)
class SampledGroup:
    """One group's drawn candidates (slot 0 the positive); fewer than S when negatives run short."""

    qid: str
    query: str
    docids: tuple[str, ...]
    texts: tuple[str, ...]
    labels: tuple[int, ...]
    positives: frozenset[str]


def sample_group(group: TrainingGroup, group_size: int, rng: np.random.Generator) -> SampledGroup:
    """Draw 1 positive and up to ``group_size - 1`` negatives (without replacement) from ``group``."""
    if group_size < 1:
        raise RankkitError(f"group size must be at least 1, got {group_size}")
    pos = group.pos[int(rng.integers(len(group.pos)))]
    wanted = min(group_size - 1, len(group.neg))
    picked = rng.choice(len(group.neg), size=wanted, replace=False) if wanted else []
    negs = [group.neg[int(i)] for i in picked]
    return SampledGroup(
        group.qid,
        group.query,
        (pos.docid, *(n.docid for n in negs)),
        (pos.text, *(n.text for n in negs)),
        (max(pos.label, 1), *(0 for _ in negs)),
        frozenset(p.docid for p in group.pos),
    )


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
    document of that query without inventing a scale far outside the teacher's.
    """

    def __init__(self, run: Mapping[str, Mapping[str, float]], source: str = "teacher run") -> None:
        self.run = run
        self.source = source
        self.floor = {qid: (min(docs.values()) - 1.0 if docs else 0.0) for qid, docs in run.items()}

    def check(self, groups: Sequence[TrainingGroup]) -> None:
        """Every training query must appear in the teacher run (else distillation is meaningless)."""
        missing = [g.qid for g in groups if g.qid not in self.run]
        if missing:
            raise RankkitError(
                f"{self.source} has no scores for {len(missing)} of {len(groups)} training queries "
                f"(first: {missing[0]!r}); the groups' qids must match the run's"
            )

    def scores(self, qid: str, docids: Iterable[str]) -> list[float]:
        docs = self.run.get(qid, {})
        floor = self.floor.get(qid, 0.0)
        return [float(docs.get(d, floor)) for d in docids]


def collate(sampled: Sequence[SampledGroup], group_size: int | None = None,
            teacher: TeacherScores | None = None) -> GroupBatch:
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
    for i, s in enumerate(sampled):
        n = len(s.docids)
        docids.append(list(s.docids) + [""] * (width - n))
        texts.append(list(s.texts) + [""] * (width - n))
        labels[i, :n] = torch.tensor(s.labels, dtype=torch.float32)
        mask[i, :n] = True
        if teach is not None and teacher is not None:
            teach[i, :n] = torch.tensor(teacher.scores(s.qid, s.docids), dtype=torch.float32)
    return GroupBatch(
        qids=[s.qid for s in sampled],
        queries=[s.query for s in sampled],
        docids=docids,
        texts=texts,
        labels=labels,
        mask=mask,
        positives=[s.positives for s in sampled],
        teacher=teach,
    )


def length_order(lengths: Sequence[int]) -> list[int]:
    """Indices sorted by length, longest first, ties in input order (so the result is deterministic).

    Batching texts of similar length cuts padding; longest first makes an out-of-memory error
    happen on the first batch instead of hours in.
    """
    return sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))


def tokenize(tokenizer: Any, texts: Sequence[str], max_length: int, *,
             add_special_tokens: bool = True) -> list[list[int]]:
    """Token ids of each text, truncated to ``max_length`` (special tokens included), unpadded."""
    if not texts:
        return []
    encoded = tokenizer(
        list(texts), add_special_tokens=add_special_tokens, truncation=True, max_length=max_length,
        padding=False, return_attention_mask=False, return_token_type_ids=False,
    )
    return [list(ids) for ids in encoded["input_ids"]]


def pad(ids: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists into ``(input_ids, attention_mask)`` tensors of the longest length."""
    width = max((len(x) for x in ids), default=0)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(ids), width), dtype=torch.long)
    for i, row in enumerate(ids):
        input_ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        attention[i, : len(row)] = 1
    return input_ids, attention
