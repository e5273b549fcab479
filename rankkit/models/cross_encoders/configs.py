"""The passage re-rankers' declarations: typed settings and specs of mono, the MatRank family and the
Set-Encoder (no torch here; the networks are the other modules of :mod:`rankkit.models.cross_encoders`,
and :mod:`rankkit.models.declaration` says why the two are apart).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rankkit.errors import RankkitError
from rankkit.models.config import ModelConfig, option
from rankkit.models.declaration import ModelSpec, TrainingDefaults
from rankkit.models.outputs import PreferenceOutput

#: The paper of the candidate-list family (MatRank's Table 3 models).
MATRANK_PAPER = 'Luo, Yang, Guo, Li, Niu and Xu, 2022, "MatRank: Text Re-ranking by Latent Preference Matrix"'
#: Most candidates scored together as one set at re-ranking time (the paper re-ranks top-100).
MAX_SET_SIZE = 100
_HERE = "rankkit.models.cross_encoders"


@dataclass
class CandidateListConfig(ModelConfig):
    """Settings of the candidate-list re-rankers."""

    max_query_length: int = option(32, help="query tokens", minimum=1, cli=False)
    #: Passage token budget; the cross pair is ``3 + query + passage`` tokens at most.
    max_doc_length: int = option(224, help="passage tokens", minimum=1, cli=False)
    encoder: Literal["cross", "bi"] = option(
        "cross", paper="MatRank §3.1, Eq. 1 (cross); bi is rankkit's CPU variant, not in the paper",
        help="cross: [CLS] of the (query, passage) pair, trained end to end; bi: bi-encoder features "
             "[q; t; q*t; |q-t|] plus a learned cosine skip, starting at the zero-shot ranking")
    freeze_encoder: bool | None = option(
        None, flag="--freeze-encoder/--tune-encoder",
        help="freeze the backbone [default: frozen for --encoder bi, trained for cross]")
    bi_pooling: str | None = option(
        None, cli=False,
        help="--encoder bi: the backbone's sentence-transformers pooling (mean, cls or max), read from its "
             "modules.json when training starts [default: mean]")
    hidden: int | None = option(
        None, minimum=0, paper="MatRank §3.1 (the scoring head)",
        help="head hidden width; 0 = a linear layer on h [default: bi 256, cross 0]")
    truncation: Literal["pair", "lightning-ir"] = option(
        "pair", paper="lightning-ir's CrossEncoderTokenizer for lightning-ir",
        help="--encoder cross: pair cuts the query to max_query_length tokens and lets the passage fill the "
             "rest of the 3 + query + passage budget; lightning-ir cuts query and passage to their own "
             "limits, decodes and re-encodes them (lightning-ir checkpoints score as in lightning-ir)")

    def resolve(self) -> None:
        if self.freeze_encoder is None:
            # The bi variant exists to train in minutes: frozen unless asked otherwise.
            self.freeze_encoder = self.encoder == "bi"
        if self.hidden is None:
            self.hidden = 256 if self.encoder == "bi" else 0


@dataclass
class MonoConfig(CandidateListConfig):
    """``mono``'s settings: the candidate-list settings plus which head scores the pair."""

    hf_head: bool | None = option(
        None, flag="--hf-head/--rankkit-head",
        paper="monoBERT (Nogueira and Cho, 2019) for --hf-head; MatRank Eq. 1 for --rankkit-head",
        help="score with the backbone's Hugging Face sequence-classification head (the checkpoint loads in "
             "AutoModelForSequenceClassification and sentence-transformers' CrossEncoder) or rankkit's head on "
             "the raw [CLS] [default: hf for --encoder cross --hidden 0, rankkit otherwise]")

    def resolve(self) -> None:
        super().resolve()
        plain = self.encoder == "cross" and not self.hidden
        if self.hf_head is None:
            self.hf_head = plain
        elif self.hf_head and not plain:
            raise RankkitError("--hf-head needs --encoder cross and --hidden 0 (the classifier brings its own head)")


MONO = ModelSpec(
    name="mono", target=f"{_HERE}.mono:Mono", config_class=MonoConfig,
    paper='Nogueira and Cho, 2019, "Passage Re-ranking with BERT" (the Point-wise row of MatRank\'s Table 3)',
    summary="Point-wise scores of each candidate, independent of the other candidates.")


@dataclass
class MatRankConfig(CandidateListConfig):
    """MatRank's settings: the candidate-list ones, with the hidden width of Eq. 2's MLP."""

    hidden: int | None = option(
        None, minimum=0, paper="MatRank §3.1, Eq. 2",
        help="hidden width of the pair MLP over [h_i ; h_j]; 0 = the width of h [default: bi 256, cross 0]")


MATRANK = ModelSpec(
    name="matrank", target=f"{_HERE}.matrank:MatRank", config_class=MatRankConfig, output_type=PreferenceOutput,
    training_defaults=TrainingDefaults(loss="matrank"), paper=MATRANK_PAPER,
    summary="MatRank: a latent preference matrix over a query's candidates (Eqs. 1-8).")
MATRANK_ROW = ModelSpec(
    name="matrank-row", target=f"{_HERE}.matrank:MatRankRow", config_class=MatRankConfig,
    output_type=PreferenceOutput, training_defaults=TrainingDefaults(loss="matrank"), paper=MATRANK_PAPER,
    summary="MatRank_row (the paper's ablation): beta only, in the loss and at inference.")
MATRANK_COL = ModelSpec(
    name="matrank-col", target=f"{_HERE}.matrank:MatRankCol", config_class=MatRankConfig,
    output_type=PreferenceOutput, training_defaults=TrainingDefaults(loss="matrank"), paper=MATRANK_PAPER,
    summary="The column-only MatRank (§4.3: \"the column-wise only MatRank has the same performance\" as "
            "MatRank_row): omega = softmax(-c) only (Eq. 7), in the loss and at inference.")


@dataclass
class ListwiseConfig(CandidateListConfig):
    """The candidate-list settings plus the fixed list width of the concatenation."""

    list_size: int = option(
        32, minimum=1, paper="MatRank §4.3 (List-wise)",
        help="candidate slots L of the concatenated input (the training --group-size and the re-ranking "
             "--depth must not exceed it)")
    hidden: int | None = option(
        None, minimum=0, paper="MatRank §4.3 (List-wise)",
        help="hidden width of the MLP over the concatenation; 0 = the width of h [default: bi 256, cross 0]")


LISTWISE = ModelSpec(
    name="listwise", target=f"{_HERE}.listwise:Listwise", config_class=ListwiseConfig, paper=MATRANK_PAPER,
    summary="MatRank's List-wise: one MLP over the concatenated pair vectors of a query's candidates.")


@dataclass
class CandidateAttentionConfig(CandidateListConfig):
    """The candidate-list settings plus the attention layer's shape."""

    hidden: int | None = option(
        None, minimum=0, paper="MatRank §4.3 (+Attention)",
        help="feed-forward width of the encoder layer; 0 = 4 x the width of h [default: bi 256, cross 0]")
    attention_heads: int = option(
        0, minimum=0, paper="MatRank §4.3 (+Attention)",
        help="attention heads of the encoder layer (must divide the width of h); 0 = the backbone's")
    attention_dropout: float = option(0.1, minimum=0.0, maximum=1.0, paper="MatRank §4.3 (+Attention)",
                                      help="dropout inside the encoder layer (as BERT's layers)")


CANDIDATE_ATTENTION = ModelSpec(
    name="matrank-attn", target=f"{_HERE}.candidate_attention:CandidateAttention",
    config_class=CandidateAttentionConfig, paper=MATRANK_PAPER,
    summary="MatRank's +Attention: the candidates' pair vectors attend to each other, then a linear score.")


@dataclass
class JointListConfig(ModelConfig):
    """Lengths of the joint input."""

    max_query_length: int = option(32, help="query tokens", minimum=1, cli=False)
    max_doc_length: int = option(64, help="tokens per candidate at most", minimum=1, cli=False)
    max_length: int | None = option(
        None, minimum=8, paper="MatRank §4.3 (+BigBird)",
        help="tokens of the whole joint input [default: the backbone's positions]; candidates are cut to fit")


JOINT_LIST = ModelSpec(
    name="listwise-joint", target=f"{_HERE}.joint_list:JointList", config_class=JointListConfig, paper=MATRANK_PAPER,
    summary="MatRank's +BigBird: the query and all its candidates in one input, scored at their [SEP]s.")


@dataclass
class SetEncoderConfig(CandidateListConfig):
    """Only the head width is tunable: the encoder is always the cross encoder, trained end to end."""

    encoder: Literal["cross", "bi"] = option("cross", help="always cross (§3.1)", cli=False)
    freeze_encoder: bool | None = option(False, help="never frozen", cli=False)
    hidden: int | None = option(None, minimum=0, paper="Set-Encoder §3 (a linear layer on [CLS])",
                                help="head hidden width; 0 = the paper's linear layer on [CLS] [default: 0]")
    interaction_token: Literal["cls", "int"] = option(
        "cls", paper="Set-Encoder §3.2 (cls); int: the authors' code and published weights (add_extra_token)",
        help="what the other passages attend to: cls, each sequence's [CLS] (the paper); int, an extra trainable "
             "[INT] token after [CLS] ([CLS] [INT] q [SEP] p [SEP]; scores still from [CLS])")
    max_set_size: int = option(
        MAX_SET_SIZE, minimum=1, rerank_flag="--max-set-size",
        paper="Set-Encoder §4 (re-ranks the top 100); lightning-ir's depth",
        help="re-ranking: candidates scored together as one set; longer lists are split into deterministic, "
             "order-independent sets")
    freeze_position_embeddings: bool = option(
        False, flag="--freeze-position-embeddings/--train-position-embeddings",
        paper="Schlatt et al., 2024, Set-Encoder: the authors' configs (github.com/webis-de/set-encoder, "
              "set_encoder/configs/cli/set-encoder.yaml: freeze_position_embeddings: true); not in the paper's text",
        help="training: keep the backbone's learned position embeddings as pre-trained (not updated) while every "
             "other weight trains, as the authors' ELECTRA runs do")

    def resolve(self) -> None:
        if self.encoder != "cross" or self.freeze_encoder:
            raise RankkitError("set-encoder trains its cross-encoder: no --encoder bi, no --freeze-encoder")
        super().resolve()


SET_ENCODER = ModelSpec(
    name="set-encoder", target=f"{_HERE}.set_encoder:SetEncoder", config_class=SetEncoderConfig,
    paper='Schlatt et al., 2024, "Set-Encoder: Permutation-Invariant Inter-Passage Attention for Listwise '
          'Passage Re-Ranking with Cross-Encoders"',
    summary="The Set-Encoder: Mono's linear [CLS] head on an encoder with inter-passage attention (§3).")

__all__ = ["CANDIDATE_ATTENTION", "JOINT_LIST", "LISTWISE", "MATRANK", "MATRANK_COL", "MATRANK_PAPER", "MATRANK_ROW",
           "MAX_SET_SIZE", "MONO", "SET_ENCODER", "CandidateAttentionConfig", "CandidateListConfig", "JointListConfig",
           "ListwiseConfig", "MatRankConfig", "MonoConfig", "SetEncoderConfig"]
