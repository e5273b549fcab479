"""RepBERT's consistency factor C_{f,n} (Zhan et al. 2020, Sec. 4.4.3, Eq. 5).

C_{f,n} = 1/|{q}| * sum_q |D_{f,q,n} ∩ D_{REF,q,1000}| / |D_{f,q,n}|: how much of a run's top n
the reference run (in the paper the official BM25 top-1000 that trained the re-ranker) also
retrieved. 1 means no train/test mismatch for a re-ranker trained on the reference, 0 the largest.

Conventions (the paper assumes both runs cover the same queries):

* Top-n is taken in trec_eval order (score descending, ties by docid descending).
* |D_{f,q,n}| is the number of documents the run actually has up to n (a run with 80 documents
  and n = 100 is divided by 80), exactly as in Eq. 5.
* A query of the run that the reference lacks counts as 0 (the reference retrieved nothing for
  it); a query only in the reference is skipped (0/0: the run has nothing to be consistent about).
  ``common_only=True`` averages over queries in both runs instead. Both lists are reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from rankkit.errors import RankkitError
from rankkit.formats.runs import sort_ranking

RunLike = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class ConsistencyResult:
    """C_{f,n} at one depth n, with the per-query proportions it averages."""

    depth: int
    value: float
    per_query: dict[str, float]

    @property
    def queries(self) -> int:
        """Number of queries averaged over."""
        return len(self.per_query)


@dataclass(frozen=True)
class ConsistencyReport:
    """Results at each requested depth, plus which queries only one of the runs has."""

    ref_depth: int
    results: list[ConsistencyResult]
    run_only: list[str] = field(default_factory=list)
    reference_only: list[str] = field(default_factory=list)
    common_only: bool = False


def _top(docs: Mapping[str, float], n: int) -> list[str]:
    return [docid for docid, _ in sort_ranking(docs)[:n]]


def consistency(
    run: RunLike,
    reference: RunLike,
    depths: Sequence[int],
    *,
    ref_depth: int = 1000,
    common_only: bool = False,
) -> ConsistencyReport:
    """C_{f,n} (Eq. 5) of ``run`` against the top ``ref_depth`` of ``reference`` at every depth n.

    See the module docstring for how queries present in only one run are handled.
    """
    if not depths:
        raise RankkitError("give at least one --depth")
    for n in (*depths, ref_depth):
        if n < 1:
            raise RankkitError(f"depths must be at least 1, got {n}")
    run_only = [qid for qid, docs in run.items() if docs and not reference.get(qid)]
    reference_only = [qid for qid, docs in reference.items() if docs and not run.get(qid)]
    reference_sets = {qid: set(_top(docs, ref_depth)) for qid, docs in reference.items() if docs}
    deepest = max(depths)
    run_tops: dict[str, list[str]] = {}
    for qid, docs in run.items():
        if not docs or (common_only and qid not in reference_sets):
            continue
        run_tops[qid] = _top(docs, deepest)
    if not run_tops:
        raise RankkitError("the run and the reference have no query in common" if common_only
                           else "the run has no documents")
    results: list[ConsistencyResult] = []
    for n in depths:
        per_query: dict[str, float] = {}
        for qid, top in run_tops.items():
            head = top[:n]
            ref = reference_sets.get(qid, set())
            per_query[qid] = sum(1 for docid in head if docid in ref) / len(head)
        value = math.fsum(per_query.values()) / len(per_query)
        results.append(ConsistencyResult(n, value, per_query))
    return ConsistencyReport(ref_depth, results, run_only, reference_only, common_only)


def consistency_factor(run: RunLike, reference: RunLike, depth: int, *, ref_depth: int = 1000) -> float:
    """C_{f,n} (Eq. 5) at one depth n; see :func:`consistency` for the conventions."""
    return consistency(run, reference, [depth], ref_depth=ref_depth).results[0].value


__all__ = ["ConsistencyReport", "ConsistencyResult", "consistency", "consistency_factor"]
