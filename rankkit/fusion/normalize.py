"""Per-query score normalisation used before score-based fusion (CombSUM, CombMNZ, interpolation).

Every run is normalised query by query over the documents that were read (after ``--depth``).

* ``minmax`` (ranx's ``min-max``): ``(s - min) / (max - min)`` -> [0, 1]. If every score of the query ties, each document
  gets 1.0 (they are all the run's best; 0 would make the run's only opinion invisible).
* ``zscore`` (ranx's ``zmuv``): ``(s - mean) / std`` with the population standard deviation;
  all-tied queries get 0.0.
* ``none``: scores are used as they are.

A document that a run did not return for a query gets :func:`missing_score`: 0.0 under ``minmax``
(the standard convention, Fox & Shaw's CombSUM and ranx), and the run's lowest score for that query
under ``zscore``/``none``, i.e. the document is treated as tied with the run's last one. (0 there
would rank unretrieved documents at the run's mean, or above everything a run with negative scores
such as log-probabilities returned.)
"""

from __future__ import annotations

import math
from typing import Mapping

from rankkit.errors import RankkitError

NORMALIZATIONS: tuple[str, ...] = ("minmax", "zscore", "none")
#: ranx's names of the same normalisations (``ranx.fuse(norm="min-max")``), accepted beside rankkit's own.
ALIASES: dict[str, str] = {"min-max": "minmax", "zmuv": "zscore"}


def check_norm(norm: str) -> str:
    """The normalisation ``norm`` names (rankkit's name, also for ranx's ``min-max`` and ``zmuv``), or a
    :class:`RankkitError`."""
    name = ALIASES.get(norm, norm)
    if name not in NORMALIZATIONS:
        spelled = ", ".join(f"{n} ({a})" if a else n for n, a in
                            ((n, next((k for k, v in ALIASES.items() if v == n), "")) for n in NORMALIZATIONS))
        raise RankkitError(f"unknown normalisation {norm!r}; choose one of: {spelled}")
    return name


def normalize_scores(scores: Mapping[str, float], norm: str) -> dict[str, float]:
    """Normalise one query's ``{docid: score}`` of one run (see the module docstring)."""
    norm = check_norm(norm)
    if not scores or norm == "none":
        return {docid: float(score) for docid, score in scores.items()}
    values = list(scores.values())
    if norm == "minmax":
        low, high = min(values), max(values)
        if high == low:
            return {docid: 1.0 for docid in scores}
        span = high - low
        return {docid: (score - low) / span for docid, score in scores.items()}
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    if std == 0.0:
        return {docid: 0.0 for docid in scores}
    return {docid: (score - mean) / std for docid, score in scores.items()}


def missing_score(normalized: Mapping[str, float], norm: str) -> float:
    """Score a run contributes for a document it did not return (0.0 under minmax, else its minimum)."""
    if ALIASES.get(norm, norm) == "minmax" or not normalized:
        return 0.0
    return min(normalized.values())
