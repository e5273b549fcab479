"""Frozen features computed once per run (``--encoder bi`` without ``--tune-encoder``).

A frozen encoder gives a text the same vector at every step, so re-encoding each sampled
candidate at every step (what a lazily filled cache still does for every candidate an epoch
draws for the first time) wastes most of an epoch. Before the first step the trainer hands every
distinct query and passage of the training groups (and of the dev groups, up to
``--dev-max-candidates`` each) to the model's pair encoder, which encodes each once, longest
first, into a table in memory or, past :data:`~rankkit.models.cross_encoders.frozen_vectors.MEMORY_LIMIT`,
a memory-mapped temporary file (:class:`~rankkit.models.cross_encoders.frozen_vectors.FrozenVectors`).
Every later step and epoch only looks vectors up and trains the head.

The table is rebuilt the same way by a resumed run, so resume stays exact.
"""

from __future__ import annotations

from typing import Sequence

from rankkit.console import log
from rankkit.formats import TrainingGroup
from rankkit.models import RankingModel
from rankkit.models.cross_encoders.frozen_vectors import FrozenVectors
from rankkit.models.cross_encoders.pair_encoders import BiPairEncoder


def frozen_pair_encoder(model: RankingModel) -> BiPairEncoder | None:
    """The model's frozen ``bi`` pair encoder, if it has one."""
    pairs = getattr(model, "pairs", None)
    return pairs if isinstance(pairs, BiPairEncoder) and pairs.frozen else None


def group_texts(groups: Sequence[TrainingGroup], limit: int | None = None) -> tuple[list[str], list[str]]:
    """Every query and every candidate text (positives then negatives, the first ``limit``) of ``groups``."""
    queries = [g.query for g in groups]
    texts = [c.text for g in groups for c in (list(g.pos) + list(g.neg))[:limit]]
    return queries, texts


def precompute_frozen_features(model: RankingModel, groups: Sequence[TrainingGroup],
                               dev_groups: Sequence[TrainingGroup] = (), *, dev_max_candidates: int | None = None,
                               batch_size: int = 64, announce: bool = True) -> FrozenVectors | None:
    """Encode every distinct text of the run once into the model's table; ``None`` for other models."""
    pairs = frozen_pair_encoder(model)
    if pairs is None:
        return None
    queries, texts = group_texts(groups)
    dev_queries, dev_texts = group_texts(dev_groups, dev_max_candidates)
    table = pairs.precompute(queries + dev_queries, texts + dev_texts, batch_size=batch_size)
    if announce:
        where = "a temporary memory-mapped file" if table.on_disk else "memory"
        log(f"frozen encoder: {len(table):,} distinct texts encoded once, vectors kept in {where}")
    return table
