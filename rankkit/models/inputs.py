"""What a model reads: collated training groups, tokenisation helpers and the typed feature bundles.

A :class:`GroupBatch` holds G queries with S candidate slots each (slot 0 the sampled positive);
:meth:`rankkit.models.base.RankingModel.prepare` tokenises it into ``batch.features``, one of the
:class:`Features` dataclasses below, and the model's ``forward`` reads them back by attribute.
The trainer (:mod:`rankkit.training.sampling`) builds batches; inference code builds them too
(dev evaluation, distillation teachers), which is why they live with the models.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field, fields, replace
from typing import Any, Sequence

import numpy as np
import torch

from rankkit.models.batching import pad_rows
from rankkit.models.pair_tokens import clip_texts


@dataclass
class Features:
    """Model input tensors; :meth:`to` moves every tensor (also inside dicts) to a device."""

    def to(self, device: torch.device | str) -> "Features":
        moved: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                value = value.to(device)
            elif isinstance(value, dict):
                value = {k: v.to(device) for k, v in value.items()}
            moved[f.name] = value
        return replace(self, **moved)


@dataclass
class TextFeatures(Features):
    """Separately encoded queries and documents (bi-encoders): padded tensors of each side."""

    queries: dict[str, torch.Tensor]
    documents: dict[str, torch.Tensor]


@dataclass
class PairFeatures(Features):
    """One tensor row per (query, candidate) pair; ``where`` ``[N, 2]`` = its (group, slot)."""

    pairs: dict[str, torch.Tensor]
    where: torch.Tensor


@dataclass
class PassageFeatures(Features):
    """One row per (query, passage) pair; ``slots`` ``[N, 3]`` = its (group, slot, passage)."""

    pairs: dict[str, torch.Tensor]
    slots: torch.Tensor


@dataclass
class GroupBatch:
    """A collated batch of G groups with S candidate slots each (slot 0 is the sampled positive).

    ``labels`` are graded relevance (the positive's label, at least 1; 0 for negatives), ``mask``
    marks real candidates, ``positives`` holds every positive docid of each group (in-batch
    matching is by docid), ``teacher`` optional teacher scores. ``features`` are the model's
    tensors, filled by :meth:`rankkit.models.base.RankingModel.prepare`.
    """

    qids: list[str]
    queries: list[str]
    docids: list[list[str]]
    texts: list[list[str]]
    labels: torch.Tensor
    mask: torch.Tensor
    positives: list[frozenset[str]]
    teacher: torch.Tensor | None = None
    features: Features | None = field(default=None)

    def __len__(self) -> int:
        return len(self.qids)

    @property
    def group_size(self) -> int:
        return int(self.mask.shape[1])

    def to(self, device: torch.device | str) -> "GroupBatch":
        """A copy with every tensor on ``device``."""
        return replace(
            self,
            labels=self.labels.to(device),
            mask=self.mask.to(device),
            teacher=None if self.teacher is None else self.teacher.to(device),
            features=None if self.features is None else self.features.to(device),
        )

    def flat_documents(self) -> tuple[list[str], list[str], list[tuple[int, int]]]:
        """The unmasked candidates in row-major order: ``(docids, texts, (group, slot) positions)``."""
        docids: list[str] = []
        texts: list[str] = []
        where: list[tuple[int, int]] = []
        for g, row in enumerate(self.mask.tolist()):
            for s, real in enumerate(row):
                if real:
                    docids.append(self.docids[g][s])
                    texts.append(self.texts[g][s])
                    where.append((g, s))
        return docids, texts, where


def candidate_batch(queries: Sequence[str], candidates: Sequence[Sequence[str]]) -> GroupBatch:
    """An inference batch: one group per query holding all its candidate texts (docids ``"0"``, ``"1"``, ...
    by position; empty slots masked; no labels), what a model's training ``forward`` scores at re-ranking."""
    width = max((len(texts) for texts in candidates), default=0)
    mask = torch.zeros((len(queries), width), dtype=torch.bool)
    for g, texts in enumerate(candidates):
        mask[g, : len(texts)] = True
    return GroupBatch(
        qids=[str(g) for g in range(len(queries))], queries=list(queries),
        docids=[[str(i) for i in range(len(texts))] + [""] * (width - len(texts)) for texts in candidates],
        texts=[list(texts) + [""] * (width - len(texts)) for texts in candidates],
        labels=torch.zeros((len(queries), width), dtype=torch.long), mask=mask,
        positives=[frozenset() for _ in queries])


def batch_rng(batch: GroupBatch) -> np.random.Generator:
    """A generator that is a pure function of the batch's qids and candidate docids (training-time
    passage sampling, slot shuffling: deterministic, independent of global RNG streams and of the process)."""
    digest = hashlib.sha256()
    for qid, docids in zip(batch.qids, batch.docids):
        digest.update(qid.encode("utf-8") + b"\x1e" + "\x1f".join(docids).encode("utf-8") + b"\x1d")
    return np.random.default_rng(np.frombuffer(digest.digest(), dtype=np.uint32))


#: One tokenizer call at a time in a process: a fast tokenizer's settings (truncation) are set on the shared Rust
#: object before each call, which another thread's call would find borrowed ("Already borrowed"); sessions
#: tokenise the next chunk on a thread while the main thread may tokenise too (dev evaluation, explain).
_TOKENIZING = threading.Lock()



def tokenize(tokenizer: Any, texts: Sequence[str], max_length: int, *,
             add_special_tokens: bool = True) -> list[list[int]]:
    """Token ids of each text, truncated to ``max_length`` (special tokens included), unpadded.

    Texts are cut to ``max_length * CHARS_PER_TOKEN`` characters first (memory bounded by the
    model's length, not the input's).
    """
    if not texts:
        return []
    with _TOKENIZING:
        encoded = tokenizer(
            clip_texts(texts, max_length), add_special_tokens=add_special_tokens,
            truncation=True, max_length=max_length,
            padding=False, return_attention_mask=False, return_token_type_ids=False,
        )
    return [list(ids) for ids in encoded["input_ids"]]


def pad(ids: Sequence[Sequence[int]], pad_id: int, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists into ``(input_ids, attention_mask)`` tensors of the longest length (or ``width``)."""
    longest = max((len(x) for x in ids), default=0)
    return pad_rows(ids, max(longest, width or 0), pad_id)
