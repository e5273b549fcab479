"""Which encoders of a model an inference backend may run: the model library's declaration.

A model lists its exportable encoders in :meth:`~rankkit.models.base.RankingModel.encoder_slots`
(one :class:`EncoderSlot` each: the module, the attribute that holds it, how it is called); the
inference backends of :mod:`rankkit.runtime` export, check and swap them. The model library never
imports the runtime layer: this declaration is all a model knows of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


@dataclass
class EncoderSlot:
    """One exportable encoder of a model: the module ``getattr(owner, attribute)``.

    ``call``: ``"hf"``, a transformers encoder called by keyword (``input_ids``, ``attention_mask``,
    ``token_type_ids``) whose ``.last_hidden_state`` ``[B, L, H]`` is read; ``"logits"``, a transformers
    ``*ForSequenceClassification`` called the same way whose ``.logits`` ``[B, labels]`` is read (``mono``,
    whose head is the classifier's own); or ``"vectors"``, a
    network called ``module(input_ids, attention_mask)`` returning ``[B, D]``. ``inputs`` are the
    graph's inputs, in order; ``structure`` identifies what the weights alone do not (a config, the
    model's settings); ``max_length`` and ``vocab_size`` bound the probe batches; ``export_form``,
    when given, is traced instead of the module (same weights, traceable shapes).
    """

    name: str
    owner: nn.Module
    attribute: str
    inputs: tuple[str, ...]
    structure: str
    max_length: int
    vocab_size: int
    call: str = "hf"
    export_form: nn.Module | None = None
    #: Inputs beyond token ids, mask and segments, derived from a probe batch (the Set-Encoder's layout).
    extra_inputs: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]] | None = None

    @property
    def module(self) -> nn.Module:
        module = getattr(self.owner, self.attribute)
        assert isinstance(module, nn.Module)
        return module


def hf_slot(owner: nn.Module, attribute: str = "encoder", name: str = "encoder") -> EncoderSlot:
    """The slot of a transformers encoder held at ``owner.attribute`` (segment ids as an input when it has them)."""
    encoder = getattr(owner, attribute)
    config = encoder.config
    inputs: tuple[str, ...] = ("input_ids", "attention_mask")
    if int(getattr(config, "type_vocab_size", 0) or 0) > 0:
        inputs += ("token_type_ids",)
    # A model with a head (a sequence classifier) is exported whole: its base model is another module.
    call = "logits" if getattr(encoder, "base_model", encoder) is not encoder else "hf"
    return EncoderSlot(name, owner, attribute, inputs, config.to_json_string(use_diff=False),
                       int(getattr(config, "max_position_embeddings", 512)), int(config.vocab_size), call=call)


__all__ = ["EncoderSlot", "hf_slot"]
