"""What a model's ``forward`` returns: scores, plus what a model-specific objective needs.

Every output carries ``scores`` ``[G, S]`` (each group's own candidates; masked slots any value),
which the group losses of :mod:`rankkit.models.losses` consume. Richer outputs add the tensors of
a paper's own objective: the in-batch matrix of the bi-encoders (RepBERT Eq. 4, DenseTrans
Eqs. 6-7) and MatRank's preference matrix aggregates (Eq. 8). A loss declares the output type it
needs, so a model can train with every loss its output supports and with no other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # annotations only: model declarations name these classes without importing torch
    import torch


class MatrixOutput(NamedTuple):
    """MatRank's latent preference matrix and everything derived from it (Eqs. 3-7)."""

    S: torch.Tensor  # [G, M, M], zero diagonal, zero rows/columns for masked slots
    r: torch.Tensor  # [G, M] row means (Eq. 4)
    c: torch.Tensor  # [G, M] column means (Eq. 5)
    log_beta: torch.Tensor  # [G, M] log softmax(r) over real slots (Eq. 6)
    log_omega: torch.Tensor  # [G, M] log softmax(-c) over real slots (Eq. 7)


@dataclass
class RankingOutput:
    """Scores ``[G, S]`` of each group's candidates (higher = better)."""

    scores: torch.Tensor


@dataclass
class InBatchOutput(RankingOutput):
    """A bi-encoder's scores plus its in-batch matrix over the batch's N real candidates.

    ``in_batch`` ``[G, N]`` scores every query against every candidate of the batch, ``positive``
    ``[G, N]`` marks the query's positives (matched by docid) and ``target`` ``[G]`` is the column of
    the query's own sampled positive.
    """

    in_batch: torch.Tensor
    positive: torch.Tensor
    target: torch.Tensor


@dataclass
class PreferenceOutput(RankingOutput):
    """MatRank's (or MatRank-Split's) matrix aggregates; ``use_omega`` False for MatRank_row,
    ``use_beta`` False for the column-only ablation (``matrank-col``)."""

    matrix: MatrixOutput
    use_omega: bool = True
    use_beta: bool = True


@dataclass
class PassageScoreOutput(RankingOutput):
    """A passage-score document model's document scores plus every passage's own score.

    ``passage_scores`` ``[G, S, N]`` and ``passage_mask`` ``[G, S, N]`` (True = a real passage of a
    real document) let a loss train on passages with their document's label (BERT-MaxP's
    passage-level training).
    """

    passage_scores: torch.Tensor
    passage_mask: torch.Tensor


@dataclass
class PreferenceMatrix:
    """One query's latent preference matrix, for ``rankkit explain`` (MatRank Figs. 2 and 4).

    ``S`` ``[P, P]`` is over the matrix's items: a query's M candidates (MatRank, Eq. 3), or the real
    pieces of its documents (MatRank-Split, Eq. 9; zero between pieces of one document). ``items``
    gives each row's (candidate index, piece index) in the candidates' input order (piece 0 for
    passage models); ``log_beta``, ``log_omega`` and ``vote`` ``[M]`` are per candidate (Eqs. 6-7 /
    10-11 and the re-ranking score).
    """

    S: torch.Tensor
    items: list[tuple[int, int]]
    log_beta: torch.Tensor
    log_omega: torch.Tensor
    vote: torch.Tensor
