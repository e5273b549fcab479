"""Canonical order of a candidate list: how a permutation-invariant model scores every permutation alike.

A model whose scores are a function of the *set* of candidates (the Set-Encoder, Schlatt et al., 2024, "Set-Encoder:
Permutation-Invariant Inter-Passage Attention for Listwise Passage Re-Ranking with Cross-Encoders", §3.1; and the
point-wise and aggregate families) scores each list in one order fixed by its texts and maps the scores back, so a
permuted list gets bit-identical scores. Plain Python: the torch models and the ONNX scorer
(:mod:`rankkit.runtime.scorer`) share it.
"""

from __future__ import annotations

from typing import Sequence


def canonical_orders(candidates: Sequence[Sequence[str]]) -> list[list[int]]:
    """Each list's canonical order: indices sorted by text (the input position decides only between identical
    texts, which :func:`back_indices` gives one score). The same for every permutation of a list."""
    return [sorted(range(len(texts)), key=lambda i: (texts[i], i)) for texts in candidates]


def to_canonical(candidates: Sequence[Sequence[str]], orders: Sequence[Sequence[int]]) -> list[list[str]]:
    return [[texts[i] for i in order] for texts, order in zip(candidates, orders)]


def back_indices(order: Sequence[int], texts: Sequence[str]) -> list[int]:
    """For scores computed in canonical ``order``: the position of each input candidate's score, identical texts
    all taking the first of them in canonical order (in exact arithmetic they are equal)."""
    first: dict[str, int] = {}
    for k, position in enumerate(order):
        first.setdefault(texts[position], k)
    return [first[t] for t in texts]


__all__ = ["back_indices", "canonical_orders", "to_canonical"]
