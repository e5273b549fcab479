"""PARADE (Li, Yates, MacAvaney, He and Sun, 2023, "PARADE: Passage Representation Aggregation for
Document Reranking", §3, Eqs. 1-7): passage *representation* aggregation for document re-ranking.

Every document's passages are encoded into ``p_i = BERT_[CLS](q, P_i)`` (Eq. 1,
:class:`~rankkit.models.documents.splitting.PassagePairEncoder`); an aggregator turns ``p_1..p_n`` into one
document vector ``d`` and ``rel(q, D) = W_d d`` (Eq. 7, a linear layer without bias). Padded
passages never influence a score: each aggregator masks them (``-inf``-like fill for max and
softmax, zeros for sums, key padding for the transformer).

* ``parade-max`` (Eq. 2): ``d[j] = max_i p_i[j]``, element-wise;
* ``parade-avg`` (§3.3): ``d = (1/n) sum_i p_i``;
* ``parade-sum`` (§3.3): ``d = sum_i p_i``;
* ``parade-attn`` (Eqs. 3-4): ``w = softmax(W p_1, ..., W p_n)``, ``d = sum_i w_i p_i``;
* ``parade-cnn`` (§3.3-3.4): 4 layers of width-2, stride-2 convolutions (``dim -> dim``, ReLU)
  over the passage sequence (zero-padded to a multiple of 16), each halving it; a FFN with one
  hidden layer (``--hidden``, default ``dim``) scores every output vector of every layer and the
  document score is the sum of those scores (§3.4, footnote 3);
* ``parade-transformer`` (Eqs. 5-7): ``(emb_[CLS], p_1, ..., p_n)`` plus learned position
  embeddings (as in the authors' implementation, so passage order is visible; one per passage up to
  ``--position-passages``, default the training ``--max-passages``: declare more to score more
  passages at inference than were trained on, PARADE Table 10; those extra positions stay at their
  random initialisation; ``--position-passages none``: no position embeddings, the aggregator sees an
  unordered set of passages and any inference passage count uses trained weights only) through 2 randomly
  initialised post-LayerNorm transformer encoder layers with the backbone's width, heads,
  feed-forward size and dropout (ReLU FFN, Eqs. 5-6); ``d`` is the output at ``emb_[CLS]``.
  ``emb_[CLS]`` starts as the backbone's [CLS] token embedding and is trained.

The paper trains with a pairwise hinge loss (``--loss hinge``); the default is the softmax
cross-entropy of the positive among its group's documents (``listwise-ce``).
"""

from __future__ import annotations

import abc
import math

import torch
import torch.nn.functional as F
from torch import nn

from rankkit.errors import RankkitError

from rankkit.models.base import ActivationCheckpointing
from rankkit.models.documents.base import PerDocumentModel
from rankkit.models.documents.configs import (PARADE_ATTN, PARADE_AVG, PARADE_CNN, PARADE_MAX, PARADE_SUM,
                                              PARADE_TRANSFORMER)
from rankkit.models.documents.passage_score import masked_max

#: PARADE-CNN: "we stack 4 layers of CNN, which halve the number of representations in each layer".
CNN_LAYERS = 4
#: PARADE-Transformer: "two randomly initialized transformer encoder layers".
TRANSFORMER_LAYERS = 2


def masked_sum(p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``sum_i p_i`` over real passages: ``p [D, N, dim]``, ``mask [D, N]`` -> ``[D, dim]``."""
    return p.masked_fill(~mask[..., None], 0.0).sum(dim=1)


class Parade(PerDocumentModel):
    """A PARADE variant: an aggregator into ``d`` (:meth:`aggregate`) and Eq. 7's linear score."""

    def build_head(self, dim: int) -> None:
        self.build_aggregator(dim)
        #: Eq. 7: ``rel(q, D) = W_d d`` with ``W_d`` in R^d.
        self.score_layer = nn.Linear(dim, 1, bias=False)

    def build_aggregator(self, dim: int) -> None:
        """Layers of the aggregator (none for max, avg and sum)."""

    @abc.abstractmethod
    def aggregate(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The document vectors ``d [D, dim]`` of passage vectors ``p [D, N, dim]`` with ``mask [D, N]``."""

    def document_scores(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.score_layer(self.aggregate(p, mask)).squeeze(-1)


class ParadeMax(Parade, spec=PARADE_MAX):
    """PARADE-Max (Eq. 2): element-wise max over the real passages."""

    def aggregate(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return masked_max(p, mask[..., None], dim=1)


class ParadeAvg(Parade, spec=PARADE_AVG):
    """PARADE-Avg: the mean of the real passages (``w_i = 1/n``)."""

    def aggregate(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return masked_sum(p, mask) / mask.sum(dim=1, keepdim=True).clamp(min=1).to(p.dtype)


class ParadeSum(Parade, spec=PARADE_SUM):
    """PARADE-Sum: the sum of the real passages (``w_i = 1``)."""

    def aggregate(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return masked_sum(p, mask)


class ParadeAttn(Parade, spec=PARADE_ATTN):
    """PARADE-Attn (Eqs. 3-4): passage weights ``softmax(W p_i)`` over the real passages."""

    def build_aggregator(self, dim: int) -> None:
        #: Eq. 3's ``W`` in R^d.
        self.attention = nn.Linear(dim, 1, bias=False)

    def weights(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Eq. 3: ``w [D, N]``, zero on padded passages (a finite fill keeps gradients finite)."""
        logits = self.attention(p).squeeze(-1)  # bf16 under autocast: fill with its own dtype's minimum
        logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
        return torch.softmax(logits, dim=1) * mask.to(p.dtype)

    def aggregate(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return masked_sum(self.weights(p, mask)[..., None] * p, mask)  # Eq. 4


class ParadeCNN(Parade, spec=PARADE_CNN):
    """PARADE-CNN: 4 width-2 stride-2 convolution layers, every output scored by a FFN, scores summed."""

    def build_head(self, dim: int) -> None:
        # No Eq. 7 layer: the CNN's score is the sum of its FFN scores (an unused W_d would get no gradient).
        self.build_aggregator(dim)

    def build_aggregator(self, dim: int) -> None:
        hidden = int(self.config.hidden) or dim
        self.convs = nn.ModuleList(nn.Conv1d(dim, dim, kernel_size=2, stride=2) for _ in range(CNN_LAYERS))
        #: §3.4: "a FFN with one hidden layer is applied to every CNN representation".
        self.ffn = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def layers(self, p: torch.Tensor, mask: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each layer's outputs ``[D, N / 2^l, dim]`` with their mask (an output is real when one of
        its two inputs is); padded positions are zeros, whatever the padded input held."""
        unit = 2 ** CNN_LAYERS
        width = max(1, math.ceil(p.shape[1] / unit)) * unit
        x = F.pad(p.masked_fill(~mask[..., None], 0.0), (0, 0, 0, width - p.shape[1]))
        m = F.pad(mask, (0, width - mask.shape[1]))
        out = []
        for conv in self.convs:
            x = torch.relu(conv(x.transpose(1, 2))).transpose(1, 2)
            m = m[:, 0::2] | m[:, 1::2]
            x = x.masked_fill(~m[..., None], 0.0)
            out.append((x, m))
        return out

    def aggregate(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The last layer's first output (the whole document when it has at most 16 passages)."""
        return self.layers(p, mask)[-1][0][:, 0]

    def document_scores(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Sum over layers and real positions of ``FFN(x)`` (§3.4; Eq. 7's ``W_d`` is unused here)."""
        total = p.new_zeros(p.shape[0])
        for x, m in self.layers(p, mask):
            total = total + self.ffn(x).squeeze(-1).masked_fill(~m, 0.0).sum(dim=1)
        return total


class ParadeTransformer(Parade, ActivationCheckpointing, spec=PARADE_TRANSFORMER):
    """PARADE-Transformer (Eqs. 5-7): 2 transformer layers over ``(emb_[CLS], p_1..p_n)``."""

    def build_aggregator(self, dim: int) -> None:
        config = self.pairs.encoder.config
        embeddings = self.pairs.encoder.get_input_embeddings()
        cls_id = int(self.tokenizer.cls_token_id)
        #: ``emb_[CLS]``: BERT's [CLS] token embedding, trained from there.
        self.cls_embedding = nn.Parameter(embeddings.weight[cls_id].detach().clone())
        #: Learned passage positions (0 = [CLS]), N(0, 0.02) like BERT's; checkpoints written before
        #: --position-passages existed record none and have one per trained passage. ``--position-passages
        #: none`` (0): no table, so nothing tells the passages' order and no position is ever untrained.
        count = self.config.max_passages if self.config.position_passages is None else self.config.position_passages
        self.positions = nn.Parameter(torch.randn(int(count) + 1, dim) * 0.02) if count else None
        layer = nn.TransformerEncoderLayer(
            d_model=dim, nhead=int(config.num_attention_heads), dim_feedforward=int(config.intermediate_size),
            dropout=float(getattr(config, "hidden_dropout_prob", 0.1)), activation="relu", batch_first=True,
            norm_first=False, layer_norm_eps=float(getattr(config, "layer_norm_eps", 1e-12)),
        )
        # enable_nested_tensor off: the same math in training and inference (no fast-path repacking).
        self.aggregator = nn.TransformerEncoder(layer, TRANSFORMER_LAYERS, enable_nested_tensor=False)

    def set_max_passages(self, max_passages: int) -> None:
        """At most the position table's size: there is one learned position per passage slot (any
        number without positions)."""
        if self.positions is None:
            super().set_max_passages(max_passages)
            return
        trained = int(self.positions.shape[0]) - 1
        if max_passages > trained:
            raise RankkitError(f"--max-passages {max_passages} exceeds the {trained} passage positions "
                               f"{self.name} was trained with (train with --position-passages N to score up to N)")
        super().set_max_passages(max_passages)

    def aggregate(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n = p.shape[1]
        cls = self.cls_embedding.expand(p.shape[0], 1, -1)
        x = torch.cat([cls, p.masked_fill(~mask[..., None], 0.0)], dim=1)
        if self.positions is not None:
            x = x + self.positions[: n + 1]
        keep = torch.cat([mask.new_ones((p.shape[0], 1)), mask], dim=1)
        # Eqs. 5-6; d = output at [CLS]. Its 2 layers are one checkpointed block with --gradient-checkpointing.
        return self.run_block(self.aggregator, x, src_key_padding_mask=~keep)[:, 0]
