"""Splitting long documents into passages, and encoding (query, passage) pairs for document re-rankers.

Two splitters share one window generator (:func:`window_starts`):

* :func:`split_ids`: PARADE §3.1 and §4.3: token-level sliding windows of ``window`` tokens every
  ``stride`` tokens (paper: 225 and 200). A document with more than ``max_passages`` windows
  (paper: 16) keeps its first and last window and samples the rest uniformly: at training time at
  random without replacement (given an ``rng``), at inference evenly spaced (no ``rng``), so
  re-ranking is deterministic. Kept windows stay in document order.
* :func:`split_pieces`: MatRank-Split §3.2: consecutive, non-overlapping pieces of at most ``L``
  tokens, the first ``K`` of them (the paper splits "at most 5 x 512 terms of a document into 5
  pieces": the document's head, no sampling).

Every document yields at least one passage (an empty document: one empty passage), so a real
document always has a real first passage.

:class:`PassagePairEncoder` is :class:`~rankkit.models.cross_encoders.pair_encoders.CrossPairEncoder` (MatRank
Eq. 1, PARADE Eq. 1: ``p_i = BERT_[CLS](q, P_i)`` over ``[CLS] q [SEP] P_i [SEP]``, segment ids 0/1)
fed with pre-split token ids instead of texts; :func:`passage_tensor` lays the flat passage
vectors out as ``[D, N, dim]`` with a passage mask ``[D, N]``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from rankkit.console import report_work
from rankkit.errors import RankkitError
from rankkit.models.cross_encoders.pair_encoders import CrossPairEncoder
from rankkit.models.batching import length_order, record_batch
from rankkit.models.inputs import tokenize

#: Tokens of a document read before splitting when no limit is given (the fast tokenizers take a
#: 32-bit length; real documents are far shorter).
WHOLE_DOCUMENT = 2**31 - 1


def window_starts(length: int, window: int, stride: int) -> list[int]:
    """Start offsets of the sliding windows over ``length`` tokens: 0, stride, 2*stride, ... until a
    window reaches the end (at least one window, even for an empty document)."""
    if window < 1 or stride < 1:
        raise RankkitError(f"window and stride must be at least 1, got {window} and {stride}")
    starts = [0]
    while starts[-1] + window < length:
        starts.append(starts[-1] + stride)
    return starts


def keep_passages(count: int, max_passages: int, rng: np.random.Generator | None = None) -> list[int]:
    """Indices (ascending) of the passages kept out of ``count``: all when ``count <= max_passages``,
    else the first and the last plus ``max_passages - 2`` of the others, sampled uniformly without
    replacement with ``rng``, or evenly spaced when ``rng`` is None (PARADE §4.3, after BERT-MaxP)."""
    if max_passages < 1:
        raise RankkitError(f"max passages must be at least 1, got {max_passages}")
    if count <= max_passages:
        return list(range(count))
    if max_passages == 1:
        return [0]
    if rng is None:
        # Rounded linspace(0, count - 1, max_passages): first and last included, all distinct
        # because the spacing (count - 1) / (max_passages - 1) exceeds 1.
        k = max_passages - 1
        return [(i * (count - 1) + k // 2) // k for i in range(max_passages)]
    middle = rng.choice(np.arange(1, count - 1), size=max_passages - 2, replace=False)
    return [0, *sorted(int(i) for i in middle), count - 1]


def split_ids(ids: Sequence[int], *, window: int = 225, stride: int = 200, max_passages: int = 16,
              rng: np.random.Generator | None = None) -> list[list[int]]:
    """PARADE's passages of a document's token ids: sliding windows, at most ``max_passages`` of them
    (first and last always kept; the rest sampled with ``rng`` or evenly spaced without one)."""
    starts = window_starts(len(ids), window, stride)
    return [list(ids[starts[i]:starts[i] + window]) for i in keep_passages(len(starts), max_passages, rng)]


def split_pieces(ids: Sequence[int], *, length: int = 128, max_pieces: int = 4) -> list[list[int]]:
    """MatRank-Split's text pieces (§3.2): the first ``max_pieces`` consecutive pieces of at most
    ``length`` tokens (the rest of the document is not read)."""
    if max_pieces < 1:
        raise RankkitError(f"max pieces must be at least 1, got {max_pieces}")
    starts = window_starts(len(ids), length, length)[:max_pieces]
    return [list(ids[s:s + length]) for s in starts]


def tokenize_documents(tokenizer: Any, texts: Sequence[str], max_tokens: int | None = None) -> list[list[int]]:
    """Token ids of whole documents (no special tokens), the first ``max_tokens`` when given."""
    return tokenize(tokenizer, list(texts), max_tokens or WHOLE_DOCUMENT, add_special_tokens=False)


class PassagePairEncoder(CrossPairEncoder):
    """``p_i = encode_[CLS](q, P_i)`` (PARADE Eq. 1) for pre-split passages given as token ids.

    Everything but building the ids is :class:`CrossPairEncoder`'s (padding, segment ids 0 for
    ``[CLS] q [SEP]`` and 1 for ``P_i [SEP]``, the frozen NSP pooler, [CLS] pooling); ``max_length``
    is the whole pair, a passage longer than its room is cut.
    """

    def _ids(self, queries: Sequence[str], texts: Sequence[Any]) -> list[tuple[list[int], int]]:
        """``[CLS] q [SEP] P_i [SEP]`` of each pair; ``texts[i]`` is passage i's token ids."""
        unique = sorted(set(queries))
        # The base class's pair for an empty text is exactly [CLS] q [SEP] [SEP]: its head is the
        # query part, tokenised and truncated the way the passage models tokenise queries.
        heads = {q: ids[:head] for q, (ids, head) in zip(unique, super()._ids(unique, [""] * len(unique)))}
        sep_id = int(self.tokenizer.sep_token_id)
        out = []
        for q, passage in zip(queries, texts):
            head = heads[q]
            out.append((head + list(passage)[: self.max_length - len(head) - 1] + [sep_id], len(head)))
        return out

    def encode(self, queries: Sequence[str], passages: Sequence[Sequence[int]]) -> torch.Tensor:
        """``[P, dim]`` [CLS] vectors of the pairs (one forward pass, on the encoder's device)."""
        device = next(self.encoder.parameters()).device
        feats = self.features(queries, passages)  # type: ignore[arg-type]
        return self({k: v.to(device) for k, v in feats.items()})[0]

    @torch.inference_mode()
    def encode_sorted(self, queries: Sequence[str], passages: Sequence[Sequence[int]],
                      batch_size: int) -> torch.Tensor:
        """:meth:`encode` for inference: pairs sorted longest first and batched (little padding),
        returned in input order."""
        lengths = self.pair_lengths(queries, passages)  # type: ignore[arg-type]
        order = length_order(lengths)
        out: torch.Tensor | None = None
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            record_batch(len(rows), sum(lengths[i] for i in rows), max(lengths[i] for i in rows))
            vectors = self.encode([queries[i] for i in rows], [passages[i] for i in rows])
            if out is None:
                out = vectors.new_empty((len(order), vectors.shape[-1]))
            out[torch.tensor(rows, dtype=torch.long, device=vectors.device)] = vectors
            report_work(start + len(rows), len(order))
        if out is None:
            return torch.empty((0, self.dim))
        return out


def passage_slots(documents: Sequence[Sequence[Sequence[int]]]) -> torch.Tensor:
    """``[P, 2]`` (document, passage) position of every passage of ``documents`` in flat order."""
    pairs = [(d, n) for d, passages in enumerate(documents) for n in range(len(passages))]
    return torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)


def passage_tensor(flat: torch.Tensor, slots: torch.Tensor, shape: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat passage vectors ``[P, dim]`` at ``slots`` ``[P, k]`` laid out as ``[*shape, dim]`` (zeros
    where no passage is) with the passage mask ``shape`` (True = real passage)."""
    index = tuple(slots[:, i].to(flat.device) for i in range(slots.shape[1]))
    p = flat.new_zeros((*shape, flat.shape[-1])).index_put(index, flat)
    mask = torch.zeros(tuple(shape), dtype=torch.bool, device=flat.device)
    mask[index] = True
    return p, mask
