"""RepBERT (Zhan et al. 2020, paper 001 §3): one shared BERT encoder, mean pooling, inner product.

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
  docid is a positive of the query is a positive, every other one (mined or in-batch) a negative.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from rankkit.errors import RankkitError
from rankkit.models import backbone as bb
from rankkit.models.base import BiEncoder, l2_normalize
from rankkit.models.pooling import mean_pool
from rankkit.training import batching, losses
from rankkit.training.batching import GroupBatch


class RepBERT(BiEncoder):
    """RepBERT bi-encoder over any local Hugging Face encoder (BERT-like)."""

    name = "repbert"
    default_loss = "multilabel-margin"
    native_losses = ("multilabel-margin",)
    default_max_query_length = 20
    default_max_doc_length = 256
    option_names = ("doc_segment_id", "normalize")
    # §4.3.1 used Adam with L2 decay 0.01 and lr 3e-6 for BERT-base over 350k steps; 2e-5 is the
    # usual rate for fine-tuning the 6-layer MiniLM on shorter schedules.
    default_lr = 2e-5
    default_weight_decay = 0.01

    def __init__(self, encoder: Any, tokenizer: Any, hparams: Mapping[str, Any]) -> None:
        super().__init__(hparams)
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.max_query_length = int(self.hparams["max_query_length"])
        self.max_doc_length = int(self.hparams["max_doc_length"])
        self.query_segment_id = int(self.hparams.get("query_segment_id", 0))
        self.doc_segment_id = int(self.hparams["doc_segment_id"])
        self._normalize = bool(self.hparams["normalize"])
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
    def _hparams(cls, options: Mapping[str, Any], *, doc_segment_id: int, normalize: bool) -> dict[str, Any]:
        return {
            "max_query_length": int(options.get("max_query_length") or cls.default_max_query_length),
            "max_doc_length": int(options.get("max_doc_length") or cls.default_max_doc_length),
            "query_segment_id": 0,
            "doc_segment_id": int(options["doc_segment_id"]) if options.get("doc_segment_id") is not None
            else doc_segment_id,
            "normalize": bool(options["normalize"]) if options.get("normalize") is not None else normalize,
        }

    @classmethod
    def for_training(cls, backbone: Path | None, options: Mapping[str, Any]) -> "RepBERT":
        """Paper settings: documents get segment id 1, raw inner product, lengths 20/256."""
        folder = bb.resolve_backbone(backbone)
        hparams = cls._hparams(options, doc_segment_id=1, normalize=False)
        hparams["backbone"] = str(backbone) if backbone is not None else None
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), hparams)

    @classmethod
    def zero_shot(cls, backbone: Path | None, options: Mapping[str, Any] | None = None) -> "RepBERT":
        """An untrained backbone used as trained: segment id 0 everywhere, normalised if it was trained so."""
        folder = bb.resolve_backbone(backbone)
        hparams = cls._hparams(options or {}, doc_segment_id=0,
                               normalize=bb.sentence_transformers_normalizes(folder))
        hparams["backbone"] = str(backbone) if backbone is not None else None
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), hparams)

    @classmethod
    def load(cls, folder: Path, hparams: Mapping[str, Any]) -> "RepBERT":
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), hparams)

    def save(self, folder: Path) -> None:
        self.encoder.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))

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
        return batching.tokenize(self.tokenizer, texts, limit)

    def features(self, ids: Sequence[Sequence[int]], *, is_query: bool) -> dict[str, torch.Tensor]:
        input_ids, attention = batching.pad(ids, int(self.tokenizer.pad_token_id or 0))
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

    # -- training -----------------------------------------------------------------------------
    def native_loss(self, batch: GroupBatch) -> torch.Tensor:
        """Eq. 4 over the in-batch matrix (in-batch negatives, §3.2), positives matched by docid."""
        scores, positive, _ = self.in_batch(batch)
        return losses.multilabel_margin(scores, positive)
