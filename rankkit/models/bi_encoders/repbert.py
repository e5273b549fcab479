"""RepBERT (Zhan, Mao, Liu, Zhang and Ma, 2020, "RepBERT: Contextualized Text Embeddings for
First-Stage Retrieval", §3): one shared BERT encoder, mean pooling, inner product.

* Input: ``[CLS] tokens [SEP]`` (Eq. 1), queries cut to 20 tokens and documents to 256 (§4.3.1).
* Embedding: mean of the last layer's token vectors over the attention mask (Eq. 2).
* Segment ids (footnote 2): query tokens 0, document tokens 1 — the setting of a checkpoint trained
  by rankkit (``doc_segment_id`` in rankkit.json). Zero-shot use of a sentence-transformers backbone
  such as the packaged all-MiniLM-L6-v2 keeps 0 for documents too, because that is how it was trained.
* Relevance: inner product (Eq. 3). all-MiniLM-L6-v2's modules.json ends in a Normalize layer, so
  its zero-shot form normalises vectors (``normalize`` = True: inner product = cosine, exactly the
  sentence-transformers similarity); a rankkit-trained RepBERT uses the paper's raw inner product
  unless trained with ``--normalize``.
* Loss: MultiLabelMarginLoss (Eq. 4) over the in-batch score matrix: every in-batch document whose
  docid is a positive of the query is a positive, every other one (mined or in-batch) a negative
  (:class:`rankkit.models.losses.MultiLabelMarginLoss`, the default).
* The 20/256 length limits include [CLS] and [SEP] (18/254 word pieces); the authors' code
  counts word pieces only (22/258 tokens in all): pass ``--max-query-length 22 --max-doc-length
  258`` to match it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import torch

from rankkit.errors import RankkitError
from rankkit.models import backbone as bb
from rankkit.models.base import BiEncoder, TrainingDefaults, l2_normalize
from rankkit.models.config import ModelConfig, option
from rankkit.models.inputs import pad, tokenize
from rankkit.models.pooling import mean_pool
from rankkit.models.runtime import EncoderSlot, hf_slot


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
        None, minimum=0, paper="RepBERT footnote 2",
        help="segment id of document tokens [default: 1 when training, 0 zero-shot]")
    normalize: bool | None = option(
        None, flag="--normalize/--inner-product", paper="RepBERT Eq. 3 (inner product)",
        help="cosine (unit vectors) or the paper's raw inner product [default: inner product when "
             "training; zero-shot: as the backbone's sentence-transformers config]")


class RepBERT(BiEncoder):
    """RepBERT bi-encoder over any local Hugging Face encoder (BERT-like)."""

    name = "repbert"
    config_class: ClassVar[type[ModelConfig]] = RepBERTConfig
    # §4.3.1 used Adam with L2 decay 0.01 and lr 3e-6 for BERT-base over 350k steps; 2e-5 is the
    # usual rate for fine-tuning the 6-layer MiniLM on shorter schedules.
    training_defaults = TrainingDefaults(loss="multilabel-margin", lr=2e-5, weight_decay=0.01)

    def __init__(self, encoder: Any, tokenizer: Any, config: ModelConfig) -> None:
        super().__init__(config)
        assert isinstance(config, RepBERTConfig)
        self.config: RepBERTConfig = config
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.max_query_length = config.max_query_length
        self.max_doc_length = config.max_doc_length
        self.query_segment_id = config.query_segment_id
        self.doc_segment_id = int(config.doc_segment_id or 0)
        self._normalize = bool(config.normalize)
        self._uses_segments = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
        types = int(getattr(encoder.config, "type_vocab_size", 0) or 0)
        for seg in {self.query_segment_id, self.doc_segment_id} - {0}:
            if not self._uses_segments or seg >= types:
                raise RankkitError(
                    f"segment id {seg} needs a backbone with at least {seg + 1} segment embeddings "
                    f"(this one has {types}); use --doc-segment-id 0"
                )
        # BERT's pooler (the NSP head's [CLS] projection) is unused by mean pooling; freezing it keeps
        # the saved checkpoint complete and stops DDP waiting for gradients that never come.
        pooler = getattr(encoder, "pooler", None)
        if isinstance(pooler, torch.nn.Module):
            pooler.requires_grad_(False)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def for_training(cls, backbone: Path | None, config: ModelConfig) -> "RepBERT":
        """Paper settings: documents get segment id 1, raw inner product, lengths 20/256."""
        assert isinstance(config, RepBERTConfig)
        folder = bb.resolve_backbone(backbone)
        if config.doc_segment_id is None:
            config.doc_segment_id = 1
        if config.normalize is None:
            config.normalize = False
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), config)

    @classmethod
    def zero_shot(cls, backbone: Path | None, config: ModelConfig | None = None) -> "RepBERT":
        """An untrained backbone used as trained: segment id 0 everywhere, normalised if it was trained so."""
        folder = bb.resolve_backbone(backbone)
        config = config if config is not None else RepBERTConfig()
        assert isinstance(config, RepBERTConfig)
        if config.doc_segment_id is None:
            config.doc_segment_id = 0
        if config.normalize is None:
            config.normalize = bb.sentence_transformers_normalizes(folder)
        config.backbone = str(backbone) if backbone is not None else None
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), config)

    @classmethod
    def load(cls, folder: Path, config: ModelConfig) -> "RepBERT":
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), config)

    def save(self, folder: Path) -> None:
        self.encoder.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))

    def encoder_slots(self) -> list[EncoderSlot]:
        """The shared BERT of Eq. 1-2 (mean pooling and normalisation stay in torch)."""
        return [hf_slot(self)]

    # -- encoding -----------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return int(self.encoder.config.hidden_size)

    @property
    def normalized(self) -> bool:
        return self._normalize

    def tokenize(self, texts: Sequence[str], *, is_query: bool) -> list[list[int]]:
        """Eq. 1: ``[CLS] Tokenize(text) [SEP]``, truncated to the query or document length."""
        limit = self.max_query_length if is_query else self.max_doc_length
        return tokenize(self.tokenizer, texts, limit)

    def features(self, ids: Sequence[Sequence[int]], *, is_query: bool) -> dict[str, torch.Tensor]:
        input_ids, attention = pad(ids, int(self.tokenizer.pad_token_id or 0))
        feats = {"input_ids": input_ids, "attention_mask": attention}
        if self._uses_segments:
            # Footnote 2: segment 0 for query tokens, 1 for document tokens (padding keeps 0).
            segment = self.query_segment_id if is_query else self.doc_segment_id
            feats["token_type_ids"] = attention * segment
        return feats

    def embed(self, features: Mapping[str, torch.Tensor], *, is_query: bool) -> torch.Tensor:
        """Eq. 2: mean of the last hidden layer over the attention mask (L2-normalised if cosine)."""
        out = self.encoder(**features, return_dict=True)
        vectors = mean_pool(out.last_hidden_state, features["attention_mask"])
        return l2_normalize(vectors) if self._normalize else vectors
