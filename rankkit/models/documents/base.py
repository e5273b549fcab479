"""Shared machinery of the long-document re-rankers (``maxp``, ``firstp``, ``sump``, ``parade-*``, ``matrank-split``).

A document model splits each candidate document into passages (:mod:`rankkit.models.splitting`),
encodes every ``[CLS] q [SEP] P_i [SEP]`` pair with the backbone into ``p_i`` (PARADE Eq. 1) and
lets its *head* turn the passage vectors ``[G, S, N, dim]`` (with a passage mask) into document
scores ``[G, S]``. Everything is trained end to end from document labels: the engine's group
losses (``--loss``, ``listwise-ce`` by default, ``hinge`` = PARADE's pairwise hinge) apply to
the document scores.

* Training (``prepare`` in train mode) samples the passages of documents longer than
  ``max_passages`` windows with a generator seeded from the batch's qids and docids, so a run is
  deterministic and a resumed run sees the same passages; dev evaluation and ``rerank`` (eval
  mode) keep evenly spaced passages.
* Inference (:meth:`DocumentModel.rerank_scores`) encodes the passages of all queries of a chunk
  together, longest first in batches of ``--batch-size`` pairs, then runs each query's head.
* Padded passage slots (documents with fewer passages than the longest) are masked in every head;
  padded document slots get score 0 and are masked by the losses.

Checkpoints are those of the candidate-list models (``config.json`` with ``model_type``
``rankkit-<name>``, the settings and the backbone's config; ``model.safetensors``; the tokenizer
files), through the shared :class:`~rankkit.models.persistence.EncoderHeadFiles` mixin.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np
import torch

from rankkit.errors import RankkitError
from rankkit.models import backbone as bb
from rankkit.models.base import RankingModel
from rankkit.models.config import ModelConfig
from rankkit.models.documents.configs import PARADE_PAPER, DocumentConfig, PassageWindowConfig
from rankkit.models.documents.splitting import (
    PassagePairEncoder,
    passage_slots,
    passage_tensor,
    split_ids,
    tokenize_documents,
)
from rankkit.models.inputs import GroupBatch, PassageFeatures, batch_rng
from rankkit.models.outputs import RankingOutput
from rankkit.models.persistence import EncoderHeadFiles
from rankkit.models.encoder_slots import EncoderSlot, hf_slot


class DocumentModel(EncoderHeadFiles, RankingModel):
    """A re-ranker of long documents from their passages' ``[CLS]`` vectors (see module doc)."""

    family: ClassVar[str] = "documents"
    paper: ClassVar[str] = PARADE_PAPER

    config_class: ClassVar[type[ModelConfig]] = PassageWindowConfig

    def __init__(self, encoder: Any, tokenizer: Any, config: ModelConfig) -> None:
        super().__init__(config)
        assert isinstance(config, DocumentConfig)
        self.config: Any = config
        self.tokenizer = tokenizer
        qlen = config.max_query_length
        #: The pair encoder (``pairs`` like the candidate-list models, so the shared save/load apply).
        self.pairs = PassagePairEncoder(encoder, tokenizer, qlen, qlen + self.passage_tokens() + 3)
        self.build_head(self.pairs.dim)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def for_training(cls, backbone: Path | None, config: ModelConfig) -> "DocumentModel":
        """A fresh model on ``backbone``'s weights (packaged MiniLM by default) with a new head."""
        folder = bb.resolve_backbone(backbone)
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), config)

    @abc.abstractmethod
    def build_head(self, dim: int) -> None:
        """Create the aggregation head for passage vectors of width ``dim``."""

    def encoder_slots(self) -> list[EncoderSlot]:
        """The passage-pair encoder (PARADE Eq. 1); the aggregation head stays in torch."""
        return [hf_slot(self.pairs)]

    # -- splitting ----------------------------------------------------------------------------
    def passage_tokens(self) -> int:
        """Longest passage in tokens (sets the pair length: query + passage + 3 special tokens)."""
        return int(self.config.window)

    def split(self, ids: Sequence[int], rng: np.random.Generator | None) -> list[list[int]]:
        """One document's passages (PARADE windows; subclasses override)."""
        return split_ids(ids, window=self.config.window, stride=self.config.stride,
                         max_passages=self.config.max_passages, rng=rng)

    def split_documents(self, texts: Sequence[str], rng: np.random.Generator | None) -> list[list[list[int]]]:
        """The passages of each text, in order (``rng``: training-time sampling)."""
        max_doc = self.config.max_doc_length
        ids = tokenize_documents(self.tokenizer, texts, int(max_doc) if max_doc else None)
        return [self.split(doc, rng) for doc in ids]

    # -- training -----------------------------------------------------------------------------
    def prepare(self, batch: GroupBatch) -> GroupBatch:
        """Split the real candidates (sampled in train mode) and tokenise every (query, passage) pair."""
        _, texts, where = batch.flat_documents()
        documents = self.split_documents(texts, batch_rng(batch) if self.training else None)
        queries = [batch.queries[g] for (g, _), doc in zip(where, documents) for _ in doc]
        passages = [p for doc in documents for p in doc]
        feats = self.pairs.features(queries, passages)  # type: ignore[arg-type]
        flat = passage_slots(documents)
        where_t = torch.tensor(where, dtype=torch.long).reshape(-1, 2)
        # (group, slot, passage) of every encoded pair.
        batch.features = PassageFeatures(pairs=feats, slots=torch.cat([where_t[flat[:, 0]], flat[:, 1:]], dim=1))
        return batch

    def passages(self, batch: GroupBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Passage vectors ``[G, S, N, dim]`` and passage mask ``[G, S, N]`` of a prepared batch."""
        features = batch.features
        assert isinstance(features, PassageFeatures), "prepare() the batch first"
        h, _ = self.pairs(features.pairs)
        slots = features.slots
        n = int(slots[:, 2].max()) + 1 if slots.numel() else 1
        return passage_tensor(h, slots, (*batch.mask.shape, n))

    def forward(self, batch: GroupBatch) -> RankingOutput:  # type: ignore[override]
        p, pmask = self.passages(batch)
        return RankingOutput(self.group_scores(p, pmask, batch.mask))

    @abc.abstractmethod
    def group_scores(self, p: torch.Tensor, pmask: torch.Tensor, dmask: torch.Tensor) -> torch.Tensor:
        """Document scores ``[G, S]`` from passage vectors ``[G, S, N, dim]``, passage mask ``[G, S, N]``
        and document mask ``[G, S]`` (differentiable; used by the group losses and dev evaluation)."""

    # -- inference ----------------------------------------------------------------------------
    def list_scores(self, p: torch.Tensor, pmask: torch.Tensor) -> torch.Tensor:
        """Final re-ranking scores ``[M]`` of one query's M documents (``p [M, N, dim]``)."""
        dmask = torch.ones((1, p.shape[0]), dtype=torch.bool, device=p.device)
        return self.group_scores(p[None], pmask[None], dmask)[0]

    @torch.inference_mode()
    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                      batch_size: int = 32) -> list[torch.Tensor]:
        """Scores of each query's documents: the passages of all documents (evenly spaced, no
        sampling) encoded together in length-sorted batches of ``batch_size`` pairs, then each
        query's head."""
        self.eval()
        texts = [t for docs in candidates for t in docs]
        documents = self.split_documents(texts, None)
        owner = [i for i, docs in enumerate(candidates) for _ in docs]
        flat_q = [queries[owner[d]] for d, doc in enumerate(documents) for _ in doc]
        flat_p = [p for doc in documents for p in doc]
        vectors = self.pairs.encode_sorted(flat_q, flat_p, batch_size)
        slots = passage_slots(documents)
        out: list[torch.Tensor] = []
        first_doc, first_passage = 0, 0
        for docs in candidates:
            m = len(docs)
            if m == 0:
                out.append(torch.empty(0, dtype=torch.float64))
                continue
            count = sum(len(documents[d]) for d in range(first_doc, first_doc + m))
            part = slots[first_passage:first_passage + count].clone()
            part[:, 0] -= first_doc
            n = int(part[:, 1].max()) + 1
            p, pmask = passage_tensor(vectors[first_passage:first_passage + count], part, (m, n))
            out.append(self.list_scores(p, pmask).double().cpu())
            first_doc += m
            first_passage += count
        return out

    def set_max_length(self, max_length: int) -> None:
        """Inference-time pair length (query + passage + 3), in tokens; passages are cut to fit."""
        if max_length < self.pairs.max_query_length + 4:
            raise RankkitError(f"--max-length {max_length} leaves no room for the passage")
        self.pairs.max_length = int(max_length)

    def set_max_passages(self, max_passages: int) -> None:
        """Inference-time passages per document (``rankkit rerank --max-passages``; PARADE uses 16):
        first and last windows kept, the rest evenly spaced. ``matrank-split``: pieces per document."""
        if max_passages < 1:
            raise RankkitError(f"--max-passages must be at least 1, got {max_passages}")
        key = "max_pieces" if hasattr(self.config, "max_pieces") else "max_passages"
        setattr(self.config, key, int(max_passages))


class PerDocumentModel(DocumentModel):
    """A document model whose score of a document depends on that document's passages only."""

    @abc.abstractmethod
    def document_scores(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Scores ``[D]`` of documents with passage vectors ``p [D, N, dim]`` and ``mask [D, N]``
        (every document has at least one real passage, its first)."""

    def group_scores(self, p: torch.Tensor, pmask: torch.Tensor, dmask: torch.Tensor) -> torch.Tensor:
        # Only real documents reach the head (padded slots have no passage: nothing to aggregate).
        g, s = dmask.nonzero(as_tuple=True)
        scores = self.document_scores(p[g, s], pmask[g, s])
        return scores.new_zeros(dmask.shape).index_put((g, s), scores)
