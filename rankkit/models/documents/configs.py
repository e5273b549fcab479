"""The document re-rankers' declarations: typed settings and specs of the passage-score models (MaxP,
FirstP, SumP, AvgP, k-max), PARADE and MatRank-Split (no torch here; the networks are the other modules
of :mod:`rankkit.models.documents`, and :mod:`rankkit.models.declaration` says why the two are apart).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from rankkit.errors import RankkitError
from rankkit.models.config import ModelConfig, option
from rankkit.models.declaration import ModelSpec, TrainingDefaults
from rankkit.models.outputs import PassageScoreOutput, PreferenceOutput

#: The paper of the PARADE models.
PARADE_PAPER = ('Li, Yates, MacAvaney, He and Sun, 2023, "PARADE: Passage Representation Aggregation for Document '
                'Reranking"')
#: The paper of the passage-score models.
PASSAGE_SCORE_PAPER = ('Dai and Callan, 2019, "Deeper Text Understanding for IR with Contextual Neural Language '
                       'Modeling" (BERT-MaxP/FirstP/SumP, the baselines of PARADE §3.2)')
_HERE = "rankkit.models.documents"


@dataclass
class DocumentConfig(ModelConfig):
    """Settings of every document model."""

    max_query_length: int = option(32, help="query tokens", minimum=1, cli=False)
    max_doc_length: int | None = option(
        None, minimum=0, cli=False, help="tokens of each document read before splitting [default: the whole document]")


@dataclass
class PassageWindowConfig(DocumentConfig):
    """PARADE's passage windows (§3.1, §4.3): 225-token windows every 200 tokens, at most 16 passages."""

    window: int = option(225, minimum=1, paper="PARADE §4.3", help="passage window in tokens")
    stride: int = option(200, minimum=1, paper="PARADE §4.3", help="tokens between window starts")
    max_passages: int = option(
        16, minimum=1, paper="PARADE §4.3", rerank_flag="--max-passages",
        help="passages per document; first and last kept, the rest sampled (training) or evenly spaced")


@dataclass
class FirstPConfig(PassageWindowConfig):
    """FirstP reads one window: stride and passage count do not apply."""

    stride: int = option(200, minimum=1, help="unused (one window)", cli=False)
    max_passages: int = option(16, minimum=1, help="unused (one window)", cli=False, rerank_flag="--max-passages")


@dataclass
class KMaxPConfig(PassageWindowConfig):
    """The passage windows plus k of the k-max pooling."""

    k: int = option(3, minimum=1, paper="PARADE §3.2, Figure 1a (k-max pooling; k=3 as Birch's top-3)",
                    help="passage scores averaged: the k highest of each document")


def _passage_score(name: str, cls: str, summary: str, config: type[ModelConfig] = PassageWindowConfig) -> ModelSpec:
    return ModelSpec(name=name, target=f"{_HERE}.passage_score:{cls}", config_class=config, family="documents",
                     output_type=PassageScoreOutput, paper=PASSAGE_SCORE_PAPER, summary=summary)


MAXP = _passage_score("maxp", "MaxP", "BERT-MaxP: the best passage's score.")
FIRSTP = _passage_score("firstp", "FirstP", "BERT-FirstP: the first passage's score (the only passage split off "
                                           "and encoded).", FirstPConfig)
SUMP = _passage_score("sump", "SumP", "SumP: the sum of the real passages' scores.")
AVGP = _passage_score("avgp", "AvgP", "AvgP (PARADE Figure 1a, average pooling): the mean of the real passages' "
                                      "scores.")
KMAXP = _passage_score("kmaxp", "KMaxP", "k-max average pooling (PARADE Figure 1a): the mean of the k highest "
                                         "passage scores.", KMaxPConfig)


@dataclass
class ParadeCNNConfig(PassageWindowConfig):
    """PARADE-CNN's settings: the windows plus the CNN width."""

    hidden: int = option(0, minimum=0, paper="PARADE Eq. 4", help="CNN filter width; 0 = the encoder width")


@dataclass
class ParadeTransformerConfig(PassageWindowConfig):
    """PARADE-Transformer's settings: the windows plus the size of the passage position table."""

    position_passages: int | None = option(
        None, minimum=0, words={"none": 0}, paper="PARADE Table 10 (train on 8, evaluate on 16/32/64 passages)",
        help="passage positions learned (the most passages rerank --max-passages can score) [default: "
             "--max-passages]; positions past those seen in training keep their random initialisation. "
             "none (or 0): no passage positions at all, the passages are an unordered set and rerank may score "
             "any number of them with trained weights only")

    def resolve(self) -> None:
        if self.position_passages is None:
            self.position_passages = self.max_passages
        if 0 < self.position_passages < self.max_passages:
            raise RankkitError(f"--position-passages {self.position_passages} is below --max-passages "
                               f"{self.max_passages}: every trained passage needs a position (or none: no positions)")


def _parade(name: str, cls: str, summary: str, config: type[ModelConfig] = PassageWindowConfig) -> ModelSpec:
    return ModelSpec(name=name, target=f"{_HERE}.parade:{cls}", config_class=config, family="documents",
                     paper=PARADE_PAPER, summary=summary)


PARADE_MAX = _parade("parade-max", "ParadeMax", "PARADE-Max (Eq. 2): element-wise max over the real passages.")
PARADE_AVG = _parade("parade-avg", "ParadeAvg", "PARADE-Avg: the mean of the real passages (``w_i = 1/n``).")
PARADE_SUM = _parade("parade-sum", "ParadeSum", "PARADE-Sum: the sum of the real passages (``w_i = 1``).")
PARADE_ATTN = _parade("parade-attn", "ParadeAttn",
                      "PARADE-Attn (Eqs. 3-4): passage weights ``softmax(W p_i)`` over the real passages.")
PARADE_CNN = _parade("parade-cnn", "ParadeCNN", "PARADE-CNN: 4 width-2 stride-2 convolution layers, every output "
                                                "scored by a FFN, scores summed.", ParadeCNNConfig)
PARADE_TRANSFORMER = _parade("parade-transformer", "ParadeTransformer",
                             "PARADE-Transformer (Eqs. 5-7): 2 transformer layers over ``(emb_[CLS], p_1..p_n)``.",
                             ParadeTransformerConfig)


@dataclass
class MatRankSplitConfig(DocumentConfig):
    """MatRank-Split's pieces (paper: K=5 pieces of L=512 tokens; rankkit's CPU defaults 4 x 128)."""

    piece_length: int = option(
        128, minimum=1, paper="MatRank §3.2 (L)",
        help="tokens of one piece's encoder input [CLS] query [SEP] piece [SEP] (query and special tokens "
             "included: a piece holds piece-length - max-query-length - 3 document tokens); at most the "
             "backbone's positions")
    max_pieces: int = option(4, minimum=1, paper="MatRank §3.2 (K)", rerank_flag="--max-passages",
                             help="pieces per document, from its start")
    hidden: int = option(0, minimum=0, paper="MatRank §3.1, Eq. 2",
                         help="hidden width of the pair MLP; 0 = the piece vector width")
    piece_includes_query: bool = option(
        True, cli=False, help="piece-length counts the whole encoder input (False: document tokens only, "
                              "the meaning recorded by checkpoints written before issue 17)")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str) -> "MatRankSplitConfig":
        config = super().from_dict(data, source)
        if "piece_includes_query" not in data:  # written before the setting existed: L counted the piece only
            config.piece_includes_query = False
        return config

    def piece_tokens(self) -> int:
        """Document tokens per piece."""
        if not self.piece_includes_query:
            return int(self.piece_length)
        return int(self.piece_length) - int(self.max_query_length) - 3

    def resolve(self) -> None:
        if self.piece_tokens() < 1:
            raise RankkitError(f"--piece-length {self.piece_length} leaves no room for document text after a "
                               f"{self.max_query_length}-token query and 3 special tokens "
                               f"(at least {self.max_query_length + 4})")


MATRANK_SPLIT = ModelSpec(
    name="matrank-split", target=f"{_HERE}.matrank_split:MatRankSplit", config_class=MatRankSplitConfig,
    family="documents", output_type=PreferenceOutput, training_defaults=TrainingDefaults(loss="matrank"),
    paper='Luo, Yang, Guo, Li, Niu and Xu, 2022, "MatRank: Text Re-ranking by Latent Preference Matrix" '
          '(MatRank-Split)',
    summary="MatRank-Split: one preference matrix over every piece of a query's documents (Eqs. 9-12).")

__all__ = ["AVGP", "FIRSTP", "KMAXP", "MATRANK_SPLIT", "MAXP", "PARADE_ATTN", "PARADE_AVG", "PARADE_CNN", "PARADE_MAX",
           "PARADE_PAPER", "PARADE_SUM", "PARADE_TRANSFORMER", "PASSAGE_SCORE_PAPER", "SUMP", "DocumentConfig",
           "FirstPConfig", "KMaxPConfig", "MatRankSplitConfig", "ParadeCNNConfig", "ParadeTransformerConfig",
           "PassageWindowConfig"]
