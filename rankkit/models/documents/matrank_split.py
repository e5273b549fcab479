"""MatRank-Split (Luo et al., 2022, "MatRank: Text Re-ranking by Latent Preference Matrix", §3.2,
Eqs. 9-12): MatRank's preference matrix over the pieces of long documents.

* Pieces: each of a query's M documents is cut into its first K consecutive pieces
  (:func:`~rankkit.models.documents.splitting.split_pieces`; paper K=5, L=512, rankkit's CPU defaults
  K=4, L=128: ``--max-pieces``, ``--piece-length``); each piece is encoded as
  ``h = encode_[CLS](q, piece)`` (Eq. 1). L is the length of that encoder input, ``[CLS] q [SEP]
  piece [SEP]``, special tokens and query included, as the paper's L=512 must be on a 512-position
  BERT: every piece holds ``L - max_query_length - 3`` document tokens (the same for every query, so
  piece boundaries do not depend on the query's length). A piece length above the backbone's
  positions is refused when the model is built. Checkpoints written before this rule (no
  ``piece_includes_query`` in rankkit.json) keep their recorded meaning: L document tokens per piece.
* Eq. 9: ``S^ = [s^_gf]`` over all M x K pieces, ``s^_gf = MLP([h_g ; h_f])`` (Eq. 2, MatRank's
  split first layer and blockwise construction, reused from :mod:`rankkit.models.cross_encoders.matrank`), with
  ``s^_gf = 0`` when pieces g and f belong to the same document (the diagonal included) and for
  padded pieces (documents with fewer than K pieces).
* Eqs. 10-11: ``r^``, ``c^`` = row and column means of S^ over the query's real pieces (the paper's
  MK when every document has K pieces); ``maxpool`` takes the max of each document's real pieces:
  ``beta^ = softmax(maxpool(r^))``, ``omega^ = softmax(maxpool(-c^))`` over the real documents.
* Eq. 12: ``-(y . log beta^ + y . log omega^)`` (sign corrected as in MatRank's Eq. 8; several
  positives share the target mass) = :class:`~rankkit.models.losses.MatRankLoss`.
* Inference: Borda voting of the beta^ and omega^ rankings (:func:`~rankkit.models.cross_encoders.matrank.borda_vote`).

For group losses (``--loss listwise-ce`` etc.) and dev MRR the document score is the differentiable
``maxpool(r^) + maxpool(-c^)`` (``log beta^ + log omega^`` up to a per-query constant).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from rankkit.errors import RankkitError
from rankkit.models.backbone import position_limit
from rankkit.models.cross_encoders.matrank import borda_vote, masked_log_softmax, split_mlp_matrix, vote_scores
from rankkit.models.documents.base import DocumentModel
from rankkit.models.documents.configs import MATRANK_SPLIT
from rankkit.models.documents.passage_score import masked_max
from rankkit.models.documents.splitting import passage_slots, passage_tensor, split_pieces
from rankkit.models.inputs import GroupBatch
from rankkit.models.outputs import MatrixOutput, PreferenceMatrix, PreferenceOutput, RankingOutput


def piece_matrix(raw: torch.Tensor, pmask: torch.Tensor) -> MatrixOutput:
    """Eqs. 9-11 from a raw piece matrix ``raw [G, S*K, S*K]`` and the piece mask ``pmask [G, S, K]``.

    Returns S^ (same-document and padded entries zeroed), document-level ``r = maxpool(r^)`` and
    ``c = -maxpool(-c^)`` ``[G, S]`` (0 for documents without pieces), and ``log beta^``/``log omega^``
    over the documents that have pieces.
    """
    raw = raw.float()  # means and softmaxes in fp32 under --precision bf16/fp16 (no-op in fp32)
    g, s, k = pmask.shape
    real = pmask.reshape(g, s * k)
    document = torch.arange(s, device=raw.device).repeat_interleave(k)
    other_doc = document[:, None] != document[None, :]
    pair = real[:, :, None] & real[:, None, :] & other_doc
    S = torch.where(pair, raw, torch.zeros_like(raw))
    count = real.sum(dim=1, keepdim=True).clamp(min=1).to(S.dtype)
    r = (S.sum(dim=2) / count).reshape(g, s, k)
    c = (S.sum(dim=1) / count).reshape(g, s, k)
    doc_r = masked_max(r, pmask, dim=2)  # maxpool(r^) over each document's real pieces
    doc_neg_c = masked_max(-c, pmask, dim=2)  # maxpool(-c^)
    dmask = pmask.any(dim=2)
    return MatrixOutput(S, doc_r, -doc_neg_c, masked_log_softmax(doc_r, dmask), masked_log_softmax(doc_neg_c, dmask))


class MatRankSplit(DocumentModel, spec=MATRANK_SPLIT):
    """MatRank-Split: one preference matrix over every piece of a query's documents (Eqs. 9-12)."""

    def build_matrix_head(self, dim: int) -> None:
        hidden = int(self.config.hidden) or dim
        #: Eq. 2's MLP over ``[h_g ; h_f]`` (split at use into W_a, W_b, as in MatRank).
        self.mlp_in = nn.Linear(2 * dim, hidden)
        self.activation = nn.GELU()
        self.mlp_out = nn.Linear(hidden, 1)

    def raw_matrix(self, h: torch.Tensor) -> torch.Tensor:
        """Eq. 9's raw ``MLP([h_g ; h_f])`` over all pieces ``h [G, P, d]`` (MatRank's split MLP, blockwise)."""
        return split_mlp_matrix(h, self.mlp_in, self.mlp_out, self.activation)

    def passage_tokens(self) -> int:
        """Document tokens per piece (the whole input is at most ``--piece-length``)."""
        return self.config.piece_tokens()

    def build_head(self, dim: int) -> None:
        limit = position_limit(getattr(self.pairs.encoder, "config", None))
        whole = self.passage_tokens() + int(self.config.max_query_length) + 3
        if limit is not None and whole > limit:
            raise RankkitError(f"--piece-length {self.config.piece_length} makes {whole}-token piece inputs, more than "
                               f"the backbone's {limit} positions (max_position_embeddings): use --piece-length "
                               f"{limit} or less")
        self.build_matrix_head(dim)

    def split(self, ids: Sequence[int], rng: np.random.Generator | None) -> list[list[int]]:
        return split_pieces(ids, length=self.passage_tokens(), max_pieces=self.config.max_pieces)

    def matrix(self, p: torch.Tensor, pmask: torch.Tensor, dmask: torch.Tensor) -> MatrixOutput:
        """Eqs. 9-11 for piece vectors ``p [G, S, K, dim]`` (``dmask``: real documents, which are
        exactly the slots with pieces)."""
        g, s, k, d = p.shape
        raw = self.raw_matrix(p.reshape(g, s * k, d))
        return piece_matrix(raw, pmask & dmask[..., None])

    def forward(self, batch: GroupBatch) -> PreferenceOutput:  # type: ignore[override]
        """Eqs. 9-11; ``scores`` = ``maxpool(r^) + maxpool(-c^)`` (Eq. 12 is :class:`~rankkit.models.losses.MatRankLoss`)."""
        p, pmask = self.passages(batch)
        out = self.matrix(p, pmask, batch.mask)
        return PreferenceOutput(scores=out.r - out.c, matrix=out)

    def group_scores(self, p: torch.Tensor, pmask: torch.Tensor, dmask: torch.Tensor) -> torch.Tensor:
        out = self.matrix(p, pmask, dmask)
        return out.r - out.c

    def inference_scores(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        """The Borda vote of beta^ and omega^ (MatRank §3.1) of each query's documents."""
        return vote_scores(output, batch.mask)

    def list_scores(self, p: torch.Tensor, pmask: torch.Tensor) -> torch.Tensor:
        """The Borda vote of beta^ and omega^ for one query's documents (MatRank §3.1)."""
        out = self.explain(p, pmask)
        return borda_vote(out.log_beta[0], out.log_omega[0])

    def explain(self, p: torch.Tensor, pmask: torch.Tensor) -> MatrixOutput:
        """The piece matrix and its aggregates for one query's documents ``p [M, K, dim]``."""
        dmask = torch.ones((1, p.shape[0]), dtype=torch.bool, device=p.device)
        return self.matrix(p[None], pmask[None], dmask)

    def preference_matrix(self, query: str, texts: Sequence[str]) -> PreferenceMatrix:
        """S^ (Eq. 9) over the real pieces of one query's documents, in document then piece order,
        with the documents' beta^, omega^ and vote (the paper's Fig. 4)."""
        documents = self.split_documents(list(texts), None)
        pieces = [piece for doc in documents for piece in doc]
        vectors = self.pairs.encode([query] * len(pieces), pieces)
        slots = passage_slots(documents)
        p, pmask = passage_tensor(vectors, slots, (len(documents), max(len(doc) for doc in documents)))
        out = self.explain(p, pmask)
        real = pmask.reshape(-1).nonzero().squeeze(1)  # flat (document, piece) positions, in slot order
        S = out.S[0][real][:, real]
        return PreferenceMatrix(S, [(int(d), int(k)) for d, k in slots.tolist()], out.log_beta[0], out.log_omega[0],
                                borda_vote(out.log_beta[0], out.log_omega[0]))
