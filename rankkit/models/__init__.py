"""The model library: networks, their inputs, typed settings, checkpoint folders and losses.

Nothing here imports training code (:mod:`rankkit.training`) or inference drivers. Families:
:mod:`~rankkit.models.bi_encoders` (RepBERT, DenseTrans), :mod:`~rankkit.models.cross_encoders`
(mono, MatRank, MatRank_row/_col, List-wise, +Attention, Set-Encoder) and :mod:`~rankkit.models.documents` (MaxP, FirstP,
SumP, AvgP, k-max, PARADE, MatRank-Split). Adding a model is one file plus one :func:`register` line.
"""

from __future__ import annotations

from rankkit.models.base import BiEncoder, RankingModel, TrainingDefaults
from rankkit.models.bi_encoders.densetrans import DenseTrans
from rankkit.models.bi_encoders.repbert import RepBERT
from rankkit.models.config import ModelConfig, option
from rankkit.models.cross_encoders.candidate_attention import CandidateAttention
from rankkit.models.cross_encoders.joint_list import JointList
from rankkit.models.cross_encoders.listwise import Listwise
from rankkit.models.cross_encoders.matrank import MatRank, MatRankCol, MatRankRow
from rankkit.models.cross_encoders.mono import Mono
from rankkit.models.cross_encoders.set_encoder import SetEncoder
from rankkit.models.documents.matrank_split import MatRankSplit
from rankkit.models.documents.parade import ParadeAttn, ParadeAvg, ParadeCNN, ParadeMax, ParadeSum, ParadeTransformer
from rankkit.models.documents.passage_score import AvgP, FirstP, KMaxP, MaxP, SumP
from rankkit.models.registry import MODELS, PROVIDERS, create_model, get_model_class, load_plugins, register

register(RepBERT)
register(DenseTrans)
register(Mono)
register(MatRank)
register(MatRankRow)
register(MatRankCol)
register(Listwise)
register(CandidateAttention)
register(JointList)
register(SetEncoder)
register(MaxP)
register(FirstP)
register(SumP)
register(AvgP)
register(KMaxP)
register(ParadeMax)
register(ParadeAvg)
register(ParadeSum)
register(ParadeAttn)
register(ParadeCNN)
register(ParadeTransformer)
register(MatRankSplit)
load_plugins()  # installed distributions' rankkit.models entry points

__all__ = ["MODELS", "PROVIDERS", "BiEncoder", "DenseTrans", "MatRank", "MatRankCol", "MatRankRow", "MatRankSplit",
           "ModelConfig", "Mono", "RankingModel", "RepBERT", "SetEncoder", "TrainingDefaults", "create_model",
           "get_model_class", "load_plugins", "option", "register"]
