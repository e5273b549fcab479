"""RepBERT (Zhan, Mao, Liu, Zhang and Ma, 2020, "RepBERT: Contextualized Text Embeddings for
First-Stage Retrieval", §3): one shared BERT encoder, mean pooling, inner product.

* Input: ``[CLS] tokens [SEP]`` (Eq. 1), queries cut to 20 tokens and documents to 256 (§4.3.1),
  each text after its optional prefix (``--query-prefix``/``--doc-prefix``, e.g. E5's "query: " and
  "passage: "; not in the paper).
* Embedding: mean of the last layer's token vectors over the attention mask (Eq. 2); ``--pooling
  cls|max`` for backbones trained otherwise (BGE: [CLS]). Unset, the backbone's own
  sentence-transformers pooling (its modules.json / 1_Pooling) is used, else Eq. 2's mean.
* Segment ids (footnote 2 gives documents segment 1): rankkit gives documents segment 0 by default,
  as sentence-transformers encodes every text and as the packaged MiniLM was trained, so a
  checkpoint is exactly a ``SentenceTransformer`` (its document vectors too). ``--doc-segment-id 1``
  reproduces footnote 2; such a checkpoint's document vectors cannot be computed by
  sentence-transformers (it never sets segment ids). rankkit 0.1 trained with 1 and recorded it in
  rankkit.json, so those checkpoints keep encoding documents with 1.
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

A checkpoint folder is a sentence-transformers folder: the encoder's config.json and
model.safetensors, the tokenizer, modules.json (Transformer, Pooling, Normalize when cosine),
sentence_bert_config.json (``max_seq_length`` = the document length), 1_Pooling/config.json and
config_sentence_transformers.json (the prefixes as the ``query``/``document`` prompts), plus
rankkit.json. ``SentenceTransformer(folder).encode_query(q)`` / ``encode_document(d)`` then give
rankkit's vectors (queries within the query length: sentence-transformers has one length limit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from rankkit.errors import RankkitError
from rankkit.models import backbone as bb
from rankkit.models.base import BiEncoder, l2_normalize
from rankkit.models.bi_encoders.configs import REPBERT, RepBERTConfig
from rankkit.models.config import ModelConfig
from rankkit.models.inputs import pad, tokenize
from rankkit.models.pooling import POOLING_MODES, pool
from rankkit.models.encoder_slots import EncoderSlot, hf_slot


class RepBERT(BiEncoder, spec=REPBERT):
    """RepBERT bi-encoder over any local Hugging Face encoder (BERT-like)."""

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
                why = (f"this backbone has {types} segment embedding(s)" if self._uses_segments
                       else "this backbone's tokenizer takes no token type ids")
                raise RankkitError(f"segment id {seg} cannot be used: {why}; use --doc-segment-id 0")
        if self.pooling not in POOLING_MODES:
            raise RankkitError(f"pooling {self.pooling!r} is not one of {', '.join(POOLING_MODES)}")
        # BERT's pooler (the NSP head's [CLS] projection) is unused by mean pooling; freezing it keeps
        # the saved checkpoint complete and stops DDP waiting for gradients that never come.
        pooler = getattr(encoder, "pooler", None)
        if isinstance(pooler, torch.nn.Module):
            pooler.requires_grad_(False)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def for_training(cls, backbone: Path | None, config: ModelConfig) -> "RepBERT":
        """Paper settings (raw inner product, lengths 20/256), documents in segment 0, the backbone's
        sentence-transformers pooling and prompts unless given."""
        assert isinstance(config, RepBERTConfig)
        folder = bb.resolve_backbone(backbone)
        tokenizer = bb.load_tokenizer(folder)
        if config.doc_segment_id is None:
            config.doc_segment_id = 0
        if config.normalize is None:
            config.normalize = False
        _from_sentence_transformers(folder, config)
        return cls(bb.load_encoder(folder), tokenizer, config)

    @classmethod
    def zero_shot(cls, backbone: Path | None, config: ModelConfig | None = None) -> "RepBERT":
        """An untrained backbone used as trained: segment id 0 everywhere, its sentence-transformers
        pooling, normalisation and prompts (settings given in ``config`` win)."""
        folder = bb.resolve_backbone(backbone)
        config = config if config is not None else RepBERTConfig()
        assert isinstance(config, RepBERTConfig)
        if config.doc_segment_id is None:
            config.doc_segment_id = 0
        pipeline = _from_sentence_transformers(folder, config)
        if config.normalize is None:
            config.normalize = bool(pipeline and pipeline.normalize)
        config.backbone = str(backbone) if backbone is not None else None
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), config)

    @classmethod
    def load(cls, folder: Path, config: ModelConfig) -> "RepBERT":
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), config)

    def save(self, folder: Path) -> None:
        """The encoder and tokenizer plus the sentence-transformers files (module docstring)."""
        self.encoder.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))
        bb.write_sentence_transformers(
            folder, dim=self.dim, pooling=self.pooling, normalize=self._normalize,
            max_seq_length=self.max_doc_length,
            prompts={"query": self.config.query_prefix or "", "document": self.config.doc_prefix or ""})

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

    @property
    def pooling(self) -> str:
        """The pooling mode (``mean`` for checkpoints that recorded none: rankkit 0.1)."""
        return self.config.pooling or "mean"

    def tokenize(self, texts: Sequence[str], *, is_query: bool) -> list[list[int]]:
        """Eq. 1: ``[CLS] Tokenize(prefix + text) [SEP]``, truncated to the query or document length."""
        limit = self.max_query_length if is_query else self.max_doc_length
        prefix = (self.config.query_prefix if is_query else self.config.doc_prefix) or ""
        return tokenize(self.tokenizer, [prefix + t for t in texts] if prefix else texts, limit)

    def features(self, ids: Sequence[Sequence[int]], *, is_query: bool) -> dict[str, torch.Tensor]:
        input_ids, attention = pad(ids, int(self.tokenizer.pad_token_id or 0))
        feats = {"input_ids": input_ids, "attention_mask": attention}
        if self._uses_segments:
            # Footnote 2: segment 0 for query tokens, 1 for document tokens (padding keeps 0).
            segment = self.query_segment_id if is_query else self.doc_segment_id
            feats["token_type_ids"] = attention * segment
        return feats

    def embed(self, features: Mapping[str, torch.Tensor], *, is_query: bool) -> torch.Tensor:
        """Eq. 2: mean of the last hidden layer over the attention mask, or the chosen pooling
        (L2-normalised if cosine)."""
        out = self.encoder(**features, return_dict=True)
        vectors = pool(self.pooling, out.last_hidden_state, features["attention_mask"])
        return l2_normalize(vectors) if self._normalize else vectors


def _from_sentence_transformers(folder: Path, config: RepBERTConfig) -> bb.SentenceTransformersPipeline | None:
    """Fill the pooling and prefixes ``config`` leaves unset from ``folder``'s sentence-transformers
    pipeline (mean and no prefixes without one); a pipeline rankkit cannot reproduce is refused."""
    pipeline = bb.read_sentence_transformers(folder)
    if pipeline is not None and pipeline.others:
        raise RankkitError(f"{folder}: the sentence-transformers modules {', '.join(pipeline.others)} are not "
                           "supported by repbert (Transformer, Pooling and Normalize are)")
    if config.pooling is None:
        mode = pipeline.pooling if pipeline is not None else "mean"
        if mode not in POOLING_MODES:
            raise RankkitError(f"{folder}: sentence-transformers pooling {mode!r} is not supported; "
                               f"pass --pooling {'|'.join(POOLING_MODES)}")
        config.pooling = mode  # type: ignore[assignment]
    prompts = pipeline.prompts if pipeline is not None else {}
    if config.query_prefix is None:
        config.query_prefix = prompts.get("query", "")
    if config.doc_prefix is None:
        config.doc_prefix = prompts.get("document", prompts.get("passage", ""))
    return pipeline
