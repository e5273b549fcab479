"""``set-encoder``: the Set-Encoder re-ranker (Schlatt et al., 2024, "Set-Encoder: Permutation-Invariant
Inter-Passage Attention for Listwise Passage Re-Ranking with Cross-Encoders", §3), a cross-encoder with inter-passage attention.

Input (§3.1): each candidate ``p_i`` of a query ``q`` is its own sequence ``[CLS] q [SEP] p_i [SEP]``
(:class:`~rankkit.models.cross_encoders.pair_encoders.CrossPairEncoder`'s tokenisation), positions starting at 0
in every sequence, so nothing encodes the order of the candidates. All sequences of a query go
through the encoder together, as one *set*.

Inter-passage attention (§3.2): in every self-attention layer, the keys and values of sequence
``i`` are its own tokens' with the [CLS] keys and values of every *other* sequence of the same
query appended::

    Attention(Q_i, K_i ⊕ K_{CLS,-i}, V_i ⊕ V_{CLS,-i})

and nothing else: no token sees another sequence's non-[CLS] tokens, sequences of different queries
in one batch never see each other, and padding (masked candidate slots, pad tokens) gets exactly
zero weight. The score is a linear layer on the final [CLS] vector (:class:`~rankkit.models.cross_encoders.mono.Mono`'s
head; ``--hidden N`` makes it an MLP). Because every sequence starts at position 0 and the appended
[CLS] keys form an unordered set, the scores are permutation-invariant (§5.3).

The encoder is any BERT-style Hugging Face model (the packaged MiniLM by default): each layer's
``attention.self`` is replaced by :class:`InterPassageSelfAttention`, which keeps the original
``query``/``key``/``value`` Linear modules (so checkpoints keep BERT's state-dict names) and computes
attention with :func:`torch.nn.functional.scaled_dot_product_attention` (fused kernels on GPU, which
is what makes groups of up to 100 candidates trainable, §4.1). The layers are driven by
:class:`SetPairEncoder` (embeddings, then attention -> attention output -> feed-forward per layer),
so the layout of the sets reaches the attention without going through transformers' mask code.

Training uses LCE (``listwise-ce``) by default, as §4.4; ``--loss ranknet --teacher RUN`` is the
paper's distillation stage (RankNet over every pair the teacher orders). Re-ranking scores each
query's candidate list as one set; a list longer than ``--max-set-size``
(:data:`~rankkit.models.cross_encoders.configs.MAX_SET_SIZE` by default) is split into deterministic,
order-independent sets (:func:`set_chunks`).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Mapping, NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rankkit.console import report_work
from rankkit.errors import RankkitError
from rankkit.models import backbone as bb
from rankkit.models.base import ActivationCheckpointing, from_canonical
from rankkit.models.canonical import canonical_orders, to_canonical
from rankkit.models.batching import record_mask
from rankkit.models.config import ModelConfig
from rankkit.models.cross_encoders.configs import SET_ENCODER, SetEncoderConfig
from rankkit.models.cross_encoders.mono import Mono
from rankkit.models.cross_encoders.pair_encoders import CrossPairEncoder
from rankkit.models.inputs import GroupBatch, PairFeatures

#: The authors' extra interaction token (lightning-ir's ``add_extra_token``).
INTERACTION_TOKEN = "[INT]"


class SetLayout(NamedTuple):
    """Which keys each of N flat sequences may attend to (built by :func:`set_layout`).

    ``members[n, s]`` is the flat row of slot ``s`` of sequence ``n``'s set (0 where the slot is
    empty); ``attend`` ``[N, L + S]`` is True for the sequence's own real tokens and for the [CLS]
    of every other real member of its set.
    """

    members: torch.Tensor
    attend: torch.Tensor


def set_layout(group: torch.Tensor, slot: torch.Tensor, token_mask: torch.Tensor) -> SetLayout:
    """The attention layout of flat sequences: sequence ``n`` is slot ``slot[n]`` of set ``group[n]``.

    ``token_mask`` ``[N, L]`` marks real tokens. Slots need not be contiguous (masked candidate
    slots of a training group simply have no sequence).
    """
    n = group.shape[0]
    sets = int(group.max()) + 1
    width = int(slot.max()) + 1
    table = torch.full((sets, width), -1, dtype=torch.long, device=group.device)
    table[group, slot] = torch.arange(n, device=group.device)
    if int((table >= 0).sum()) != n:
        raise ValueError("two sequences share the same (set, slot) position")
    members = table[group]  # [N, S]: the rows of each sequence's set
    others = torch.arange(width, device=group.device).unsqueeze(0) != slot.unsqueeze(1)
    attend = torch.cat([token_mask.bool(), (members >= 0) & others], dim=1)
    return SetLayout(members.clamp(min=0), attend)


class InterPassageSelfAttention(nn.Module):
    """§3.2: a BERT self-attention whose keys/values are the sequence's own plus the other [CLS] ones.

    Holds the original layer's ``query``, ``key`` and ``value`` projections under the same names.
    """

    def __init__(self, original: Any, num_heads: int, dropout: float, position: int = 0) -> None:
        super().__init__()
        self.query: nn.Linear = original.query
        self.key: nn.Linear = original.key
        self.value: nn.Linear = original.value
        self.num_heads = num_heads
        self.head_dim = self.query.out_features // num_heads
        self.dropout = dropout
        #: The token the other sequences attend to: 0, [CLS] (§3.2), or 1, the authors' [INT] token.
        self.position = position

    def forward(self, hidden: torch.Tensor, layout: SetLayout) -> torch.Tensor:  # type: ignore[override]
        """Context vectors ``[N, L, heads * head_dim]`` of ``hidden`` ``[N, L, H]`` under ``layout``."""
        n, length, _ = hidden.shape
        shape = (n, length, self.num_heads, self.head_dim)
        q = self.query(hidden).view(shape).transpose(1, 2)  # [N, h, L, d]
        k = self.key(hidden).view(shape).transpose(1, 2)
        v = self.value(hidden).view(shape).transpose(1, 2)
        # K_i ⊕ K_{CLS,-i}: the [CLS] (position 0; [INT] at 1) keys/values of the set's sequences, [N, h, S, d];
        # the sequence's own slot is masked out in layout.attend (it is already among its tokens).
        k_cls = k[:, :, self.position][layout.members].transpose(1, 2)
        v_cls = v[:, :, self.position][layout.members].transpose(1, 2)
        keys = torch.cat([k, k_cls], dim=2)
        values = torch.cat([v, v_cls], dim=2)
        mask = layout.attend[:, None, None, :]  # the same keys for every token of a sequence
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask,
                                             dropout_p=self.dropout if self.training else 0.0)
        return out.transpose(1, 2).reshape(n, length, self.num_heads * self.head_dim)


def _bert_layers(encoder: Any) -> list[Any]:
    """The transformer layers of a BERT-style encoder, or a clear error for any other architecture."""
    config = encoder.config
    layers = getattr(getattr(encoder, "encoder", None), "layer", None)
    ok = (
        layers is not None and hasattr(encoder, "embeddings") and not config.is_decoder
        and getattr(config, "position_embedding_type", "absolute") == "absolute"
        and all(hasattr(layer, name) for layer in layers for name in ("attention", "intermediate", "output"))
        and all(all(hasattr(layer.attention.self, p) for p in ("query", "key", "value"))
                or isinstance(layer.attention.self, InterPassageSelfAttention) for layer in layers)
    )
    if not ok:
        raise RankkitError(
            f"the Set-Encoder needs a BERT-style encoder (BERT, MiniLM, ELECTRA, RoBERTa with absolute "
            f"positions), not {type(encoder).__name__}")
    return list(layers)  # type: ignore[arg-type]  # checked just above


class SetPairEncoder(CrossPairEncoder, ActivationCheckpointing):
    """Pair tokenisation of :class:`CrossPairEncoder`; the encoder runs with inter-passage attention.

    :meth:`features` adds ``group`` (set index) and ``slot`` (position in the set) per pair. The
    layers are run here (not by the transformers model), so activation checkpointing is this
    module's own (:meth:`run_block` per layer).
    """

    drives_encoder_layers = True

    def __init__(self, encoder: Any, tokenizer: Any, max_query_length: int, max_length: int, *,
                 truncation: str = "pair", interaction_token: str | None = None) -> None:
        super().__init__(encoder, tokenizer, max_query_length, max_length, truncation=truncation,
                         interaction_token=interaction_token)
        config = encoder.config
        position = len(self.head_ids) - 1  # [CLS] at 0, or the interaction token right after it
        for layer in _bert_layers(encoder):
            if not isinstance(layer.attention.self, InterPassageSelfAttention):
                heads, dropout = int(config.num_attention_heads), float(config.attention_probs_dropout_prob)
                layer.attention.self = InterPassageSelfAttention(layer.attention.self, heads, dropout, position)
            layer.attention.self.position = position

    def features(self, queries: Sequence[str], texts: Sequence[str]) -> dict[str, torch.Tensor]:
        """Pairs with the same query text form one set, slots in input order (or :meth:`set_features`)."""
        index: dict[str, int] = {}
        group = [index.setdefault(q, len(index)) for q in queries]
        seen = [0] * len(index)
        slot = []
        for g in group:
            slot.append(seen[g])
            seen[g] += 1
        return self.set_features(queries, texts, group, slot)

    def set_features(self, queries: Sequence[str], texts: Sequence[str], group: Sequence[int],
                     slot: Sequence[int]) -> dict[str, torch.Tensor]:
        """Pair tensors with an explicit set layout: pair ``i`` is slot ``slot[i]`` of set ``group[i]``."""
        feats = super().features(queries, texts)
        feats["group"] = torch.tensor(list(group), dtype=torch.long)
        feats["slot"] = torch.tensor(list(slot), dtype=torch.long)
        return feats

    def forward(self, features: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Final [CLS] vectors ``[N, H]`` of the pairs, every layer with inter-passage attention."""
        if "group" not in features or "slot" not in features:
            raise ValueError("Set-Encoder features need 'group' and 'slot' (see set_features())")
        mask = features["attention_mask"]
        layout = set_layout(features["group"], features["slot"], mask)
        segments = features.get("token_type_ids")
        if segments is None:
            segments = torch.zeros_like(features["input_ids"])
        # ``set_layers`` is :class:`SetLayers` (``--backend onnx``: an ONNX Runtime session in its place).
        return self.set_layers(features["input_ids"], segments, layout.members, layout.attend), None

    @property
    def set_layers(self) -> nn.Module:
        """The encoder under a set layout (not a registered submodule, so the checkpoint's names stay BERT's)."""
        swapped = self._modules.get("set_layers")  # put there by rankkit.runtime.use_runtime
        if swapped is not None:
            return swapped
        runner = self.__dict__.get("_set_layers")
        if runner is None:
            runner = SetLayers(self.encoder)
            self.__dict__["_set_layers"] = runner
        # Not a submodule, so train()/eval() and --gradient-checkpointing reach it from here.
        runner.training, runner.checkpoint_blocks = self.training, self.checkpoint_blocks
        return runner  # type: ignore[no-any-return]


class SetLayers(nn.Module, ActivationCheckpointing):
    """§3.1-3.2 as one function of tensors: ``(input_ids, token_type_ids, members, attend) -> [CLS] [N, H]``.

    The set layout (:func:`set_layout`, data-dependent) is computed before and passed in, so this
    part has only symbolic shapes and exports to ONNX (``--backend onnx``).
    """

    def __init__(self, encoder: Any) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, members: torch.Tensor,
                attend: torch.Tensor) -> torch.Tensor:
        layout = SetLayout(members, attend)
        # No position_ids: each row is one sequence, so positions restart at 0 per sequence (§3.1).
        hidden = self.encoder.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        project = getattr(self.encoder, "embeddings_project", None)  # ELECTRA's embedding -> hidden width
        if project is not None:
            hidden = project(hidden)
        for layer in self.encoder.encoder.layer:
            hidden = self.run_block(self.layer_forward, layer, hidden, layout)
        return hidden[:, 0]  # type: ignore[no-any-return]

    @staticmethod
    def layer_forward(layer: Any, hidden: torch.Tensor, layout: SetLayout) -> torch.Tensor:
        """One BERT layer with inter-passage attention: attention -> attention output -> feed-forward."""
        attended = layer.attention.output(layer.attention.self(hidden, layout), hidden)
        return layer.output(layer.intermediate(attended), attended)


def add_interaction_token(encoder: Any, tokenizer: Any) -> None:
    """Give ``tokenizer`` the special token ``[INT]`` and ``encoder`` its embedding row, unless both have it.

    A new row starts as a copy of the ``[CLS]`` embedding (deterministic, and a token that already
    aggregates its sequence), then trains with the rest.
    """
    if INTERACTION_TOKEN not in tokenizer.get_vocab():
        tokenizer.add_tokens([INTERACTION_TOKEN], special_tokens=True)
    embeddings = encoder.get_input_embeddings()
    wanted = int(tokenizer.convert_tokens_to_ids(INTERACTION_TOKEN)) + 1
    if embeddings.weight.shape[0] < wanted:
        old_rows = embeddings.weight.shape[0]
        encoder.resize_token_embeddings(wanted)
        weight = encoder.get_input_embeddings().weight
        with torch.no_grad():
            weight[old_rows:wanted] = weight[int(tokenizer.cls_token_id)]


def set_chunks(texts: Sequence[str], limit: int) -> list[list[int]]:
    """Indices of ``texts`` split into sets of at most ``limit``, independent of the input order.

    One set when ``len(texts) <= limit``. Otherwise the texts are ordered by a hash of their
    content (BLAKE2b; ties by position, which only matters between identical texts) and dealt
    round-robin into ``ceil(n / limit)`` sets, so the sets are deterministic, about equally large,
    a mix of first-stage ranks, and a shuffled input gives the same sets of texts.
    """
    if limit < 1:
        raise RankkitError(f"set size limit must be at least 1, got {limit}")
    n = len(texts)
    if n <= limit:
        return [list(range(n))] if n else []
    digests = [hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts]
    order = sorted(range(n), key=lambda i: (digests[i], i))
    count = math.ceil(n / limit)
    return [sorted(order[c::count]) for c in range(count)]


class SetEncoder(Mono, spec=SET_ENCODER):
    """The Set-Encoder: Mono's linear [CLS] head on an encoder with inter-passage attention (§3)."""

    cross_pair_encoder = SetPairEncoder

    def __init__(self, encoder: Any, tokenizer: Any, config: ModelConfig) -> None:
        assert isinstance(config, SetEncoderConfig)
        if config.interaction_token == "int":
            add_interaction_token(encoder, tokenizer)
        super().__init__(encoder, tokenizer, config)
        if config.freeze_position_embeddings:
            # The authors' SetEncoderModule turns requires_grad off on the position table (set_encoder_module.py),
            # so the optimiser never holds it (rankkit.training.optim takes trainable parameters only).
            bb.position_embeddings(self.pairs.encoder).requires_grad_(False)

    @property
    def max_set_size(self) -> int:
        """Candidates scored together at re-ranking time; longer lists are split by :func:`set_chunks`."""
        assert isinstance(self.config, SetEncoderConfig)
        return int(self.config.max_set_size)

    @max_set_size.setter
    def max_set_size(self, value: int) -> None:
        assert isinstance(self.config, SetEncoderConfig)
        self.config.max_set_size = int(value)

    def interaction_token(self) -> str | None:
        assert isinstance(self.config, SetEncoderConfig)
        return INTERACTION_TOKEN if self.config.interaction_token == "int" else None

    def encoder_slots(self) -> list[Any]:
        """The encoder with inter-passage attention (:class:`SetLayers`); the set layout is built in
        torch from each batch and passed to the graph as two inputs, the score head stays in torch."""
        from rankkit.models.encoder_slots import EncoderSlot

        assert isinstance(self.pairs, SetPairEncoder)
        config = self.pairs.encoder.config

        def layout_of(feeds: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            # Probe batches: rows split into two sets, slots in order (members and attend as at inference).
            n = feeds["input_ids"].shape[0]
            group = torch.tensor([i % 2 for i in range(n)], dtype=torch.long)
            slot = torch.tensor([i // 2 for i in range(n)], dtype=torch.long)
            layout = set_layout(group, slot, feeds["attention_mask"])
            return {"members": layout.members, "attend": layout.attend}

        return [EncoderSlot("set-encoder", self.pairs, "set_layers", ("input_ids", "token_type_ids", "members", "attend"),
                            config.to_json_string(use_diff=False), int(config.max_position_embeddings),
                            int(config.vocab_size), call="vectors", extra_inputs=layout_of)]

    def prepare(self, batch: GroupBatch) -> GroupBatch:
        """Pair tensors of the real candidates; each group is one set, its slots the batch's slots."""
        _, texts, where = batch.flat_documents()
        assert isinstance(self.pairs, SetPairEncoder)
        feats = self.pairs.set_features([batch.queries[g] for g, _ in where], texts,
                                        [g for g, _ in where], [s for _, s in where])
        batch.features = PairFeatures(pairs=feats, where=torch.tensor(where, dtype=torch.long).reshape(-1, 2))
        return batch

    @torch.inference_mode()
    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                      batch_size: int = 32) -> list[torch.Tensor]:
        """Scores of each query's candidates, the list scored as one set (split by :func:`set_chunks`
        beyond :attr:`max_set_size`). Whole sets are packed into forward passes of about
        ``batch_size`` sequences (always at least one set); the packing never changes a score. Each list is
        scored in its canonical order (:func:`~rankkit.models.base.canonical_orders`) and mapped back, so the
        scores are permutation-invariant bit for bit in every precision and backend (§3.1's guarantee, which
        reduced precision alone would break: issue 37)."""
        self.eval()
        assert isinstance(self.pairs, SetPairEncoder)
        given = [list(texts) for texts in candidates]
        orders = canonical_orders(given)
        candidates = to_canonical(given, orders)
        sets = [(i, chunk) for i, texts in enumerate(candidates)
                for chunk in set_chunks(texts, self.max_set_size)]
        out = [torch.empty(len(texts), dtype=torch.float64) for texts in candidates]
        device = self.device
        start = 0
        while start < len(sets):
            end, size = start, 0
            while end < len(sets) and (end == start or size + len(sets[end][1]) <= batch_size):
                size += len(sets[end][1])
                end += 1
            flat_q, flat_t, group, slot = [], [], [], []
            for g, (i, chunk) in enumerate(sets[start:end]):
                for s, j in enumerate(chunk):
                    flat_q.append(queries[i])
                    flat_t.append(candidates[i][j])
                    group.append(g)
                    slot.append(s)
            feats = self.pairs.set_features(flat_q, flat_t, group, slot)
            record_mask(feats["attention_mask"])
            h, _ = self.pairs({k: v.to(device) for k, v in feats.items()})
            scores = self.list_scores(h, None).double().cpu()
            row = 0
            for i, chunk in sets[start:end]:
                out[i][torch.tensor(chunk, dtype=torch.long)] = scores[row:row + len(chunk)]
                row += len(chunk)
            start = end
            report_work(start, len(sets))
        return from_canonical(out, orders, given)
