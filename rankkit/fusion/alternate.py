"""RepBERT's alternating merge of ranked lists (Zhan et al. 2020, Sec. 4.5.1, Eq. 6)."""

from __future__ import annotations

from typing import Sequence

Ranking = Sequence[tuple[str, float]]


def alternate_merge(lists: Sequence[Sequence[str]], k: int | None = None) -> list[str]:
    """Eq. 6: ``Truncate(Filter([d_a1, d_b1, d_a2, d_b2, ...]))``.

    Round-robin over the lists (A1, B1, C1, A2, B2, ...), keeping each docid's first (highest)
    occurrence and stopping after ``k`` documents. With the paper's example A=[a, c, d] and
    B=[b, a, c] the merged list is [a, b, c, a, d, c] and the result [a, b, c, d]. The order of
    the lists matters: A+B and B+A differ. A list that runs out is skipped; the others continue.
    """
    merged: list[str] = []
    seen: set[str] = set()
    longest = max((len(docs) for docs in lists), default=0)
    for position in range(longest):
        for docs in lists:
            if position >= len(docs):
                continue
            docid = docs[position]
            if docid in seen:
                continue
            seen.add(docid)
            merged.append(docid)
            if k is not None and len(merged) >= k:
                return merged
    return merged


def fuse_alternate(rankings: Sequence[Ranking | None], *, k: int | None = None) -> dict[str, float]:
    """Alternating merge of one query's rankings (trec_eval order) with rank-preserving scores.

    Scores are ``n - position`` (n, n-1, ..., 1 for n merged documents): distinct and strictly
    decreasing, so sorting by score (as :func:`rankkit.formats.write_run` does) reproduces the
    interleaving exactly, whatever the docids. A query missing from a run simply has no list there.
    """
    lists = [[docid for docid, _ in ranking] for ranking in rankings if ranking]
    merged = alternate_merge(lists, k)
    total = len(merged)
    return {docid: float(total - position) for position, docid in enumerate(merged)}
