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

    def __init__(self, session: Any, slot: EncoderSlot, config: Any, label: str, *, per_sequence: bool = False) -> None:
        super().__init__()
        self.session = session
        self.call = slot.call
        #: Run each sequence of a batch alone, cut to its own length: for graphs whose numbers depend on the
        #: whole input tensor (ONNX Runtime's dynamic int8 takes one activation scale per tensor, so a text's
        #: vector would depend on the texts sharing its batch: cosine 0.9945 mean, 0.989 min batched vs alone).
        self.per_sequence = per_sequence and slot.call in ("hf", "logits")
        self.input_names = [i.name for i in session.get_inputs()]
        self.input_types = [np.bool_ if i.type == "tensor(bool)" else np.int64 for i in session.get_inputs()]
        self.config = config
        self.label = label
        self.placeholder = nn.Parameter(torch.empty(0), requires_grad=False)

    def run(self, feeds: dict[str, torch.Tensor]) -> torch.Tensor:
        """The graph's single output for ``feeds`` (missing segment ids are zeros, as transformers does); with
        :attr:`per_sequence`, row by row at each row's own length (padding positions of hidden states are 0)."""
        if self.per_sequence and "attention_mask" in feeds and feeds["input_ids"].shape[0] > 1:
            lengths = feeds["attention_mask"].sum(dim=1).tolist()
            rows = [self._run({k: v[r: r + 1, : max(1, int(n))] for k, v in feeds.items()})
                    for r, n in enumerate(lengths)]
            if rows[0].dim() == 2:  # one output vector (logits) a row
                return torch.cat(rows)
            width = feeds["input_ids"].shape[1]
            out = rows[0].new_zeros((len(rows), width, rows[0].shape[-1]))
            for r, row in enumerate(rows):
                out[r, : row.shape[1]] = row[0]
            return out
        return self._run(feeds)

    def _run(self, feeds: dict[str, torch.Tensor]) -> torch.Tensor:
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
