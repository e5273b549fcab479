"""CombSUM and CombMNZ (Fox & Shaw, TREC-2 1993) over per-query normalised scores."""

from __future__ import annotations

from typing import Sequence

from rankkit.fusion.normalize import missing_score, normalize_scores

Ranking = Sequence[tuple[str, float]]


def _weighted_sums(
    rankings: Sequence[Ranking | None], norm: str, weights: Sequence[float] | None
) -> tuple[dict[str, float], dict[str, int]]:
    """Per document: ``sum_i w_i * s_i(d)`` and the number of runs that returned it.

    ``s_i(d)`` is run i's normalised score, or :func:`missing_score` when run i has the query but
    not the document. A run without the query at all contributes nothing (adding a constant to
    every document would change nothing for CombSUM but would distort CombMNZ's products).
    """
    normalized = [None if not ranking else normalize_scores(dict(ranking), norm) for ranking in rankings]
    floors = [0.0 if scores is None else missing_score(scores, norm) for scores in normalized]
    docids: dict[str, None] = {}
    for scores in normalized:
        if scores is not None:
            docids.update(dict.fromkeys(scores))
    sums: dict[str, float] = {}
    hits: dict[str, int] = {}
    for docid in docids:
        total = 0.0
        count = 0
        for index, scores in enumerate(normalized):
            if scores is None:
                continue
            weight = 1.0 if weights is None else float(weights[index])
            if docid in scores:
                total += weight * scores[docid]
                count += 1
            else:
                total += weight * floors[index]
        sums[docid] = total
        hits[docid] = count
    return sums, hits


def fuse_combsum(
    rankings: Sequence[Ranking | None],
    *,
    norm: str = "minmax",
    weights: Sequence[float] | None = None,
    k: int | None = None,
) -> dict[str, float]:
    """CombSUM: ``sum_i w_i * norm(s_i(d))`` (missing documents: see :mod:`rankkit.fusion.normalize`)."""
    del k
    sums, _ = _weighted_sums(rankings, norm, weights)
    return sums


def fuse_combmnz(
    rankings: Sequence[Ranking | None],
    *,
    norm: str = "minmax",
    weights: Sequence[float] | None = None,
    k: int | None = None,
) -> dict[str, float]:
    """CombMNZ: CombSUM times the number of runs that returned the document.

    Meant for non-negative scores (``minmax``): with ``zscore``/``none`` a negative sum becomes
    more negative the more runs agree on the document.
    """
    del k
    sums, hits = _weighted_sums(rankings, norm, weights)
    return {docid: total * hits[docid] for docid, total in sums.items()}
