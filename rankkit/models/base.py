"""The small interface every rankkit model implements, so the training engine never assumes a model family.

A model turns a :class:`~rankkit.training.batching.GroupBatch` (queries, each with S candidate
texts, labels, a mask and optional teacher scores) into tensors (:meth:`RankingModel.prepare`),
scores each group's candidates (:meth:`RankingModel.score`, ``[G, S]``) and returns a training loss
(:meth:`RankingModel.forward`): its own native loss, or one of the group losses of
:mod:`rankkit.training.losses` chosen with ``--loss``. Cross-encoders (mono, matrank, set-encoder,
PARADE) implement just this; bi-encoders additionally implement :class:`BiEncoder`, which adds
query/document encoding for dense indexes.

Saving writes the model's own files (``config.json``, ``model.safetensors``, tokenizer files);
:mod:`rankkit.training.checkpoint` adds ``rankkit.json`` and loads a folder back by model name.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import torch
import torch.nn.functional as F

from rankkit.errors import RankkitError
from rankkit.training import batching
from rankkit.training.batching import GroupBatch
from rankkit.training.losses import GROUP_LOSSES, group_loss


class RankingModel(torch.nn.Module, abc.ABC):
    """A trainable ranker registered in :data:`rankkit.models.MODELS` under :attr:`name`."""

    name: ClassVar[str]
    #: The loss used when ``--loss`` is not given, and the losses only this model implements.
    default_loss: ClassVar[str]
    native_losses: ClassVar[tuple[str, ...]] = ()
    default_max_query_length: ClassVar[int] = 32
    default_max_doc_length: ClassVar[int] = 256
    #: Optimiser defaults used when ``--lr``/``--weight-decay`` are not given.
    default_lr: ClassVar[float] = 2e-5
    default_weight_decay: ClassVar[float] = 0.01
    adam_betas: ClassVar[tuple[float, float]] = (0.9, 0.999)
    #: Names of model options ``rankkit train`` may set (``--doc-segment-id``, ``--no-dense``, ...).
    option_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, hparams: Mapping[str, Any]) -> None:
        super().__init__()
        #: JSON-serialisable settings stored in rankkit.json and restored on load.
        self.hparams: dict[str, Any] = dict(hparams)
        self.loss_name: str = self.default_loss

    # -- construction -------------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def for_training(cls, backbone: Path | None, options: Mapping[str, Any]) -> "RankingModel":
        """A fresh model to train, from ``backbone`` (``None``: the packaged default) and options."""

    @classmethod
    @abc.abstractmethod
    def load(cls, folder: Path, hparams: Mapping[str, Any]) -> "RankingModel":
        """Rebuild a model saved by :meth:`save` with the hyper-parameters from its rankkit.json."""

    @classmethod
    def zero_shot(cls, backbone: Path | None, options: Mapping[str, Any] | None = None) -> "RankingModel":
        """The model usable without rankkit training (only some models have one)."""
        raise RankkitError(f"model {cls.name!r} has no zero-shot form: pass a checkpoint written by rankkit train")

    @abc.abstractmethod
    def save(self, folder: Path) -> None:
        """Write config.json, model.safetensors and the tokenizer files into ``folder``."""

    # -- training -----------------------------------------------------------------------------
    def set_loss(self, name: str | None) -> None:
        """Select the training loss: ``None`` = :attr:`default_loss`."""
        name = name or self.default_loss
        if name not in self.native_losses and name not in GROUP_LOSSES:
            known = sorted(set(self.native_losses) | set(GROUP_LOSSES))
            raise RankkitError(f"model {self.name!r} cannot train with loss {name!r}; known: {', '.join(known)}")
        self.loss_name = name

    @abc.abstractmethod
    def prepare(self, batch: GroupBatch) -> GroupBatch:
        """Tokenise ``batch`` into ``batch.features`` (CPU tensors; the engine moves them)."""

    @abc.abstractmethod
    def score(self, batch: GroupBatch) -> torch.Tensor:
        """Scores of each group's own candidates, ``[G, S]`` (masked slots: any value)."""

    def native_loss(self, batch: GroupBatch) -> torch.Tensor:
        """The model's own loss (models with :attr:`native_losses` override this)."""
        # Reached only if a model lists native losses without overriding this: a bug in that model.
        raise TypeError(f"{self.name} declares native losses but does not implement native_loss()")

    def forward(self, batch: GroupBatch) -> torch.Tensor:  # type: ignore[override]
        """The training loss of a prepared batch (``forward`` so DDP hooks see the computation)."""
        if self.loss_name in self.native_losses:
            return self.native_loss(batch)
        return group_loss(self.loss_name, self.score(batch), batch.labels, batch.mask, batch.teacher)

    def loss(self, batch: GroupBatch) -> torch.Tensor:
        """The training loss of a prepared batch (same as calling the model; the engine calls the
        DDP wrapper instead so gradients synchronise)."""
        return self(batch)

    # -- inference ----------------------------------------------------------------------------
    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                      batch_size: int = 32) -> list[torch.Tensor]:
        """Re-ranking scores (float64, CPU; higher = better) of each query's candidate texts.

        ``rankkit rerank`` calls only this, so a model that can re-rank overrides it.
        """
        raise RankkitError(f"model {self.name!r} cannot re-rank")

    def set_max_length(self, max_length: int) -> None:
        """Inference-time input length in tokens (``rankkit rerank --max-length``); models with one override this."""
        raise RankkitError(f"model {self.name!r} has no adjustable input length")

    def set_max_passages(self, max_passages: int) -> None:
        """Inference-time passages per document (``rankkit rerank --max-passages``); document models override this."""
        raise RankkitError(f"--max-passages applies to document models only, not {self.name!r}")

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device


class BiEncoder(RankingModel):
    """A model scoring by the inner product of separately encoded query and document vectors.

    Cosine models (:attr:`normalized`) return unit vectors from :meth:`embed`, so the inner product
    is the score everywhere (training, faiss, search).
    """

    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """Length of the vectors :meth:`embed` returns."""

    @property
    @abc.abstractmethod
    def normalized(self) -> bool:
        """True when vectors are L2-normalised (cosine similarity)."""

    @abc.abstractmethod
    def tokenize(self, texts: Sequence[str], *, is_query: bool) -> list[list[int]]:
        """Unpadded token ids of each text, truncated to the query or document length."""

    @abc.abstractmethod
    def features(self, ids: Sequence[Sequence[int]], *, is_query: bool) -> dict[str, torch.Tensor]:
        """Padded input tensors for :meth:`embed` from :meth:`tokenize` output."""

    @abc.abstractmethod
    def embed(self, features: Mapping[str, torch.Tensor], *, is_query: bool) -> torch.Tensor:
        """Vectors ``[B, dim]`` of a padded batch (unit length when :attr:`normalized`)."""

    @property
    def similarity_scale(self) -> float:
        """Factor applied to inner products to make logits (1 unless a model defines a temperature)."""
        return 1.0

    def prepare(self, batch: GroupBatch) -> GroupBatch:
        _, texts, _ = batch.flat_documents()
        q = self.features(self.tokenize(batch.queries, is_query=True), is_query=True)
        d = self.features(self.tokenize(texts, is_query=False), is_query=False)
        batch.features = {**{f"q_{k}": v for k, v in q.items()}, **{f"d_{k}": v for k, v in d.items()}}
        return batch

    def _embed_batch(self, batch: GroupBatch) -> tuple[torch.Tensor, torch.Tensor]:
        q = self.embed({k[2:]: v for k, v in batch.features.items() if k.startswith("q_")}, is_query=True)
        d = self.embed({k[2:]: v for k, v in batch.features.items() if k.startswith("d_")}, is_query=False)
        return q, d

    def in_batch(self, batch: GroupBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """In-batch matrix ``[G, N]`` over the batch's N real candidates, with the positive mask
        (document is a positive of the query, matched by docid) and each query's own positive column."""
        q, d = self._embed_batch(batch)
        scores = (q @ d.T) * self.similarity_scale
        docids, _, where = batch.flat_documents()
        positive = torch.tensor(
            [[docid in batch.positives[g] for docid in docids] for g in range(len(batch))],
            dtype=torch.bool, device=scores.device,
        )
        column = {pos: j for j, pos in enumerate(where)}
        target = torch.tensor([column[(g, 0)] for g in range(len(batch))], dtype=torch.long, device=scores.device)
        return scores, positive, target

    def score(self, batch: GroupBatch) -> torch.Tensor:
        q, d = self._embed_batch(batch)
        _, _, where = batch.flat_documents()
        g_index = torch.tensor([g for g, _ in where], dtype=torch.long, device=q.device)
        s_index = torch.tensor([s for _, s in where], dtype=torch.long, device=q.device)
        per_doc = (q[g_index] * d).sum(dim=1) * self.similarity_scale
        scores = torch.zeros(batch.mask.shape, dtype=per_doc.dtype, device=q.device)
        return scores.index_put((g_index, s_index), per_doc)

    def set_max_length(self, max_length: int) -> None:
        """Document length in tokens for re-ranking (bi-encoders with a ``max_doc_length``)."""
        if not hasattr(self, "max_doc_length"):
            super().set_max_length(max_length)
        if max_length < 2:
            raise RankkitError(f"--max-length must be at least 2, got {max_length}")
        self.max_doc_length = int(max_length)

    @torch.inference_mode()
    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                      batch_size: int = 32) -> list[torch.Tensor]:
        """Embedding similarity (inner product x :attr:`similarity_scale`) of each query and its candidates."""
        flat = [t for texts in candidates for t in texts]
        if not flat:
            return [torch.empty(0, dtype=torch.float64) for _ in queries]
        q = self.encode(list(queries), is_query=True, batch_size=batch_size).double()
        d = self.encode(flat, is_query=False, batch_size=batch_size).double()
        out, start = [], 0
        for i, texts in enumerate(candidates):
            part = d[start:start + len(texts)]
            out.append((part @ q[i]) * self.similarity_scale)
            start += len(texts)
        return out

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], *, is_query: bool, batch_size: int = 64) -> torch.Tensor:
        """Vectors of ``texts`` (CPU, float32, input order), batched longest-first to cut padding.

        Puts the model in eval mode (no dropout).
        """
        self.eval()
        ids = self.tokenize(texts, is_query=is_query)
        order = batching.length_order([len(x) for x in ids])
        out = torch.empty((len(ids), self.dim), dtype=torch.float32)
        device = self.device
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            feats = self.features([ids[i] for i in rows], is_query=is_query)
            vectors = self.embed({k: v.to(device) for k, v in feats.items()}, is_query=is_query)
            out[torch.tensor(rows, dtype=torch.long)] = vectors.float().cpu()
        return out


def l2_normalize(vectors: torch.Tensor) -> torch.Tensor:
    """Unit-length rows (cosine similarity becomes the inner product)."""
    return F.normalize(vectors, p=2, dim=-1)
