"""Shared machinery of the candidate-list re-rankers (``mono``, ``matrank``, ``matrank-row``).

Every such model turns each (query, candidate) pair into a vector ``h_i`` and a *head* turns the
vectors of one query's candidates into scores. Two encoders build ``h_i``:

* ``cross`` (default; MatRank Eq. 1): ``h_i = encode_[CLS](q, t_i)``, the last-layer [CLS] vector
  of ``[CLS] q [SEP] t_i [SEP]`` through the backbone (segment ids 0 for the query part, 1 for the
  passage part), trained end to end;
* ``bi`` (a documented CPU variant, not in the paper): the backbone encodes query and passage
  separately (mean pooling, unit length, exactly the zero-shot sentence-transformers vectors) and
  ``h_i = [q; t; q*t; |q-t|]``; the cosine ``q . t`` is also passed to the head as a skip
  connection with a learned weight, and the head's last layer starts at zero, so an untrained
  model ranks exactly by the zero-shot cosine. The encoder is frozen by default (then it stays in
  eval mode and its vectors are cached in memory by token ids, so later epochs cost only the head).

Checkpoints are written like DenseTrans's: ``config.json`` (``model_type`` ``rankkit-<name>``, the
hyper-parameters and the backbone's transformers config), ``model.safetensors`` (every weight,
backbone included) and the tokenizer files.
"""

from __future__ import annotations

import abc
import json
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import safetensors.torch
import torch
from torch import nn
from transformers import AutoConfig, AutoModel

from rankkit.errors import InputError, RankkitError
from rankkit.models import backbone as bb
from rankkit.models.base import RankingModel, l2_normalize
from rankkit.models.pooling import cls_pool, mean_pool
from rankkit.training import batching
from rankkit.training.batching import GroupBatch

ENCODERS = ("cross", "bi")
#: Initial weight of the cosine skip connection of the ``bi`` encoder: all-MiniLM-L6-v2 was
#: trained with cosine x 20 logits, so this starts the softmax at the backbone's own temperature.
SKIP_INIT = 20.0
#: Cached ``bi`` vectors kept at most (a few hundred MB at 384 floats each).
CACHE_LIMIT = 200_000


class PairEncoder(nn.Module, abc.ABC):
    """Builds ``h_i`` (and an optional skip score) for flat lists of (query, passage) pairs."""

    dim: int

    @abc.abstractmethod
    def features(self, queries: Sequence[str], texts: Sequence[str]) -> dict[str, torch.Tensor]:
        """CPU tensors for :meth:`forward`; ``queries[i]`` goes with ``texts[i]``."""

    @abc.abstractmethod
    def forward(self, features: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(h [N, dim], skip [N] or None)`` for the pairs of ``features``."""

    @abc.abstractmethod
    def pair_lengths(self, queries: Sequence[str], texts: Sequence[str]) -> list[int]:
        """A per-pair length used to sort pairs into batches with little padding."""


class CrossPairEncoder(PairEncoder):
    """MatRank Eq. 1: ``h_i = encode_[CLS](q, t_i)`` over ``[CLS] q [SEP] t_i [SEP]``."""

    def __init__(self, encoder: Any, tokenizer: Any, max_query_length: int, max_length: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.max_query_length = max_query_length
        self.max_length = max_length
        self.dim = int(encoder.config.hidden_size)
        self._uses_segments = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
        if self.max_length < self.max_query_length + 4:
            raise RankkitError(f"max length {max_length} leaves no room for the passage after a "
                               f"{max_query_length}-token query")
        # BERT's NSP pooler is unused ([CLS] of the last layer is taken raw); frozen so the saved
        # checkpoint is complete and DDP does not wait for gradients that never come.
        pooler = getattr(encoder, "pooler", None)
        if isinstance(pooler, nn.Module):
            pooler.requires_grad_(False)

    def _ids(self, queries: Sequence[str], texts: Sequence[str]) -> list[tuple[list[int], int]]:
        """Token ids of each pair and the length of its query part (``[CLS] q [SEP]``)."""
        cls_id, sep_id = int(self.tokenizer.cls_token_id), int(self.tokenizer.sep_token_id)
        unique = sorted(set(queries))
        q_ids = dict(zip(unique, batching.tokenize(self.tokenizer, unique, self.max_query_length,
                                                   add_special_tokens=False)))
        budget = self.max_length - 3
        d_ids = batching.tokenize(self.tokenizer, list(texts), budget, add_special_tokens=False)
        out = []
        for q, d in zip(queries, d_ids):
            head = [cls_id, *q_ids[q], sep_id]
            out.append((head + d[: self.max_length - len(head) - 1] + [sep_id], len(head)))
        return out

    def pair_lengths(self, queries: Sequence[str], texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids, _ in self._ids(queries, texts)]

    def features(self, queries: Sequence[str], texts: Sequence[str]) -> dict[str, torch.Tensor]:
        pairs = self._ids(queries, texts)
        input_ids, attention = batching.pad([ids for ids, _ in pairs], int(self.tokenizer.pad_token_id or 0))
        feats = {"input_ids": input_ids, "attention_mask": attention}
        if self._uses_segments:
            segments = torch.zeros_like(input_ids)
            for row, (ids, head) in enumerate(pairs):
                segments[row, head: len(ids)] = 1  # passage tokens and the final [SEP]
            feats["token_type_ids"] = segments
        return feats

    def forward(self, features: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = self.encoder(**features, return_dict=True)
        return cls_pool(out.last_hidden_state), None


class BiPairEncoder(PairEncoder):
    """``h_i = [q; t; q*t; |q-t|]`` from separately encoded, mean-pooled unit vectors; skip = ``q . t``."""

    def __init__(self, encoder: Any, tokenizer: Any, max_query_length: int, max_doc_length: int,
                 frozen: bool) -> None:
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.max_query_length = max_query_length
        self.max_length = max_doc_length
        self.frozen = frozen
        self.hidden = int(encoder.config.hidden_size)
        self.dim = 4 * self.hidden
        self._cache: dict[bytes, torch.Tensor] = {}
        if frozen:
            encoder.requires_grad_(False)
            encoder.eval()

    def train(self, mode: bool = True) -> "BiPairEncoder":
        super().train(mode)
        if self.frozen:
            self.encoder.eval()  # a frozen encoder never uses dropout, so cached vectors stay valid
        return self

    def pair_lengths(self, queries: Sequence[str], texts: Sequence[str]) -> list[int]:
        return [len(x) for x in batching.tokenize(self.tokenizer, list(texts), self.max_length)]

    def features(self, queries: Sequence[str], texts: Sequence[str]) -> dict[str, torch.Tensor]:
        unique = sorted(set(queries))
        where = {q: i for i, q in enumerate(unique)}
        pad_id = int(self.tokenizer.pad_token_id or 0)
        q_ids, q_mask = batching.pad(batching.tokenize(self.tokenizer, unique, self.max_query_length), pad_id)
        d_ids, d_mask = batching.pad(batching.tokenize(self.tokenizer, list(texts), self.max_length), pad_id)
        return {"q_input_ids": q_ids, "q_attention_mask": q_mask, "d_input_ids": d_ids,
                "d_attention_mask": d_mask, "q_index": torch.tensor([where[q] for q in queries], dtype=torch.long)}

    def _embed(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Unit mean-pooled vectors (segment ids 0, as all-MiniLM-L6-v2 was trained)."""
        if not self.frozen:
            out = self.encoder(input_ids=ids, attention_mask=mask, return_dict=True)
            return l2_normalize(mean_pool(out.last_hidden_state, mask))
        keys = [ids[r, : int(mask[r].sum())].cpu().numpy().tobytes() for r in range(ids.shape[0])]
        todo = [r for r, k in enumerate(keys) if k not in self._cache]
        if todo:
            rows = torch.tensor(todo, dtype=torch.long, device=ids.device)
            sub_mask = mask[rows]
            width = int(sub_mask.sum(dim=1).max())
            with torch.no_grad():
                out = self.encoder(input_ids=ids[rows][:, :width], attention_mask=sub_mask[:, :width],
                                   return_dict=True)
                vectors = l2_normalize(mean_pool(out.last_hidden_state, sub_mask[:, :width])).float().cpu()
            if len(self._cache) + len(todo) > CACHE_LIMIT:
                self._cache.clear()
            for r, v in zip(todo, vectors):
                self._cache[keys[r]] = v
        return torch.stack([self._cache[k] for k in keys]).to(ids.device)

    def forward(self, features: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        q = self._embed(features["q_input_ids"], features["q_attention_mask"])[features["q_index"]]
        t = self._embed(features["d_input_ids"], features["d_attention_mask"])
        h = torch.cat([q, t, q * t, (q - t).abs()], dim=-1)
        return h, (q * t).sum(dim=-1)


class CandidateListModel(RankingModel):
    """A re-ranker scoring a query's candidates from their pair vectors ``h_i`` (see module doc)."""

    default_loss = "listwise-ce"
    default_max_query_length = 32
    #: Passage token budget; the cross pair is ``3 + query + passage`` tokens at most.
    default_max_doc_length = 224
    default_lr = 2e-5
    default_weight_decay = 0.01
    option_names: ClassVar[tuple[str, ...]] = ("encoder", "freeze_encoder", "hidden")
    #: Width of the head's hidden layer when ``--hidden`` is not given (``None``: model's own rule).
    default_hidden: ClassVar[int | None] = None
    #: The ``cross`` pair encoder (the Set-Encoder swaps in one with inter-passage attention).
    cross_pair_encoder: ClassVar[type[CrossPairEncoder]] = CrossPairEncoder

    def __init__(self, encoder: Any, tokenizer: Any, hparams: Mapping[str, Any]) -> None:
        super().__init__(hparams)
        kind = str(self.hparams["encoder"])
        if kind not in ENCODERS:
            raise RankkitError(f"unknown encoder {kind!r}; use {' or '.join(ENCODERS)}")
        self.tokenizer = tokenizer
        qlen, dlen = int(self.hparams["max_query_length"]), int(self.hparams["max_doc_length"])
        if kind == "cross":
            self.pairs: PairEncoder = self.cross_pair_encoder(encoder, tokenizer, qlen, qlen + dlen + 3)
        else:
            self.pairs = BiPairEncoder(encoder, tokenizer, qlen, dlen, bool(self.hparams["freeze_encoder"]))
        if kind == "cross" and self.hparams["freeze_encoder"]:
            encoder.requires_grad_(False)
        # A learned weight on the cosine (bi encoder only); a parameter either way so that every
        # checkpoint of a model has the same tensors.
        self.skip_weight = nn.Parameter(torch.tensor(SKIP_INIT if kind == "bi" else 0.0),
                                        requires_grad=kind == "bi")
        self.build_head(self.pairs.dim, int(self.hparams["hidden"]))

    # -- construction -------------------------------------------------------------------------
    @abc.abstractmethod
    def build_head(self, dim: int, hidden: int) -> None:
        """Create the head's layers for ``h_i`` of width ``dim``."""

    @classmethod
    def _hparams(cls, backbone: Path | None, options: Mapping[str, Any]) -> dict[str, Any]:
        kind = str(options.get("encoder") or "cross")
        if kind not in ENCODERS:
            raise RankkitError(f"unknown --encoder {kind!r}; use {' or '.join(ENCODERS)}")
        freeze = options.get("freeze_encoder")
        hidden = options.get("hidden")
        default_hidden = cls.default_hidden if cls.default_hidden is not None else 0
        return {
            "encoder": kind,
            # The bi variant exists to train in minutes: frozen unless asked otherwise.
            "freeze_encoder": bool(freeze) if freeze is not None else kind == "bi",
            "hidden": int(hidden) if hidden is not None else (256 if kind == "bi" else default_hidden),
            "max_query_length": int(options.get("max_query_length") or cls.default_max_query_length),
            "max_doc_length": int(options.get("max_doc_length") or cls.default_max_doc_length),
            "backbone": str(backbone) if backbone is not None else None,
        }

    @classmethod
    def for_training(cls, backbone: Path | None, options: Mapping[str, Any]) -> "CandidateListModel":
        """A fresh model on ``backbone``'s weights (packaged MiniLM by default) with a new head."""
        folder = bb.resolve_backbone(backbone)
        hparams = cls._hparams(backbone, options)
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), hparams)

    @classmethod
    def load(cls, folder: Path, hparams: Mapping[str, Any]) -> "CandidateListModel":
        config_path = folder / "config.json"
        weights = folder / "model.safetensors"
        for path in (config_path, weights):
            if not path.is_file():
                raise InputError(path, None, "no such file")
        try:
            saved = json.loads(config_path.read_text(encoding="utf-8"))
            enc_conf = dict(saved["encoder_config"])
            config = AutoConfig.for_model(enc_conf.pop("model_type"), **enc_conf)
        except (json.JSONDecodeError, KeyError, ValueError, TypeError) as err:
            raise InputError(config_path, None, f"not a rankkit {cls.name} config: {err}") from None
        model = cls(AutoModel.from_config(config), bb.load_tokenizer(folder), hparams)
        model.load_state_dict(safetensors.torch.load_file(str(weights)), strict=True)
        return model

    def save(self, folder: Path) -> None:
        encoder = self.pairs.encoder
        config = {"model_type": f"rankkit-{self.name}",
                  **{k: v for k, v in self.hparams.items() if k != "backbone"},
                  "encoder_config": encoder.config.to_dict()}
        (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        safetensors.torch.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        self.tokenizer.save_pretrained(str(folder))

    def set_max_length(self, max_length: int) -> None:
        """Inference-time length: the whole pair (cross) or the passage (bi), in tokens."""
        if isinstance(self.pairs, CrossPairEncoder):
            if max_length < self.pairs.max_query_length + 4:
                raise RankkitError(f"--max-length {max_length} leaves no room for the passage")
        elif max_length < 2:
            raise RankkitError(f"--max-length must be at least 2, got {max_length}")
        self.pairs.max_length = int(max_length)

    # -- training -----------------------------------------------------------------------------
    def prepare(self, batch: GroupBatch) -> GroupBatch:
        _, texts, where = batch.flat_documents()
        queries = [batch.queries[g] for g, _ in where]
        batch.features = {f"pair_{k}": v for k, v in self.pairs.features(queries, texts).items()}
        batch.features["where"] = torch.tensor(where, dtype=torch.long).reshape(-1, 2)
        return batch

    def represent(self, features: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``h`` and the skip score of flat pairs (``features`` from :meth:`PairEncoder.features`)."""
        return self.pairs({k[5:]: v for k, v in features.items() if k.startswith("pair_")})

    def grouped(self, batch: GroupBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``h`` as ``[G, S, dim]`` and skip as ``[G, S]`` (zeros in masked slots)."""
        h_flat, skip_flat = self.represent(batch.features)
        g, s = batch.features["where"][:, 0], batch.features["where"][:, 1]
        shape = tuple(batch.mask.shape)
        h = h_flat.new_zeros((*shape, h_flat.shape[-1])).index_put((g, s), h_flat)
        skip = None if skip_flat is None else skip_flat.new_zeros(shape).index_put((g, s), skip_flat)
        return h, skip

    # -- inference ----------------------------------------------------------------------------
    @abc.abstractmethod
    def list_scores(self, h: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        """Final re-ranking scores ``[M]`` of one query's M candidates (higher = better)."""

    @torch.inference_mode()
    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                      batch_size: int = 32) -> list[torch.Tensor]:
        """Scores of each query's candidate texts: pairs of all queries encoded together,
        longest first in batches of ``batch_size`` (little padding), then each query's head."""
        self.eval()
        flat_q = [q for q, texts in zip(queries, candidates) for _ in texts]
        flat_t = [t for texts in candidates for t in texts]
        if not flat_t:
            return [torch.empty(0) for _ in queries]
        order = batching.length_order(self.pairs.pair_lengths(flat_q, flat_t))
        device = self.device
        h_all: torch.Tensor | None = None
        skip_all: torch.Tensor | None = None
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            feats = self.pairs.features([flat_q[i] for i in rows], [flat_t[i] for i in rows])
            h, skip = self.pairs({k: v.to(device) for k, v in feats.items()})
            if h_all is None:
                h_all = h.new_empty((len(flat_t), h.shape[-1]))
                skip_all = None if skip is None else skip.new_empty(len(flat_t))
            index = torch.tensor(rows, dtype=torch.long, device=device)
            h_all[index] = h
            if skip_all is not None and skip is not None:
                skip_all[index] = skip
        assert h_all is not None
        out: list[torch.Tensor] = []
        start = 0
        for texts in candidates:
            end = start + len(texts)
            part_skip = None if skip_all is None else skip_all[start:end]
            out.append(self.list_scores(h_all[start:end], part_skip).double().cpu()
                       if end > start else torch.empty(0, dtype=torch.float64))
            start = end
        return out
