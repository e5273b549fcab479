"""Pair encoders of the candidate-list re-rankers: what turns (query, candidate) pairs into vectors ``h_i``.

* ``cross`` (MatRank Eq. 1): ``h_i = encode_[CLS](q, t_i)``, the last-layer [CLS] vector of
  ``[CLS] q [SEP] t_i [SEP]`` through the backbone (segment ids 0 for the query part, 1 for the
  passage part), trained end to end;
* ``cross`` through a Hugging Face ``*ForSequenceClassification`` model (``mono``'s default since
  rankkit 0.2): the same pair, scored by the model's own classification head, so the checkpoint is
  a standard sequence classifier (:class:`ClassifierPairEncoder`);
* ``bi`` (a documented CPU variant, not in the paper): the backbone encodes query and passage
  separately (its sentence-transformers pooling, unit length: exactly the zero-shot vectors) and
  ``h_i = [q; t; q*t; |q-t|]``; the cosine ``q . t`` is also returned as a skip score. A frozen
  encoder stays in eval mode and its vectors depend on the token ids only: the trainer encodes
  every distinct text of a run once up front (:meth:`BiPairEncoder.precompute`, a table in memory
  or on disk, :mod:`rankkit.models.cross_encoders.frozen_vectors`), so every epoch costs only the
  head; texts outside that table (re-ranking) are cached in memory by token ids as they come.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from rankkit.console import progress_bar
from rankkit.errors import RankkitError
from rankkit.models.backbone import position_limit, reset_attention_type
from rankkit.models.base import l2_normalize
from rankkit.models.cross_encoders import frozen_vectors
from rankkit.models.cross_encoders.frozen_vectors import FrozenVectors, ids_key
from rankkit.models.batching import length_order, pad_rows
from rankkit.models.inputs import pad, tokenize
from rankkit.models.pair_tokens import assemble_pair, check_positions, segment_ids
from rankkit.models.pooling import cls_pool, pool

#: Cached ``bi`` vectors kept at most (a few hundred MB at 384 floats each).
CACHE_LIMIT = 200_000
#: Texts per length-sorted chunk when a trained bi-encoder encodes a step's passages.
BUCKET_ROWS = 16


class PairEncoder(nn.Module, abc.ABC):
    """Builds ``h_i`` (and an optional skip score) for flat lists of (query, passage) pairs."""

    dim: int
    max_length: int
    max_query_length: int

    @abc.abstractmethod
    def features(self, queries: Sequence[str], texts: Sequence[str]) -> dict[str, torch.Tensor]:
        """CPU tensors for :meth:`forward`; ``queries[i]`` goes with ``texts[i]``."""

    @abc.abstractmethod
    def forward(self, features: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(h [N, dim], skip [N] or None)`` for the pairs of ``features``."""

    @abc.abstractmethod
    def pair_lengths(self, queries: Sequence[str], texts: Sequence[str]) -> list[int]:
        """A per-pair length used to sort pairs into batches with little padding."""

    def pair_tokens(self, queries: Sequence[str], texts: Sequence[str]) -> "PairTokens":
        """Each pair tokenised once, with its length: what :meth:`features_for` builds a batch's tensors from
        (inference). By default the texts themselves, tokenised again per batch by :meth:`features`."""
        return PairTokens(self.pair_lengths(queries, texts), (list(queries), list(texts)))

    def features_for(self, tokens: "PairTokens", rows: Sequence[int], width: int) -> dict[str, torch.Tensor]:
        """CPU tensors for :meth:`forward` of pairs ``rows`` of ``tokens``, padded to at least ``width`` tokens."""
        queries, texts = tokens.data
        return self.features([queries[i] for i in rows], [texts[i] for i in rows])


@dataclass(frozen=True)
class PairTokens:
    """Pairs as a pair encoder tokenised them for inference: each pair's ``lengths`` and the encoder's own ``data``."""

    lengths: list[int]
    data: Any


#: How a (query, passage) pair is cut to its token budget (``truncation`` of the cross-encoders).
TRUNCATIONS = ("pair", "lightning-ir")


class CrossPairEncoder(PairEncoder):
    """MatRank Eq. 1: ``h_i = encode_[CLS](q, t_i)`` over ``[CLS] q [SEP] t_i [SEP]``.

    ``truncation``: ``pair`` (rankkit's) cuts the query to ``max_query_length`` tokens and lets the
    passage fill the rest of ``max_length``; ``lightning-ir`` cuts the query to ``max_query_length``
    and the passage to ``max_length - max_query_length - 3`` tokens (one less with an interaction
    token) each, decodes both cuts back to
    text and encodes the pair again, as lightning-ir's ``CrossEncoderTokenizer`` does (so its
    checkpoints score as in lightning-ir; a short query leaves its unused budget unused).
    ``interaction_token`` (e.g. ``[INT]``, the Set-Encoder authors' ``add_extra_token``) is placed
    right after ``[CLS]``: ``[CLS] [INT] q [SEP] t_i [SEP]``, inside the query segment.
    """

    def __init__(self, encoder: Any, tokenizer: Any, max_query_length: int, max_length: int, *,
                 truncation: str = "pair", interaction_token: str | None = None) -> None:
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.max_query_length = max_query_length
        self.max_length = max_length
        self.dim = int(encoder.config.hidden_size)
        self._uses_segments = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
        if truncation not in TRUNCATIONS:
            raise RankkitError(f"unknown truncation {truncation!r}; use {' or '.join(TRUNCATIONS)}")
        self.truncation = truncation
        self.interaction_token = interaction_token
        #: ``[CLS]`` and the interaction token, if any: what precedes the query.
        self.head_ids = [int(tokenizer.cls_token_id)]
        if interaction_token is not None:
            token_id = tokenizer.convert_tokens_to_ids(interaction_token)
            if token_id is None or token_id == tokenizer.unk_token_id:
                raise RankkitError(f"the tokenizer has no {interaction_token} token (the interaction token)")
            self.head_ids.append(int(token_id))
        if self.max_length < self.max_query_length + len(self.head_ids) + 3:
            raise RankkitError(f"max length {max_length} leaves no room for the passage after a "
                               f"{max_query_length}-token query")
        # BERT's NSP pooler is unused ([CLS] of the last layer is taken raw); frozen so the saved
        # checkpoint is complete and DDP does not wait for gradients that never come.
        pooler = getattr(encoder, "pooler", None)
        if isinstance(pooler, nn.Module):
            pooler.requires_grad_(False)

    def _ids(self, queries: Sequence[str], texts: Sequence[str]) -> list[tuple[list[int], int]]:
        """Token ids of each pair and the length of its query part (``[CLS] q [SEP]``)."""
        sep_id = int(self.tokenizer.sep_token_id)
        unique = sorted(set(queries))
        if self.truncation == "lightning-ir":
            doc_limit = self.max_length - self.max_query_length - len(self.head_ids) - 2
            q_ids = dict(zip(unique, self._cut_and_reencode(unique, self.max_query_length)))
            d_ids = self._cut_and_reencode(list(texts), doc_limit)
        else:
            q_ids = dict(zip(unique, tokenize(self.tokenizer, unique, self.max_query_length, add_special_tokens=False)))
            d_ids = tokenize(self.tokenizer, list(texts), self.max_length - 3, add_special_tokens=False)
        return [assemble_pair(self.head_ids, q_ids[q], d, sep_id, self.max_length) for q, d in zip(queries, d_ids)]

    def _cut_and_reencode(self, texts: list[str], limit: int) -> list[list[int]]:
        """lightning-ir's truncation: the first ``limit`` tokens decoded to text, then encoded again
        (``CrossEncoderTokenizer._truncate``; the second encoding can differ from the cut, e.g. where
        a cut word piece decodes and re-encodes as another piece)."""
        if not texts:
            return []
        cut = self.tokenizer.batch_decode(tokenize(self.tokenizer, texts, limit, add_special_tokens=False))
        # No special tokens, no limit beyond a generous one (memory): the re-encoding is not cut again.
        return tokenize(self.tokenizer, cut, 4 * limit + 8, add_special_tokens=False)

    def pair_lengths(self, queries: Sequence[str], texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids, _ in self._ids(queries, texts)]

    def pair_tokens(self, queries: Sequence[str], texts: Sequence[str]) -> PairTokens:
        pairs = self._ids(queries, texts)
        return PairTokens([len(ids) for ids, _ in pairs], pairs)

    def features_for(self, tokens: PairTokens, rows: Sequence[int], width: int) -> dict[str, torch.Tensor]:
        return self._tensors([tokens.data[i] for i in rows], width)

    def features(self, queries: Sequence[str], texts: Sequence[str]) -> dict[str, torch.Tensor]:
        return self._tensors(self._ids(queries, texts), 0)

    def _tensors(self, pairs: Sequence[tuple[list[int], int]], width: int) -> dict[str, torch.Tensor]:
        """Input tensors of tokenised pairs, padded to their longest or ``width`` (segment 1 from the passage on)."""
        longest = max((len(ids) for ids, _ in pairs), default=0)
        check_positions(longest, position_limit(getattr(self.encoder, "config", None)))
        input_ids, attention = pad_rows([ids for ids, _ in pairs], max(longest, width),
                                        int(self.tokenizer.pad_token_id or 0))
        feats = {"input_ids": input_ids, "attention_mask": attention}
        if self._uses_segments:
            # Passage tokens and the final [SEP]: from the end of the query part to the pair's last token.
            feats["token_type_ids"] = torch.from_numpy(segment_ids([head for _, head in pairs], attention.numpy()))
        return feats

    def forward(self, features: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        reset_attention_type(self.encoder)  # BigBird: each batch's attention depends on that batch only
        out = self.encoder(**features, return_dict=True)
        return cls_pool(out.last_hidden_state), None


class ClassifierPairEncoder(CrossPairEncoder):
    """The cross pair through a ``*ForSequenceClassification`` model: ``h_i`` is its relevance score (width 1).

    The pair is tokenised exactly as :class:`CrossPairEncoder` does (``[CLS] q [SEP] t_i [SEP]``,
    segment ids 0/1, as a Hugging Face tokenizer encodes a text pair); the head is the model's own.
    BERT's is ``w . tanh(W_p h_[CLS] + b_p) + b``, the pooled output of Devlin et al. (2019) and
    monoBERT (Nogueira and Cho, 2019, "Passage Re-ranking with BERT", §2). One label: the logit is
    the score (sentence-transformers' ``CrossEncoder`` without its activation); two labels (not
    relevant, relevant): ``log softmax`` of "relevant", monoBERT's score.
    """

    def __init__(self, classifier: Any, tokenizer: Any, max_query_length: int, max_length: int, *,
                 truncation: str = "pair", interaction_token: str | None = None) -> None:
        super().__init__(classifier, tokenizer, max_query_length, max_length, truncation=truncation,
                         interaction_token=interaction_token)
        self.dim = 1
        self.labels = int(classifier.config.num_labels)

    def forward(self, features: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        reset_attention_type(self.encoder)  # as CrossPairEncoder: BigBird's attention per batch
        logits = self.encoder(**features, return_dict=True).logits
        if self.labels == 2:
            return torch.log_softmax(logits, dim=-1)[:, 1:], None
        return logits[:, :1], None


class BiPairEncoder(PairEncoder):
    """``h_i = [q; t; q*t; |q-t|]`` from separately encoded, pooled unit vectors; skip = ``q . t``.

    ``pooling`` is the backbone's own sentence-transformers pooling (``mean`` for all-MiniLM-L6-v2,
    ``cls`` for BGE-style models), so the vectors are the backbone's zero-shot ones.
    """

    def __init__(self, encoder: Any, tokenizer: Any, max_query_length: int, max_doc_length: int,
                 frozen: bool, pooling: str = "mean") -> None:
        super().__init__()
        self.pooling = pooling
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.max_query_length = max_query_length
        self.max_length = max_doc_length
        self.frozen = frozen
        self.hidden = int(encoder.config.hidden_size)
        self.dim = 4 * self.hidden
        self._cache: dict[bytes, torch.Tensor] = {}
        #: Vectors of every text of a training run, encoded once (:meth:`precompute`).
        self.table: FrozenVectors | None = None
        if frozen:
            encoder.requires_grad_(False)
            encoder.eval()

    def train(self, mode: bool = True) -> "BiPairEncoder":
        super().train(mode)
        if self.frozen:
            self.encoder.eval()  # a frozen encoder never uses dropout, so cached vectors stay valid
        return self

    def pair_lengths(self, queries: Sequence[str], texts: Sequence[str]) -> list[int]:
        return [len(x) for x in tokenize(self.tokenizer, list(texts), self.max_length)]

    def features(self, queries: Sequence[str], texts: Sequence[str]) -> dict[str, torch.Tensor]:
        unique = sorted(set(queries))
        where = {q: i for i, q in enumerate(unique)}
        pad_id = int(self.tokenizer.pad_token_id or 0)
        q_ids, q_mask = pad(tokenize(self.tokenizer, unique, self.max_query_length), pad_id)
        d_ids, d_mask = pad(tokenize(self.tokenizer, list(texts), self.max_length), pad_id)
        return {"q_input_ids": q_ids, "q_attention_mask": q_mask, "d_input_ids": d_ids,
                "d_attention_mask": d_mask, "q_index": torch.tensor([where[q] for q in queries], dtype=torch.long)}

    @torch.no_grad()
    def precompute(self, queries: Sequence[str], texts: Sequence[str], *, batch_size: int = 64,
                   memory_limit: int | None = None, spill_dir: str | None = None) -> FrozenVectors:
        """Encode every distinct query and passage once into :attr:`table` (frozen encoders only).

        Texts are tokenised exactly as :meth:`features` does, deduplicated by token ids and
        encoded longest first in batches of ``batch_size`` (little padding) into a table held in
        memory up to ``memory_limit`` bytes (default
        :data:`~rankkit.models.cross_encoders.frozen_vectors.MEMORY_LIMIT`), else in a
        memory-mapped file under ``spill_dir`` (default: the system's temporary folder); a step then looks
        its vectors up instead of running the encoder. Vectors equal the per-step ones up to
        float rounding (batch composition and padding differ).
        """
        if not self.frozen:
            raise RankkitError("only a frozen encoder's vectors can be computed once (drop --tune-encoder)")
        ids = tokenize(self.tokenizer, sorted(set(queries)), self.max_query_length)
        ids += tokenize(self.tokenizer, sorted(set(texts)), self.max_length)
        unique: dict[bytes, list[int]] = {}
        for row in ids:
            unique.setdefault(ids_key(np.asarray(row, dtype=np.int64)), row)
        keys = list(unique)
        order = length_order([len(unique[k]) for k in keys])
        self.drop_table()
        limit = frozen_vectors.MEMORY_LIMIT if memory_limit is None else memory_limit
        table = FrozenVectors(len(keys), self.hidden, memory_limit=limit, spill_dir=spill_dir)
        device = next(self.encoder.parameters()).device
        pad_id = int(self.tokenizer.pad_token_id or 0)
        with progress_bar("text") as bar:
            task = bar.add_task("encoding frozen features", total=len(keys))
            for start in range(0, len(order), batch_size):
                chunk = [keys[i] for i in order[start:start + batch_size]]
                input_ids, mask = pad([unique[k] for k in chunk], pad_id)
                input_ids, mask = input_ids.to(device), mask.to(device)
                out = self.encoder(input_ids=input_ids, attention_mask=mask, return_dict=True)
                table.add(chunk, l2_normalize(pool(self.pooling, out.last_hidden_state, mask)))
                bar.update(task, advance=len(chunk))
        self.table = table
        return table

    def drop_table(self) -> None:
        """Forget the precomputed vectors (and delete their file)."""
        if self.table is not None:
            self.table.close()
            self.table = None

    def _embed(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Unit pooled vectors (segment ids 0, as all-MiniLM-L6-v2 was trained)."""
        if not self.frozen:
            return self._embed_bucketed(ids, mask)
        keys = [ids[r, : int(mask[r].sum())].cpu().numpy().tobytes() for r in range(ids.shape[0])]
        if self.table is not None:
            hashed = [ids_key(k) for k in keys]
            if all(h in self.table for h in hashed):
                return self.table.lookup(hashed).to(ids.device)
        todo = [r for r, k in enumerate(keys) if k not in self._cache]
        if todo:
            rows = torch.tensor(todo, dtype=torch.long, device=ids.device)
            with torch.no_grad():
                vectors = self._embed_bucketed(ids[rows], mask[rows]).float().cpu()
            if len(self._cache) + len(todo) > CACHE_LIMIT:
                self._cache.clear()
            for r, v in zip(todo, vectors):
                self._cache[keys[r]] = v
        return torch.stack([self._cache[k] for k in keys]).to(ids.device)

    def _embed_bucketed(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Unit pooled vectors of the encoder, in length-sorted chunks of :data:`BUCKET_ROWS` texts.

        Each chunk is cut to its own longest text, so a group of short passages with one long one
        no longer pays attention over the long one's width for all of them (MS MARCO passages: about
        3x less work per step at --max-doc-length 256); the vectors equal one padded batch's up to
        float rounding, in the input order.
        """
        lengths = mask.sum(dim=1)
        order = torch.tensor(length_order(lengths.tolist()), dtype=torch.long, device=ids.device)
        parts = []
        for start in range(0, ids.shape[0], BUCKET_ROWS):
            rows = order[start:start + BUCKET_ROWS]
            width = int(lengths[rows].max())
            sub_mask = mask[rows, :width]
            out = self.encoder(input_ids=ids[rows, :width], attention_mask=sub_mask, return_dict=True)
            parts.append(l2_normalize(pool(self.pooling, out.last_hidden_state, sub_mask)))
        return torch.cat(parts)[torch.argsort(order)]

    def forward(self, features: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        q = self._embed(features["q_input_ids"], features["q_attention_mask"])[features["q_index"]]
        t = self._embed(features["d_input_ids"], features["d_attention_mask"])
        h = torch.cat([q, t, q * t, (q - t).abs()], dim=-1)
        return h, (q * t).sum(dim=-1)


