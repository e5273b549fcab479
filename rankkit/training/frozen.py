"""Frozen features computed once per run (``--encoder bi`` without ``--tune-encoder``).

A frozen encoder gives a text the same vector at every step, so re-encoding each sampled
candidate at every step (what a lazily filled cache still does for every candidate an epoch
draws for the first time) wastes most of an epoch. Each step's micro-batches are a pure function
of ``(seed, step)`` (:class:`~rankkit.training.sampling.MicroBatches`), so before the first step
the trainer lists exactly the queries and passages this process's steps will draw over the whole
run (and the dev groups' candidates, up to ``--dev-max-candidates`` each, on rank 0, which
evaluates), nothing more, and hands them to the model's pair encoder, which encodes each distinct
one once, longest first, into a table in memory or, past
:data:`~rankkit.models.cross_encoders.frozen_vectors.MEMORY_LIMIT`, a memory-mapped temporary file
(:class:`~rankkit.models.cross_encoders.frozen_vectors.FrozenVectors`). Every step and epoch then
only looks vectors up and trains the head.

A resumed run lists the texts of the whole run too (from step 0), so it rebuilds the same table and
resume stays exact.
"""

from __future__ import annotations

from typing import Sequence

from rankkit.console import log
from rankkit.formats import TrainingGroup
from rankkit.models import RankingModel
from rankkit.models.cross_encoders.frozen_vectors import FrozenVectors
from rankkit.models.cross_encoders.pair_encoders import BiPairEncoder
from rankkit.training.sampling import MicroBatches


def frozen_pair_encoder(model: RankingModel) -> BiPairEncoder | None:
    """The model's frozen ``bi`` pair encoder, if it has one."""
    pairs = getattr(model, "pairs", None)
    return pairs if isinstance(pairs, BiPairEncoder) and pairs.frozen else None


def group_texts(groups: Sequence[TrainingGroup], limit: int | None = None) -> tuple[list[str], list[str]]:
    """Every query and every candidate text (positives then negatives, the first ``limit``) of ``groups``
    (groups with their texts: dev groups are looked up when read)."""
    queries = [g.query for g in groups if g.query is not None]
    texts = [c.text for g in groups for c in (list(g.pos) + list(g.neg))[:limit] if c.text is not None]
    return queries, texts


def drawn_texts(batches: MicroBatches, total_steps: int) -> tuple[list[str], list[str]]:
    """The queries and candidate texts that this process's micro-batches of steps ``0 .. total_steps - 1``
    draw (the micro-batches' sampling, :meth:`~rankkit.training.sampling.MicroBatches.sampled_at`: no
    collation, no tokenisation)."""
    queries: set[str] = set()
    texts: set[str] = set()
    for step in range(total_steps):
        for sampled in batches.sampled_at(step):
            for drawn in sampled:
                queries.add(drawn.query or "")
                texts.update(t or "" for t in drawn.texts)
    return sorted(queries), sorted(texts)


def precompute_frozen_features(model: RankingModel, batches: MicroBatches, total_steps: int,
                               dev_groups: Sequence[TrainingGroup] = (), *, dev_max_candidates: int | None = None,
                               batch_size: int = 64, announce: bool = True) -> FrozenVectors | None:
    """Encode every distinct text the run will use once into the model's table; ``None`` for other models.

    ``dev_groups`` are the groups this process evaluates (rank 0's dev groups; none elsewhere).
    """
    pairs = frozen_pair_encoder(model)
    if pairs is None:
        return None
    queries, texts = drawn_texts(batches, total_steps)
    dev_queries, dev_texts = group_texts(dev_groups, dev_max_candidates)
    table = pairs.precompute(queries + dev_queries, texts + dev_texts, batch_size=batch_size)
    if announce:
        where = "a temporary memory-mapped file" if table.on_disk else "memory"
        log(f"frozen encoder: the {len(table):,} distinct texts of the run encoded once, vectors kept in {where}")
    return table
