"""The encoder adapter: an inference session standing in for a model's encoder, called as the encoder was.

``--backend onnx``/``openvino`` swap each exportable encoder of a model (its
:class:`~rankkit.models.encoder_slots.EncoderSlot`) for an :class:`OrtEncoder` with the same call
signature: a Hugging Face encoder keeps being called as ``encoder(input_ids=..., attention_mask=...,
token_type_ids=...)`` and answers with ``last_hidden_state`` (or ``.logits`` for a sequence
classifier such as ``mono``); a network called ``network(input_ids, attention_mask)`` that returns
text vectors (DenseTrans) keeps that call. Everything around the encoder (tokenisation, pooling,
heads such as MatRank's matrix or PARADE's aggregators, scoring) stays the model's own torch code,
so the inference drivers (:mod:`rankkit.reranking`, :mod:`rankkit.dense`) do not change.
A session is anything with ONNX Runtime's two calls ``get_inputs()`` and ``run(None, feeds)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from rankkit.models.encoder_slots import EncoderSlot


class OrtEncoder(nn.Module):
    """An ONNX Runtime session standing in for an encoder module, with the module's call signature.

    Holds no weights; a zero-size parameter keeps ``next(model.parameters())`` (the models' device
    lookup) working for models whose only weights were the encoder's. Runs on the CPU.
    """

    def __init__(self, session: Any, slot: EncoderSlot, config: Any, label: str) -> None:
        super().__init__()
        self.session = session
        self.call = slot.call
        self.input_names = [i.name for i in session.get_inputs()]
        self.input_types = [np.bool_ if i.type == "tensor(bool)" else np.int64 for i in session.get_inputs()]
        self.config = config
        self.label = label
        self.placeholder = nn.Parameter(torch.empty(0), requires_grad=False)

    def run(self, feeds: dict[str, torch.Tensor]) -> torch.Tensor:
        """The graph's single output for ``feeds`` (missing segment ids are zeros, as transformers does)."""
        ids = feeds["input_ids"]
        arrays = {}
        for name, kind in zip(self.input_names, self.input_types):
            value = feeds.get(name)
            if value is None:
                value = torch.zeros_like(ids)
            arrays[name] = value.detach().cpu().numpy().astype(kind, copy=False)
        (out,) = self.session.run(None, arrays)
        return torch.from_numpy(out)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        from transformers.modeling_outputs import BaseModelOutput, SequenceClassifierOutput

        if self.call == "vectors":
            return self.run({**dict(zip(self.input_names, args)), **kwargs})
        if args:
            raise TypeError("OrtEncoder takes its inputs by keyword (input_ids=, attention_mask=, ...)")
        feeds = {k: v for k, v in kwargs.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        if self.call == "logits":
            return SequenceClassifierOutput(logits=self.run(feeds))
        return BaseModelOutput(last_hidden_state=self.run(feeds))

    def extra_repr(self) -> str:
        return self.label


__all__ = ["OrtEncoder"]
