"""Linear interpolation of two runs' normalised scores (PARADE's ensemble, Li et al. 2023, Table 12)."""

from __future__ import annotations

from typing import Sequence

from rankkit.errors import RankkitError
from rankkit.fusion.normalize import missing_score, normalize_scores

Ranking = Sequence[tuple[str, float]]


def fuse_interpolate(
    rankings: Sequence[Ranking | None],
    *,
    alpha: float = 0.5,
    norm: str = "minmax",
    k: int | None = None,
) -> dict[str, float]:
    """``alpha * norm(A) + (1 - alpha) * norm(B)`` for exactly two runs A and B.

    A document missing from one run gets that run's :func:`missing_score` (0 under ``minmax``);
    a query missing from one run keeps the other run's order (scaled by its weight).
    """
    del k
    if len(rankings) != 2:
        raise RankkitError(f"interpolate fuses exactly 2 runs (A and B), got {len(rankings)}")
    if not 0.0 <= alpha <= 1.0:
        raise RankkitError(f"--alpha must be between 0 and 1, got {alpha}")
    first, second = (None if not r else normalize_scores(dict(r), norm) for r in rankings)
    floor_a = 0.0 if first is None else missing_score(first, norm)
    floor_b = 0.0 if second is None else missing_score(second, norm)
    fused: dict[str, float] = {}
    docids: dict[str, None] = {}
    for scores in (first, second):
        if scores is not None:
            docids.update(dict.fromkeys(scores))
    for docid in docids:
        total = 0.0
        if first is not None:
            total += alpha * first.get(docid, floor_a)
        if second is not None:
            total += (1.0 - alpha) * second.get(docid, floor_b)
        fused[docid] = total
    return fused
