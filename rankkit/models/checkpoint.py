"""Checkpoint folders: what ``rankkit train`` writes and every later stage loads (no training code here).

A model folder is Hugging Face-shaped and never pickled::

    config.json          the model's architecture (a transformers config for RepBERT)
    model.safetensors    weights (safetensors: no code runs on load)
    tokenizer files      tokenizer.json, tokenizer_config.json, ...
    rankkit.json         model name, hyper-parameters (ablation flags, segment ids, lengths,
                         similarity), training settings, training-data fingerprint, steps, metrics

Resumable step checkpoints (a model folder plus optimizer state) are the trainer's business:
:mod:`rankkit.training.resume`. Model weights are only ever safetensors.

Folders are written to a temporary sibling and renamed into place, so a crash never leaves a
half-written checkpoint; ``rankkit.json`` is the last file written into a model folder.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

from rankkit.errors import InputError, RankkitError, excerpt
from rankkit.files import atomic_write, staging_dir
from rankkit.files.limits import read_json as read_bounded_json
from rankkit.hub import ModelSource, resolve_model
from rankkit.models import safe_loading
from rankkit.models.base import RankingModel
from rankkit.models.registry import get_model_class

RANKKIT_JSON = "rankkit.json"
FORMAT_VERSION = 1


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Atomically write ``data`` as sorted, indented JSON (byte-identical for equal data)."""
    with atomic_write(path) as out:
        out.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path`` (a regular file; size and nesting bounded) or an :class:`InputError` naming the file."""
    data = read_bounded_json(path, within=path.parent)
    if not isinstance(data, dict):
        raise InputError(path, None, "expected a JSON object")
    return data


def read_meta(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The rankkit.json of a checkpoint folder (a local folder; see :func:`load_model` for hub ids)."""
    path = Path(folder)
    if not path.exists():
        raise InputError(path, None, "no such checkpoint folder")
    meta = read_json(path / RANKKIT_JSON)
    source = path / RANKKIT_JSON
    if "model" not in meta or "hparams" not in meta:
        raise InputError(source, None, "not a rankkit checkpoint (no 'model'/'hparams')")
    version = meta.get("format", FORMAT_VERSION)  # rankkit 0.1 wrote 1; a folder without it is read as 1
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise InputError(source, None, f"format {excerpt(version)} is not a checkpoint format this rankkit reads "
                                       f"(1 to {FORMAT_VERSION}; a newer rankkit wrote it?)")
    for key in ("model", "provider"):
        if key in meta and not isinstance(meta[key], str):
            raise InputError(source, None, f"{key!r} = {excerpt(meta[key])} is not a name")
    if not isinstance(meta["hparams"], dict):
        raise InputError(source, None, "'hparams' is not an object")
    return meta


def is_checkpoint(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` holds a rankkit.json (a model trained or saved by rankkit; what it is, is checked on reading)."""
    return os.path.lexists(Path(folder) / RANKKIT_JSON)


def write_model_files(model: RankingModel, folder: Path, meta: Mapping[str, Any]) -> None:
    """Write ``model``'s own files and then its rankkit.json into ``folder`` (a plug-in model's
    rankkit.json names the package that provides it)."""
    from rankkit.models.registry import PROVIDERS

    model.save(folder)
    provider = {"provider": PROVIDERS[model.name]} if model.name in PROVIDERS else {}
    write_json(folder / RANKKIT_JSON, {"format": FORMAT_VERSION, "model": model.name, **provider,
                                       "hparams": model.hparams, **meta})


def save_model(model: RankingModel, folder: str | os.PathLike[str], meta: Mapping[str, Any]) -> Path:
    """Write ``model`` as a model folder; ``meta`` adds training facts to rankkit.json.

    The files are written to a temporary folder first and then moved in one by one, rankkit.json
    last, so an existing folder (which may also hold train.log and checkpoints/) keeps a complete
    model at every moment.
    """
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    # Staged inside the folder (same file system for the renames) under rankkit's temporary mark:
    # a save killed by SIGKILL leaves it behind and the next save removes it.
    with staging_dir(target / ".model", shown=target) as tmp:
        write_model_files(model, tmp, meta)
        names = sorted(p.name for p in tmp.iterdir())
        for name in [n for n in names if n != RANKKIT_JSON] + [RANKKIT_JSON]:
            if (target / name).is_dir():  # a sub-folder (sentence-transformers' 1_Pooling) cannot be replaced over
                os.replace(target / name, tmp / f"{name}.replaced")
            os.replace(tmp / name, target / name)
    if "training" in meta:  # a trained model gets a model card (rankkit.models.card)
        from rankkit.models.card import write_card

        write_card(model, meta, target)
    return target


def load_model(folder: str | os.PathLike[str] | ModelSource, *, expect: str | None = None) -> RankingModel:
    """Load a model written by rankkit (any registered model), ready for inference on CPU.

    ``folder`` is a model reference (:mod:`rankkit.hub`): a local folder or ``ORG/NAME[@REV]``;
    the model's :attr:`~rankkit.models.base.RankingModel.source` says where it came from.
    """
    source = folder if isinstance(folder, ModelSource) else resolve_model(folder)
    path = source.path
    meta = read_meta(path)
    provider = meta.get("provider")
    cls = get_model_class(str(meta["model"]), provider=provider if isinstance(provider, str) else None)
    if expect is not None and cls.name != expect:
        raise RankkitError(f"checkpoint {source.reference} holds a {cls.name!r} model, not {expect!r}")
    safe_loading.check_checkpoint(path)  # files, weights and the size its configs imply, before building
    safe_loading.dry_run(lambda: cls.load(path, read_config(cls, meta, path)))
    model = cls.load(path, read_config(cls, meta, path))
    model.eval()
    model.source = source
    return model


def read_config(cls: type[RankingModel], meta: Mapping[str, Any], folder: Path) -> Any:
    """The typed settings recorded in a checkpoint's rankkit.json for model class ``cls``."""
    hparams = meta.get("hparams")
    if not isinstance(hparams, dict):
        raise InputError(folder / RANKKIT_JSON, None, "'hparams' is not an object")
    return cls.config_class.from_dict(hparams, source=str(folder / RANKKIT_JSON))


def model_class(name: str, checkpoint: str | os.PathLike[str] | None = None) -> type[RankingModel]:
    """The registered model ``name``; when it is unknown and ``checkpoint`` is a local rankkit checkpoint of a
    plug-in model, the error names the package that provides it."""
    provider = None
    if checkpoint is not None and is_checkpoint(checkpoint):
        with contextlib.suppress(InputError):
            meta = read_meta(checkpoint)
            if meta.get("model") == name and isinstance(meta.get("provider"), str):
                provider = meta["provider"]
    return get_model_class(name, provider=provider)


def load_for_inference(model_name: str, checkpoint: str | os.PathLike[str] | None) -> RankingModel:
    """The model to encode or score with: a rankkit checkpoint, a lightning-ir checkpoint, or a zero-shot backbone.

    ``checkpoint`` is a model reference (a local folder or a hub id ``ORG/NAME[@REV]``, :mod:`rankkit.hub`)
    to a folder written by ``rankkit train`` (its rankkit.json must name ``model_name``), one saved
    by lightning-ir (``set-encoder``, ``mono``), or any Hugging Face folder used zero-shot (a
    sentence-transformers or plain encoder for bi-encoders, a ``*ForSequenceClassification``
    cross-encoder for ``mono``); ``None`` is the model's zero-shot form on the packaged default backbone.
    """
    cls = get_model_class(model_name)
    if checkpoint is None:
        model = cls.zero_shot(None)
        model.eval()
        return model
    source = resolve_model(checkpoint)
    path = source.path
    if is_checkpoint(path):
        return load_model(source, expect=model_name)
    if not path.is_dir():
        raise InputError(path, None, "is a file, expected a checkpoint folder")
    if not (path / "config.json").is_file():
        raise InputError(path, None, "not a rankkit checkpoint (no rankkit.json) nor a Hugging Face model "
                                     "folder (no config.json)")
    from rankkit.models import lightning_ir

    if lightning_ir.is_lightning_ir(path):
        model = lightning_ir.load(path, model_name)  # checked there (safe_loading.check_lightning_ir)
    else:
        safe_loading.check_hf_folder(path)  # the same checks as a rankkit or lightning-ir folder, before reading it
        check_folder_kind(cls, path, source.reference)
        model = cls.zero_shot(path)
    model.eval()
    model.source = source
    return model


def check_folder_kind(cls: type[RankingModel], path: Path, shown: str) -> None:
    """Refuse a cross-encoder folder for a bi-encoder model and a bi-encoder folder for a cross-encoder,
    in one line naming the model to use (used zero-shot, either would score, but meaninglessly)."""
    from rankkit.models.backbone import hf_architectures, is_sequence_classifier, read_sentence_transformers
    from rankkit.models.base import BiEncoder

    if issubclass(cls, BiEncoder) and is_sequence_classifier(path):
        names = ", ".join(hf_architectures(path))
        raise RankkitError(f"{shown} is a cross-encoder ({names}): it scores (query, passage) pairs, it does not "
                           f"embed them; re-rank with --model mono --checkpoint {shown}, not --model {cls.name}")
    if not issubclass(cls, BiEncoder) and not is_sequence_classifier(path) and read_sentence_transformers(path):
        raise RankkitError(f"{shown} is a sentence-transformers bi-encoder: use it with --model repbert "
                           f"(or densetrans), not --model {cls.name}")


__all__ = ["FORMAT_VERSION", "RANKKIT_JSON", "check_folder_kind", "is_checkpoint", "load_for_inference", "load_model",
           "model_class", "read_config", "read_json", "read_meta", "save_model", "write_json", "write_model_files"]
