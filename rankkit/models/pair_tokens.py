"""How a (query, passage) pair becomes the token rows of a cross-encoder, without torch.

Shared by the torch models (:class:`rankkit.models.cross_encoders.pair_encoders.CrossPairEncoder`) and the ONNX
scorer (:mod:`rankkit.runtime.scorer`, which re-ranks without importing torch or transformers), so the two build
the same rows by construction: ``[CLS] q [SEP] t_i [SEP]`` (MatRank Eq. 1's input; monoBERT's, Nogueira and Cho,
2019, "Passage Re-ranking with BERT"), the query cut to its own budget and the passage filling the rest, segment
id 0 up to the query's ``[SEP]`` and 1 from the passage on.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from rankkit.errors import RankkitError

#: Characters kept per token of the length limit before tokenising: a word piece never spans more
#: (WordPiece turns a word over 100 characters into [UNK]), so the first ``max_length`` tokens are
#: unchanged while a 10 MB text costs memory for its first few thousand characters only.
CHARS_PER_TOKEN = 100


def clip_texts(texts: Sequence[str], max_length: int) -> list[str]:
    """``texts`` cut to ``max_length * CHARS_PER_TOKEN`` characters (the tokens kept are unchanged)."""
    limit = max(1, max_length) * CHARS_PER_TOKEN
    return [t if len(t) <= limit else t[:limit] for t in texts]


def assemble_pair(head_ids: Sequence[int], query_ids: Sequence[int], passage_ids: Sequence[int], sep_id: int,
                  max_length: int) -> tuple[list[int], int]:
    """``[*head_ids, q, SEP, t, SEP]`` within ``max_length`` tokens (the passage cut to what the query leaves),
    and the length of the query part (where segment 1 starts)."""
    head = [*head_ids, *query_ids, sep_id]
    return head + list(passage_ids[: max_length - len(head) - 1]) + [sep_id], len(head)


def segment_ids(query_parts: Sequence[int], mask: np.ndarray) -> np.ndarray:
    """Segment ids ``[rows, width]`` (int64): 1 from each row's passage (column ``query_parts[row]``) to its last
    real token, 0 elsewhere (the query part and the padding)."""
    columns = np.arange(mask.shape[1])[None, :]
    heads = np.asarray(query_parts, dtype=np.int64)[:, None]
    return ((columns >= heads) & mask.astype(bool)).astype(np.int64)


def check_positions(longest: int, limit: int | None) -> None:
    """Refuse an input longer than the backbone's absolute positions (else its lookup fails deep in the model)."""
    if limit is not None and longest > limit:
        raise RankkitError(f"a (query, text) input of {longest} tokens exceeds the backbone's {limit} positions "
                           f"(max_position_embeddings): lower the model's lengths (--max-doc-length, "
                           f"--max-query-length, --window, --piece-length or rerank --max-length)")


__all__ = ["CHARS_PER_TOKEN", "assemble_pair", "check_positions", "clip_texts", "segment_ids"]
