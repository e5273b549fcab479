"""``rankkit train --init-checkpoint CK``: start from a rankkit checkpoint's weights, with a fresh
optimiser and schedule (two-stage training: the Set-Encoder's distillation stage started from its
first stage, a first-stage checkpoint fine-tuned further, a ``mono`` encoder under a MatRank head).

Weights are carried tensor by tensor into the freshly built model (whose own initialisation, from
``--seed``, stays for everything not carried):

1. tensors of the same name (the same model, or models sharing a layout such as ``mono`` ->
   ``matrank`` / ``set-encoder``, whose encoders are all ``pairs.encoder.*``);
2. then, when each model has exactly one transformers encoder under different names (``repbert``'s
   ``encoder.*`` -> ``mono``'s ``pairs.encoder.*``), that encoder's tensors by their names inside it.

Without ``--backbone`` the new model is built on the checkpoint's own encoder and tokenizer
(:func:`save_encoder`), so the tensors fit. A carried tensor must have the same shape (else one line
naming the first mismatch: usually another ``--backbone`` than the checkpoint's); a checkpoint sharing
no tensor with the model is refused.
What was carried, what starts fresh and what of the checkpoint went unused is logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers

from rankkit.errors import InputError
from rankkit.models import RankingModel
from rankkit.models.checkpoint import is_checkpoint, load_model


@dataclass
class WarmStart:
    """What :func:`carry_weights` did: target tensor name -> source tensor name, and the rest."""

    source: Path
    source_model: str
    carried: dict[str, str]
    fresh: list[str]
    unused: list[str]
    values: int  # numbers carried

    def record(self) -> dict[str, object]:
        """The train.log record of the warm start."""
        return {"step": 0, "event": "init", "init_checkpoint": str(self.source), "init_model": self.source_model,
                "carried": len(self.carried), "carried_values": self.values, "fresh": self.fresh,
                "unused": self.unused}

    def describe(self) -> str:
        def names(items: list[str]) -> str:
            return ", ".join(items[:6]) + (f", ... ({len(items)} in all)" if len(items) > 6 else "") if items else "none"

        renamed = sum(1 for k, v in self.carried.items() if k != v)
        return (f"initialised from {self.source} ({self.source_model}): carried {len(self.carried)} tensors "
                f"({self.values:,} values{f', {renamed} renamed into the encoder' if renamed else ''}); "
                f"fresh: {names(self.fresh)}; unused from the checkpoint: {names(self.unused)}")


def encoder_prefixes(model: torch.nn.Module) -> list[str]:
    """State-dict prefixes (``"pairs.encoder."``) of the transformers encoders inside ``model``: the
    base models, so that a ``*ForSequenceClassification`` (``mono``) counts as its ``.bert`` inside."""
    return [f"{name}." for name, module in model.named_modules()
            if name and isinstance(module, transformers.PreTrainedModel) and module.base_model is module]


def load_init_checkpoint(reference: str | Path) -> RankingModel:
    """The ``--init-checkpoint`` model (a folder or a hub id), refused in one line unless rankkit wrote it."""
    from rankkit.hub import resolve_model

    source = resolve_model(reference, option="--init-checkpoint")
    folder = source.path
    if not folder.is_dir():
        raise InputError(folder, None, "no such checkpoint folder (--init-checkpoint)")
    if not is_checkpoint(folder):
        raise InputError(folder, None, "not a rankkit checkpoint (no rankkit.json; --init-checkpoint takes a "
                                       "folder written by rankkit train)")
    return load_model(source)


def save_encoder(model: RankingModel, folder: Path) -> Path:
    """Write ``model``'s one transformers encoder and its tokenizer to ``folder`` as a Hugging Face backbone
    folder: what ``--init-checkpoint`` without ``--backbone`` builds the new model on (its architecture and
    vocabulary, the Set-Encoder's [INT] token included; the weights are carried afterwards)."""
    prefixes = encoder_prefixes(model)
    if len(prefixes) != 1:
        raise InputError(folder, None, f"a {model.name} checkpoint has {len(prefixes)} encoders: give --backbone "
                                       "to say which architecture to build")
    encoder = model.get_submodule(prefixes[0].rstrip("."))
    assert isinstance(encoder, transformers.PreTrainedModel)
    encoder.save_pretrained(str(folder))
    tokenizer: Any = model.tokenizer  # every model family keeps its tokenizer here (a plain attribute)
    tokenizer.save_pretrained(str(folder))
    return folder


def carry_weights(model: RankingModel, checkpoint: RankingModel | str | Path) -> WarmStart:
    """Copy the tensors of the rankkit checkpoint ``checkpoint`` (loaded, or a reference to load) that fit
    into ``model`` (see module doc)."""
    source_model = checkpoint if isinstance(checkpoint, RankingModel) else load_init_checkpoint(checkpoint)
    assert source_model.source is not None, "load the checkpoint with load_init_checkpoint()"
    folder = source_model.source.path
    shown = source_model.source.reference
    source = source_model.state_dict()
    target = model.state_dict()
    carried = {name: name for name in target if name in source}
    src_enc, dst_enc = encoder_prefixes(source_model), encoder_prefixes(model)
    if len(src_enc) == 1 and len(dst_enc) == 1 and src_enc != dst_enc:
        for name in target:
            if name not in carried and name.startswith(dst_enc[0]):
                candidate = src_enc[0] + name[len(dst_enc[0]):]
                if candidate in source:
                    carried[name] = candidate
    if not carried:
        raise InputError(folder, None, f"a {source_model.name} checkpoint shares no weights with a {model.name} "
                                       f"model (--init-checkpoint)")
    wrong = [(k, v) for k, v in carried.items() if tuple(source[v].shape) != tuple(target[k].shape)]
    if wrong:
        k, v = wrong[0]
        raise InputError(folder, None, f"{len(wrong)} weight(s) of another shape than the {model.name} model's "
                                       f"(first: {v} {tuple(source[v].shape)} vs {tuple(target[k].shape)}); "
                                       f"train with the --backbone the checkpoint was trained on, or without "
                                       f"--backbone to build on the checkpoint's own encoder")
    merged = dict(target)
    for k, v in carried.items():
        merged[k] = source[v].detach().clone().to(dtype=target[k].dtype)
    model.load_state_dict(merged, strict=True)
    used = set(carried.values())
    return WarmStart(source=Path(shown), source_model=source_model.name, carried=carried,
                     fresh=sorted(set(target) - set(carried)), unused=sorted(set(source) - used),
                     values=sum(target[k].numel() for k in carried))
