"""The model library: networks, their inputs, typed settings, checkpoint folders and losses.

Nothing here imports training code (:mod:`rankkit.training`) or inference drivers. Families:
:mod:`~rankkit.models.bi_encoders` (RepBERT, DenseTrans), :mod:`~rankkit.models.cross_encoders`
(mono, MatRank, MatRank_row/_col, List-wise, +Attention, Set-Encoder) and :mod:`~rankkit.models.documents` (MaxP, FirstP,
SumP, AvgP, k-max, PARADE, MatRank-Split). A model is its declaration (typed settings and a
:class:`~rankkit.models.declaration.ModelSpec`, in its family's torch-free ``configs.py``), its network
class, and one :func:`register` line below.

Importing this package loads the declarations only: no torch, no transformers (the ``rankkit``
command lists models, generates their options and answers ``--help`` from them). The network classes
(``rankkit.models.Mono``, ``RankingModel``, :data:`MODELS` values, ...) are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rankkit.models.bi_encoders.configs import DENSETRANS, REPBERT
from rankkit.models.config import ModelConfig, option
from rankkit.models.cross_encoders.configs import (
    CANDIDATE_ATTENTION, JOINT_LIST, LISTWISE, MATRANK, MATRANK_COL, MATRANK_ROW, MONO, SET_ENCODER,
)
from rankkit.models.declaration import ModelSpec, TrainingDefaults
from rankkit.models.documents.configs import (
    AVGP, FIRSTP, KMAXP, MATRANK_SPLIT, MAXP, PARADE_ATTN, PARADE_AVG, PARADE_CNN, PARADE_MAX, PARADE_SUM,
    PARADE_TRANSFORMER, SUMP,
)
from rankkit.models.registry import (
    MODELS, PROVIDERS, create_model, get_model_class, get_spec, load_plugins, register, specs,
)

register(REPBERT)
register(DENSETRANS)
register(MONO)
register(MATRANK)
register(MATRANK_ROW)
register(MATRANK_COL)
register(LISTWISE)
register(CANDIDATE_ATTENTION)
register(JOINT_LIST)
register(SET_ENCODER)
register(MAXP)
register(FIRSTP)
register(SUMP)
register(AVGP)
register(KMAXP)
register(PARADE_MAX)
register(PARADE_AVG)
register(PARADE_SUM)
register(PARADE_ATTN)
register(PARADE_CNN)
register(PARADE_TRANSFORMER)
register(MATRANK_SPLIT)
# Installed plug-ins (entry points of the group rankkit.models) are read when a model is first looked up.

#: Network classes reachable as ``rankkit.models.<Name>``, imported on first access.
_CLASSES = {
    "RankingModel": "rankkit.models.base", "BiEncoder": "rankkit.models.base",
    "RepBERT": "rankkit.models.bi_encoders.repbert", "DenseTrans": "rankkit.models.bi_encoders.densetrans",
    "Mono": "rankkit.models.cross_encoders.mono", "MatRank": "rankkit.models.cross_encoders.matrank",
    "MatRankRow": "rankkit.models.cross_encoders.matrank", "MatRankCol": "rankkit.models.cross_encoders.matrank",
    "SetEncoder": "rankkit.models.cross_encoders.set_encoder",
    "MatRankSplit": "rankkit.models.documents.matrank_split",
}

if TYPE_CHECKING:
    from rankkit.models.base import BiEncoder, RankingModel
    from rankkit.models.bi_encoders.densetrans import DenseTrans
    from rankkit.models.bi_encoders.repbert import RepBERT
    from rankkit.models.cross_encoders.matrank import MatRank, MatRankCol, MatRankRow
    from rankkit.models.cross_encoders.mono import Mono
    from rankkit.models.cross_encoders.set_encoder import SetEncoder
    from rankkit.models.documents.matrank_split import MatRankSplit


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        value = getattr(importlib.import_module(_CLASSES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rankkit.models' has no attribute {name!r}")


__all__ = ["MODELS", "PROVIDERS", "BiEncoder", "DenseTrans", "MatRank", "MatRankCol", "MatRankRow", "MatRankSplit",
           "ModelConfig", "ModelSpec", "Mono", "RankingModel", "RepBERT", "SetEncoder", "TrainingDefaults",
           "create_model", "get_model_class", "get_spec", "load_plugins", "option", "register", "specs"]
