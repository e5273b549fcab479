"""Checkpoint files of the models built from one transformer encoder plus a head (cross-encoders, document models).

``config.json`` holds ``model_type`` ``rankkit-<name>``, the model's settings and the encoder's
transformers config (so the folder rebuilds with no download); ``model.safetensors`` every weight,
encoder included; the tokenizer files sit beside them. Shared as a mixin, so each family keeps its
own class hierarchy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import safetensors.torch
from transformers import AutoConfig, AutoModel

from rankkit.errors import InputError
from rankkit.models import backbone as bb
from rankkit.models import safe_loading
from rankkit.models.config import ModelConfig


class EncoderHeadFiles:
    """``save``/``load`` for a model whose backbone is ``self.pairs.encoder`` and tokenizer ``self.tokenizer``."""

    name: ClassVar[str]
    config: ModelConfig
    pairs: Any
    tokenizer: Any

    @classmethod
    def load(cls, folder: Path, config: ModelConfig) -> Any:
        config_path = folder / "config.json"
        weights = folder / "model.safetensors"
        for path in (config_path, weights):
            if not path.is_file():
                raise InputError(path, None, "no such file")
        try:
            saved = safe_loading.read_settings(config_path, folder)
            enc_conf = dict(saved["encoder_config"])
            encoder_config = AutoConfig.for_model(enc_conf.pop("model_type"), **enc_conf)
        except (KeyError, ValueError, TypeError, AttributeError) as err:
            raise InputError(config_path, None, f"not a rankkit {cls.name} config: {' '.join(str(err).split())[:300]}") from None
        try:  # a config someone else wrote: its settings fail in transformers with any exception type
            encoder = AutoModel.from_config(encoder_config)
        except Exception as err:  # noqa: BLE001
            raise bb.loading_failure(err, config_path, "its encoder") from None
        model: Any = cls(encoder, bb.load_tokenizer(folder), config)  # type: ignore[call-arg]
        bb.load_weights(model, bb.read_safetensors(weights), weights, cls.name)
        return model

    def save(self, folder: Path) -> None:
        encoder = self.pairs.encoder
        settings = {k: v for k, v in self.config.to_dict().items() if k != "backbone"}
        config = {"model_type": f"rankkit-{self.name}", **settings, "encoder_config": encoder.config.to_dict()}
        (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}  # type: ignore[attr-defined]
        safetensors.torch.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        self.tokenizer.save_pretrained(str(folder))
