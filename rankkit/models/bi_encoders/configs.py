"""The bi-encoders' declarations: RepBERT's and DenseTrans' typed settings and specs (no torch here).

The networks are :mod:`rankkit.models.bi_encoders.repbert` and :mod:`rankkit.models.bi_encoders.densetrans`;
:mod:`rankkit.models.declaration` says why the two are apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

from rankkit.models.config import ModelConfig, option
from rankkit.models.declaration import ModelSpec, TrainingDefaults
from rankkit.models.outputs import InBatchOutput


@dataclass
class RepBERTConfig(ModelConfig):
    """RepBERT's settings (§3, §4.3.1)."""

    max_query_length: int = option(20, help="query tokens, [CLS]/[SEP] included", minimum=2, cli=False,
                                   paper="RepBERT §4.3.1")
    max_doc_length: int = option(256, help="document tokens, [CLS]/[SEP] included", minimum=2, cli=False,
                                 paper="RepBERT §4.3.1")
    query_segment_id: int = option(0, help="segment id of query tokens", minimum=0, cli=False,
                                   paper="RepBERT footnote 2")
    doc_segment_id: int | None = option(
        None, minimum=0, paper="RepBERT footnote 2 (which uses 1)",
        help="segment id of document tokens [default: 0, as sentence-transformers encodes; 1 is the paper's "
             "footnote 2, whose document vectors SentenceTransformer cannot reproduce]")
    normalize: bool | None = option(
        None, flag="--normalize/--inner-product", paper="RepBERT Eq. 3 (inner product)",
        help="cosine (unit vectors) or the paper's raw inner product [default: inner product when "
             "training; zero-shot: as the backbone's sentence-transformers config]")
    pooling: Literal["mean", "cls", "max"] | None = option(
        None, paper="RepBERT Eq. 2 (mean)", rerank_flag="--pooling",
        help="token vectors to one text vector: mean (Eq. 2), cls ([CLS], BGE-style) or max [default: the "
             "backbone's sentence-transformers pooling, else mean]")
    query_prefix: str | None = option(
        None, rerank_flag="--query-prefix",
        help="text put before every query, e.g. 'query: ' for E5 [default: the backbone's sentence-transformers "
             "'query' prompt, else none]")
    doc_prefix: str | None = option(
        None, rerank_flag="--doc-prefix",
        help="text put before every document, e.g. 'passage: ' for E5 [default: the backbone's "
             "sentence-transformers 'document' (or 'passage') prompt, else none]")


REPBERT = ModelSpec(
    name="repbert", target="rankkit.models.bi_encoders.repbert:RepBERT", config_class=RepBERTConfig,
    family="bi-encoder", output_type=InBatchOutput,
    # §4.3.1 used Adam with L2 decay 0.01 and lr 3e-6 for BERT-base over 350k steps; 2e-5 is the
    # usual rate for fine-tuning the 6-layer MiniLM on shorter schedules.
    training_defaults=TrainingDefaults(loss="multilabel-margin", lr=2e-5, weight_decay=0.01),
    paper='Zhan, Mao, Liu, Zhang and Ma, 2020, "RepBERT: Contextualized Text Embeddings for First-Stage Retrieval"',
    summary="RepBERT bi-encoder over any local Hugging Face encoder (BERT-like).")


@dataclass
class DenseTransConfig(ModelConfig):
    """DenseTrans' settings (§3.2, §4.2.3) and rankkit's CPU-sizing ones."""

    max_query_length: int = option(30, help="word pieces per query, [CLS] excluded", minimum=1, cli=False,
                                   paper="DenseTrans §4.2.3")
    max_doc_length: int = option(30, help="word pieces per document, [CLS] excluded", minimum=1, cli=False,
                                 paper="DenseTrans §4.2.3")
    variant: Literal["densetrans", "no-top-dense", "no-dense", "concat"] = option(
        "densetrans", paper="DenseTrans Table 3",
        help="the full model or a Table 3 ablation (-TopDense: the top layer reads only the layer below; "
             "-AllDense; +Concat: plain layers, all layers' [CLS] concatenated)",
        aliases={"--no-top-dense": "no-top-dense", "--no-dense": "no-dense", "--concat-layers": "concat"})
    representation: Literal["last", "all-layers"] = option(
        "last", paper="DenseTrans §3.2.2 (last); all-layers is rankkit's pre-issue-17 default",
        help="the text vector: [CLS] of the last layer (the paper) or of all layers' outputs concatenated "
             "(--variant concat always concatenates)",
        aliases={"--all-layers": "all-layers"})
    vocab_size: int = option(30522, help="tokens in the vocabulary (from the tokenizer)", minimum=1, cli=False)
    d_model: int | None = option(
        None, minimum=1, paper="DenseTrans §4.2.3 (rankkit: principal components of the MiniLM table below 384)",
        help="token width [default: the backbone's 384; smaller = the table's principal components, a CPU-sized model]")
    num_layers: int = option(3, minimum=1, paper="DenseTrans §4.2.3, Fig. 4", help="Transformer layers N")
    num_heads: int = option(6, minimum=1, paper="DenseTrans §4.2.3", help="attention heads H")
    ffn_multiplier: int = option(4, minimum=1, paper="DenseTrans Eq. 3",
                                 help="feed-forward width / layer width")
    max_positions: int = option(512, minimum=2, help="learned position embeddings", cli=False)
    dropout: float = option(0.1, minimum=0.0, maximum=1.0, paper="DenseTrans §4.2.3", help="dropout rate")
    scale: float = option(1.0, minimum=0.0, paper="DenseTrans Eq. 6 (1 as written)",
                          help="cosine multiplier in the softmax")
    embedding_init: Literal["backbone", "random"] = option(
        "backbone", paper="DenseTrans §4.2.3 (random = its out-of-vocabulary initialisation)",
        help="token vectors from the backbone's input embeddings (MiniLM) or U(-0.2, 0.2)")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str) -> "DenseTransConfig":
        """The recorded config; one written before ``representation`` existed keeps its recorded network:
        its ``densetrans``/``concat`` read all layers, its ``no-top-dense`` was dense throughout with
        the last layer's [CLS]."""
        config = super().from_dict(data, source)
        if "representation" not in data:
            if config.variant == "no-top-dense":
                config.variant, config.representation = "densetrans", "last"
            elif config.variant in ("densetrans", "concat"):
                config.representation = "all-layers"
        return config


DENSETRANS = ModelSpec(
    name="densetrans", target="rankkit.models.bi_encoders.densetrans:DenseTrans", config_class=DenseTransConfig,
    family="bi-encoder", output_type=InBatchOutput,
    # §4.2.3: Adam, beta2 0.98, eps 1e-8, no weight decay mentioned; the learning rate is not reported,
    # 1e-4 is a common rate for small Transformers trained from scratch.
    training_defaults=TrainingDefaults(loss="softmax-ce", lr=1e-4, weight_decay=0.0, adam_betas=(0.9, 0.98)),
    paper='Cai, Fan, Guo, Zhang, Lan and Cheng, 2021, "A Discriminative Semantic Ranker for Question Retrieval"',
    summary="DenseTrans bi-encoder: shared densely connected Transformer, [CLS] vector, cosine similarity.")

__all__ = ["DENSETRANS", "REPBERT", "DenseTransConfig", "RepBERTConfig"]
