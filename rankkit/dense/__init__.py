"""Dense retrieval with bi-encoders: chunked corpus encoding, faiss indexes, batched search.

Entry points (what ``rankkit index --kind dense`` and ``rankkit retrieve --model NAME`` call):
:func:`build_dense_index`, :func:`merge_dense_shards`, :func:`iter_dense_search` (streamed) and
:func:`dense_search` (a whole run).
"""

from rankkit.dense.faiss_index import build_dense_index, load_bi_encoder, load_dense_index, merge_dense_shards
from rankkit.dense.search import dense_search, iter_dense_search

__all__ = ["build_dense_index", "dense_search", "iter_dense_search", "load_bi_encoder", "load_dense_index",
           "merge_dense_shards"]
