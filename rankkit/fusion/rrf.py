"""Reciprocal rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009)."""

from __future__ import annotations

from typing import Sequence

Ranking = Sequence[tuple[str, float]]


def fuse_rrf(
    rankings: Sequence[Ranking | None],
    *,
    rrf_k: float = 60.0,
    weights: Sequence[float] | None = None,
    k: int | None = None,
) -> dict[str, float]:
    """``RRF(d) = sum_i w_i / (rrf_k + rank_i(d))`` with ``rank_i`` 1-based, weights default 1.

    ``rank_i(d)`` is the position of ``d`` in run i sorted the trec_eval way (score descending,
    ties by docid descending), not the file's rank column; ranx also ranks by sorted score (its
    tie order is unspecified), so both agree whenever a run has no tied scores. A document a run
    did not return gets nothing from that run. ``k`` (output depth) is applied by the caller.
    """
    del k
    fused: dict[str, float] = {}
    for index, ranking in enumerate(rankings):
        if not ranking:
            continue
        weight = 1.0 if weights is None else float(weights[index])
        for rank, (docid, _) in enumerate(ranking, start=1):
            # 1/(k+r) first, then the weight: bit-identical to ranx' sum of 1/(k+r) when w == 1.
            fused[docid] = fused.get(docid, 0.0) + weight * (1.0 / (rrf_k + rank))
    return fused
