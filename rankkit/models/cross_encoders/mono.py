"""``mono``: the point-wise cross-encoder (monoBERT-style; the "Point-wise" row of MatRank's Table 3).

Two heads score the pair ``[CLS] q [SEP] t_i [SEP]``:

* ``--hf-head`` (the default for ``--encoder cross --hidden 0``): the backbone's own Hugging Face
  sequence-classification head, for BERT ``w . tanh(W_p h_[CLS] + b_p) + b`` (the pooled output,
  as monoBERT: Nogueira and Cho, 2019, "Passage Re-ranking with BERT"). The checkpoint is a
  standard ``*ForSequenceClassification`` folder (config.json with ``architectures`` and
  ``num_labels`` 1, model.safetensors, tokenizer files) plus rankkit.json, so
  ``transformers.AutoModelForSequenceClassification`` and sentence-transformers' ``CrossEncoder``
  load it and give rankkit's scores (``CrossEncoder(..., activation_fn=torch.nn.Identity())``:
  by default it applies a sigmoid, which keeps the order). Any published cross-encoder folder is
  such a model: ``rankkit rerank --model mono --checkpoint DIR`` scores with it as is.
* ``--rankkit-head``: ``score(q, t_i) = w . h_i + b`` with ``h_i = encode_[CLS](q, t_i)`` the raw
  last-layer [CLS] (MatRank Eq. 1), or an MLP on it with ``--hidden``. rankkit 0.1 wrote only this
  form (``model_type`` ``rankkit-mono``); such checkpoints load and score as before. No Hugging
  Face head maps onto it exactly (BERT's adds the tanh pooler), so it stays rankkit's own format.

Trained with softmax cross-entropy of each group's positive against its negatives (LCE,
``listwise-ce``, the default; any group loss of :mod:`rankkit.models.losses` works, e.g. ``kl``
with ``--teacher``).

With ``--encoder bi`` the head is a small MLP on ``[q; t; q*t; |q-t|]`` plus the learned cosine
skip connection (see :mod:`rankkit.models.cross_encoders.candidate_list`), its last layer
initialised at zero so the untrained model ranks by the zero-shot cosine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from rankkit.errors import RankkitError
from rankkit.models import backbone as bb
from rankkit.models import safe_loading
from rankkit.models.config import ModelConfig
from rankkit.models.cross_encoders.candidate_list import CandidateListConfig, CandidateListModel
from rankkit.models.cross_encoders.configs import MONO, MonoConfig
from rankkit.models.cross_encoders.pair_encoders import ClassifierPairEncoder, CrossPairEncoder
from rankkit.models.inputs import GroupBatch
from rankkit.models.outputs import RankingOutput


class Mono(CandidateListModel, spec=MONO):
    """Point-wise scores of each candidate, independent of the other candidates."""

    @property
    def hf_head(self) -> bool:
        """True when a Hugging Face sequence classifier scores the pairs (the standard folder format)."""
        return isinstance(self.pairs, ClassifierPairEncoder)

    # -- construction -------------------------------------------------------------------------
    def cross_pairs(self, encoder: Any, tokenizer: Any, config: CandidateListConfig) -> CrossPairEncoder:
        if _hf_head(config):
            return ClassifierPairEncoder(encoder, tokenizer, *self.pair_limits(config), truncation=config.truncation)
        return super().cross_pairs(encoder, tokenizer, config)

    def build_head(self, dim: int, hidden: int) -> None:
        if self.hf_head:  # the classifier's logit is the score already
            self.head: nn.Module = nn.Identity()
            return
        if hidden > 0:
            first = nn.Linear(dim, hidden)
            last = nn.Linear(hidden, 1)
            self.head = nn.Sequential(first, nn.GELU(), last)
        else:  # the paper-style linear layer on [CLS]
            last = nn.Linear(dim, 1)
            self.head = last
        if self.config.encoder == "bi":
            # Start exactly at the zero-shot cosine ranking; training learns corrections.
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    @classmethod
    def for_training(cls, backbone: Path | None, config: ModelConfig) -> "Mono":
        """A fresh model on ``backbone``: a new one-label head (or a cross-encoder's own head) with --hf-head."""
        if not _hf_head(config):  # also the Set-Encoder, a subclass with its own settings
            model = super().for_training(backbone, config)
            assert isinstance(model, Mono)
            return model
        folder = bb.resolve_backbone(backbone)
        return cls(bb.load_sequence_classifier(folder, new_head=True), bb.load_tokenizer(folder), config)

    @classmethod
    def zero_shot(cls, backbone: Path | None, config: ModelConfig | None = None) -> "Mono":
        """A Hugging Face ``*ForSequenceClassification`` folder (a published cross-encoder) used as is."""
        if not issubclass(cls.config_class, MonoConfig):  # the Set-Encoder has no zero-shot form
            return super().zero_shot(backbone, config)  # type: ignore[return-value]
        if backbone is None or not bb.is_sequence_classifier(backbone):
            kinds = "" if backbone is None else ", ".join(bb.hf_architectures(backbone)) or "no architectures"
            where = "the packaged MiniLM" if backbone is None else f"{backbone} ({kinds})"
            raise RankkitError(f"model 'mono' has no zero-shot form on {where}: pass a checkpoint written by rankkit "
                               "train or a Hugging Face *ForSequenceClassification folder (a cross-encoder)")
        config = config if config is not None else MonoConfig.build({}, cls.name)
        if not _hf_head(config):
            raise RankkitError("a Hugging Face cross-encoder folder scores with its own head (--hf-head)")
        folder = bb.resolve_backbone(backbone)
        config.backbone = str(backbone)
        return cls(bb.load_sequence_classifier(folder), bb.load_tokenizer(folder), config)

    @classmethod
    def load(cls, folder: Path, config: ModelConfig) -> "Mono":
        """Either format: a sequence-classifier folder, or rankkit 0.1's ``rankkit-mono`` encoder + head."""
        if not isinstance(config, MonoConfig) or _model_type(folder).startswith("rankkit-"):
            if isinstance(config, MonoConfig):
                config.hf_head = False  # rankkit 0.1 recorded no such setting
            model = super().load(folder, config)
            assert isinstance(model, Mono)
            return model
        config.hf_head = True
        return cls(bb.load_sequence_classifier(folder), bb.load_tokenizer(folder), config)

    def save(self, folder: Path) -> None:
        if not self.hf_head:
            super().save(folder)
            return
        pairs = self.pairs
        assert isinstance(pairs, ClassifierPairEncoder)
        pairs.encoder.save_pretrained(str(folder))
        # The pair length the model scores (query + passage + 3), as the tokenizer's limit: a
        # Hugging Face tokenizer's ``longest_first`` truncation then cuts a long passage exactly
        # where rankkit does (for queries within max_query_length), so CrossEncoder agrees on long
        # passages too. rankkit's own tokenisation passes its lengths explicitly.
        self.tokenizer.model_max_length = pairs.max_length
        self.tokenizer.save_pretrained(str(folder))

    # -- scoring ------------------------------------------------------------------------------
    def pointwise(self, h: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        """Scores of pair vectors ``h [..., dim]`` (plus ``skip_weight * cos`` for the bi encoder)."""
        scores = self.head(h).squeeze(-1)
        if skip is not None:
            scores = scores + self.skip_weight * skip
        return scores

    def forward(self, batch: GroupBatch) -> RankingOutput:  # type: ignore[override]
        h, skip = self.grouped(batch)
        return RankingOutput(self.pointwise(h, skip))

    def list_scores(self, h: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        return self.pointwise(h, skip)


def _hf_head(config: ModelConfig) -> bool:
    """True for a ``mono`` config that scores with a Hugging Face sequence-classification head."""
    return isinstance(config, MonoConfig) and bool(config.hf_head)


def _model_type(folder: Path) -> str:
    """``model_type`` of a checkpoint's config.json (``rankkit-mono`` for rankkit 0.1's format)."""
    config = safe_loading.read_settings(folder / "config.json", folder)
    return str(config.get("model_type", "")) if isinstance(config, dict) else ""
