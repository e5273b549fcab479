"""Shared machinery of the candidate-list re-rankers (``mono``, ``matrank``, ``matrank-row``, ``set-encoder``).

Every such model turns each (query, candidate) pair into a vector ``h_i`` with a pair encoder
(:mod:`rankkit.models.cross_encoders.pair_encoders`: ``cross``, MatRank Eq. 1, by default; ``bi``,
rankkit's CPU variant) and a *head* turns the vectors of one query's candidates into scores. With
``--encoder bi`` the cosine ``q . t`` reaches the head as a skip connection with a learned weight,
and the head's last layer starts at zero, so an untrained model ranks exactly by the zero-shot
cosine.

Checkpoints (:class:`~rankkit.models.persistence.EncoderHeadFiles`): ``config.json``
(``model_type`` ``rankkit-<name>``, the settings and the backbone's transformers config),
``model.safetensors`` (every weight, backbone included) and the tokenizer files.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Sequence

import torch
from torch import nn

from rankkit.console import report_work
from rankkit.errors import RankkitError
from rankkit.models import backbone as bb
from rankkit.models.base import RankingModel, from_canonical
from rankkit.models.canonical import canonical_orders, to_canonical
from rankkit.models.config import ModelConfig
from rankkit.models.cross_encoders.configs import MATRANK_PAPER, CandidateListConfig
from rankkit.models.cross_encoders.pair_encoders import BiPairEncoder, CrossPairEncoder, PairEncoder
from rankkit.models.backbone import position_limit
from rankkit.models.batching import current_batching, plan_batches, record_mask
from rankkit.models.inputs import GroupBatch, PairFeatures
from rankkit.models.persistence import EncoderHeadFiles
from rankkit.models.pooling import POOLING_MODES
from rankkit.models.encoder_slots import EncoderSlot, hf_slot

ENCODERS = ("cross", "bi")
#: Initial weight of the cosine skip connection of the ``bi`` encoder: all-MiniLM-L6-v2 was
#: trained with cosine x 20 logits, so this starts the softmax at the backbone's own temperature.
SKIP_INIT = 20.0


class CandidateListModel(EncoderHeadFiles, RankingModel):
    """A re-ranker scoring a query's candidates from their pair vectors ``h_i`` (see module doc)."""

    paper: ClassVar[str] = MATRANK_PAPER

    config_class: ClassVar[type[ModelConfig]] = CandidateListConfig
    #: A candidate's vector h_i is its own pair's; the heads over them (a linear score, MatRank's row and column
    #: means, attention without positions) do not see the order. (List-wise, which concatenates, does.)
    permutation_invariant: ClassVar[bool] = True
    #: The ``cross`` pair encoder (the Set-Encoder swaps in one with inter-passage attention).
    cross_pair_encoder: ClassVar[type[CrossPairEncoder]] = CrossPairEncoder

    def __init__(self, encoder: Any, tokenizer: Any, config: ModelConfig) -> None:
        super().__init__(config)
        assert isinstance(config, CandidateListConfig)
        self.config: CandidateListConfig = config
        kind = config.encoder
        if kind not in ENCODERS:
            raise RankkitError(f"unknown encoder {kind!r}; use {' or '.join(ENCODERS)}")
        self.tokenizer = tokenizer
        qlen, dlen = config.max_query_length, config.max_doc_length
        if kind == "cross":
            self.pairs: PairEncoder = self.cross_pairs(encoder, tokenizer, config)
        else:
            self.pairs = BiPairEncoder(encoder, tokenizer, qlen, dlen, bool(config.freeze_encoder),
                                       config.bi_pooling or "mean")
        if kind == "cross" and config.freeze_encoder:
            # The encoder itself (base_model), not a sequence classifier's head around it.
            getattr(encoder, "base_model", encoder).requires_grad_(False)
        # A learned weight on the cosine (bi encoder only); a parameter either way so that every
        # checkpoint of a model has the same tensors.
        self.skip_weight = nn.Parameter(torch.tensor(SKIP_INIT if kind == "bi" else 0.0),
                                        requires_grad=kind == "bi")
        self.build_head(self.pairs.dim, int(config.hidden or 0))

    # -- construction -------------------------------------------------------------------------
    def cross_pairs(self, encoder: Any, tokenizer: Any, config: CandidateListConfig) -> CrossPairEncoder:
        """The ``cross`` pair encoder (:attr:`cross_pair_encoder`; ``mono`` may use a sequence classifier):
        pairs of at most ``3 + max_query_length + max_doc_length`` tokens, one more with an interaction token."""
        return self.cross_pair_encoder(encoder, tokenizer, *self.pair_limits(config), truncation=config.truncation,
                                       interaction_token=self.interaction_token())

    def pair_limits(self, config: CandidateListConfig) -> tuple[int, int]:
        """``(max_query_length, max_length)`` of the cross pairs."""
        extra = 0 if self.interaction_token() is None else 1
        return config.max_query_length, config.max_query_length + config.max_doc_length + 3 + extra

    def interaction_token(self) -> str | None:
        """A special token placed after ``[CLS]`` (the Set-Encoder's ``[INT]``); None for the others."""
        return None

    @abc.abstractmethod
    def build_head(self, dim: int, hidden: int) -> None:
        """Create the head's layers for ``h_i`` of width ``dim``."""

    @classmethod
    def for_training(cls, backbone: Path | None, config: ModelConfig) -> "CandidateListModel":
        """A fresh model on ``backbone``'s weights (packaged MiniLM by default) with a new head."""
        folder = bb.resolve_backbone(backbone)
        assert isinstance(config, CandidateListConfig)
        if config.encoder == "bi" and config.bi_pooling is None:
            pipeline = bb.read_sentence_transformers(folder)
            config.bi_pooling = pipeline.pooling if pipeline is not None else "mean"
            if config.bi_pooling not in POOLING_MODES:
                raise RankkitError(f"{folder}: sentence-transformers pooling {config.bi_pooling!r} is not supported "
                                   f"by --encoder bi ({', '.join(POOLING_MODES)} are)")
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), config)

    def set_max_length(self, max_length: int) -> None:
        """Inference-time length: the whole pair (cross) or the passage (bi), in tokens."""
        if isinstance(self.pairs, CrossPairEncoder):
            if max_length < self.pairs.max_query_length + 3 + len(self.pairs.head_ids):
                raise RankkitError(f"--max-length {max_length} leaves no room for the passage")
        elif max_length < 2:
            raise RankkitError(f"--max-length must be at least 2, got {max_length}")
        self.pairs.max_length = int(max_length)

    def encoder_slots(self) -> list[EncoderSlot]:
        """The pair encoder's backbone (cross pairs or separate bi-encoder texts); the head stays in torch."""
        return [hf_slot(self.pairs)]

    # -- training -----------------------------------------------------------------------------
    def prepare(self, batch: GroupBatch) -> GroupBatch:
        _, texts, where = batch.flat_documents()
        queries = [batch.queries[g] for g, _ in where]
        batch.features = PairFeatures(pairs=self.pairs.features(queries, texts),
                                      where=torch.tensor(where, dtype=torch.long).reshape(-1, 2))
        return batch

    def grouped(self, batch: GroupBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``h`` as ``[G, S, dim]`` and skip as ``[G, S]`` (zeros in masked slots) of a prepared batch."""
        features = batch.features
        assert isinstance(features, PairFeatures), "prepare() the batch first"
        h_flat, skip_flat = self.pairs(features.pairs)
        g, s = features.where[:, 0], features.where[:, 1]
        shape = tuple(batch.mask.shape)
        h = h_flat.new_zeros((*shape, h_flat.shape[-1])).index_put((g, s), h_flat)
        skip = None if skip_flat is None else skip_flat.new_zeros(shape).index_put((g, s), skip_flat)
        return h, skip

    # -- inference ----------------------------------------------------------------------------
    @abc.abstractmethod
    def list_scores(self, h: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        """Final re-ranking scores ``[M]`` of one query's M candidates (higher = better)."""

    @torch.inference_mode()
    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                      batch_size: int = 32) -> list[torch.Tensor]:
        """Scores of each query's candidate texts: pairs of all queries encoded together,
        longest first in batches of ``batch_size`` (little padding), then each query's head."""
        return self.score_prepared(self.prepare_rerank(queries, candidates, batch_size))

    def prepare_rerank(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                       batch_size: int) -> "PreparedPairs":
        """Every pair tokenised once, planned into batches (the session's policy: rows, token budget, length
        buckets) and padded; pinned for a GPU. A permutation-invariant model's lists in canonical order."""
        given = [list(texts) for texts in candidates]
        orders = canonical_orders(given) if self.permutation_invariant else None
        lists = to_canonical(given, orders) if orders is not None else given
        flat_q = [q for q, texts in zip(queries, lists) for _ in texts]
        flat_t = [t for texts in lists for t in texts]
        sizes = [len(texts) for texts in lists]
        if not flat_t:
            return PreparedPairs(sizes, [], orders, given)
        tokens = self.pairs.pair_tokens(flat_q, flat_t)
        limit = position_limit(getattr(getattr(self.pairs, "encoder", None), "config", None))
        pin = self.device.type == "cuda"
        batches = []
        for batch in plan_batches(tokens.lengths, current_batching(batch_size), limit):
            feats = self.pairs.features_for(tokens, batch.rows, batch.width)
            batches.append((batch.rows, {k: v.pin_memory() if pin else v for k, v in feats.items()}))
        return PreparedPairs(sizes, batches, orders, given)

    @torch.inference_mode()
    def score_prepared(self, prepared: "PreparedPairs") -> list[torch.Tensor]:
        """The pair vectors of every batch (kept on the device until all are done: one copy back), then each
        query's head (:meth:`list_scores`)."""
        self.eval()
        scores = self._list_scores(prepared)
        return scores if prepared.orders is None else from_canonical(scores, prepared.orders, prepared.candidates)

    def _list_scores(self, prepared: "PreparedPairs") -> list[torch.Tensor]:
        sizes = prepared.sizes
        if not prepared.batches:
            return [torch.empty(0) for _ in sizes]
        device = self.device
        total = sum(sizes)
        h_parts, skip_parts, order = [], [], []
        for rows, feats in prepared.batches:
            if "attention_mask" in feats:
                record_mask(feats["attention_mask"])
            elif "d_attention_mask" in feats:
                record_mask(feats["d_attention_mask"])
            h, skip = self.pairs({k: v.to(device, non_blocking=True) for k, v in feats.items()})
            h_parts.append(h)
            if skip is not None:
                skip_parts.append(skip)
            order += rows
            report_work(len(order), total)
        index = torch.tensor(order, dtype=torch.long, device=device)
        h_all = torch.cat(h_parts)
        h_all = h_all.new_empty(h_all.shape).index_copy_(0, index, h_all)
        skip_all = None
        if skip_parts:
            flat_skip = torch.cat(skip_parts)
            skip_all = flat_skip.new_empty(flat_skip.shape).index_copy_(0, index, flat_skip)
        out: list[torch.Tensor] = []
        start = 0
        for size in sizes:
            end = start + size
            part_skip = None if skip_all is None else skip_all[start:end]
            out.append(self.list_scores(h_all[start:end], part_skip).double().cpu()
                       if end > start else torch.empty(0, dtype=torch.float64))
            start = end
        return out


@dataclass
class PreparedPairs:
    """:meth:`CandidateListModel.prepare_rerank`'s result: each query's candidate count and the padded batches
    (rows into the flat pairs, CPU tensors)."""

    sizes: list[int]
    batches: list[tuple[list[int], dict[str, torch.Tensor]]]
    #: Each list's canonical order (a permutation-invariant model), or None; the lists as given.
    orders: list[list[int]] | None = None
    candidates: list[list[str]] = field(default_factory=list)
