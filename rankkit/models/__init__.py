"""Trainable ranking models, looked up by name (``rankkit train --model NAME``).

Adding a model = writing a :class:`~rankkit.models.base.RankingModel` subclass and registering it
in :data:`MODELS`; the training engine, checkpoints and (for bi-encoders) dense indexes need no change.
"""

from __future__ import annotations

from rankkit.errors import RankkitError
from rankkit.models.base import BiEncoder, RankingModel
from rankkit.models.densetrans import DenseTrans
from rankkit.models.matrank import MatRank, MatRankRow
from rankkit.models.mono import Mono
from rankkit.models.repbert import RepBERT

MODELS: dict[str, type[RankingModel]] = {
    RepBERT.name: RepBERT,
    DenseTrans.name: DenseTrans,
    Mono.name: Mono,
    MatRank.name: MatRank,
    MatRankRow.name: MatRankRow,
}


def get_model_class(name: str) -> type[RankingModel]:
    """The model class registered as ``name``; an unknown name lists the known ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise RankkitError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}") from None


__all__ = ["MODELS", "BiEncoder", "DenseTrans", "MatRank", "MatRankRow", "Mono", "RankingModel", "RepBERT",
           "get_model_class"]
