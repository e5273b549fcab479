"""Trainable ranking models, looked up by name (``rankkit train --model NAME``).

Adding a model = writing a :class:`~rankkit.models.base.RankingModel` subclass and registering it
in :data:`MODELS`; the training engine, checkpoints and (for bi-encoders) dense indexes need no change.
"""

from __future__ import annotations

from rankkit.errors import RankkitError
from rankkit.models.base import BiEncoder, RankingModel
from rankkit.models.densetrans import DenseTrans
from rankkit.models.matrank import MatRank, MatRankRow
from rankkit.models.matrank_split import MatRankSplit
from rankkit.models.mono import Mono
from rankkit.models.parade import ParadeAttn, ParadeAvg, ParadeCNN, ParadeMax, ParadeSum, ParadeTransformer
from rankkit.models.passage_score import FirstP, MaxP, SumP
from rankkit.models.repbert import RepBERT
from rankkit.models.set_encoder import SetEncoder

MODELS: dict[str, type[RankingModel]] = {
    RepBERT.name: RepBERT,
    DenseTrans.name: DenseTrans,
    Mono.name: Mono,
    MatRank.name: MatRank,
    MatRankRow.name: MatRankRow,
    SetEncoder.name: SetEncoder,
    # Long documents split into passages (docs/DOCUMENTS.md).
    **{cls.name: cls for cls in (MaxP, FirstP, SumP, ParadeMax, ParadeAvg, ParadeSum, ParadeAttn, ParadeCNN,
                                 ParadeTransformer, MatRankSplit)},
}


def get_model_class(name: str) -> type[RankingModel]:
    """The model class registered as ``name``; an unknown name lists the known ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise RankkitError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}") from None


__all__ = ["MODELS", "BiEncoder", "DenseTrans", "MatRank", "MatRankRow", "Mono", "RankingModel", "RepBERT",
           "SetEncoder", "get_model_class"]
