"""The model registry: ``rankkit train --model NAME`` (and every other ``--model``) looks names up here.

A model is one file (a :class:`~rankkit.models.base.RankingModel` subclass with its typed
``config_class``) plus one :func:`register` line, in :mod:`rankkit.models` for the built-in models
or anywhere else for a plug-in: the CLI's model options, checkpoints and dense indexes need no
other change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from rankkit.errors import RankkitError
from rankkit.hub import ModelSource
from rankkit.models.base import RankingModel

M = TypeVar("M", bound=type[RankingModel])

MODELS: dict[str, type[RankingModel]] = {}


def register(cls: M) -> M:
    """Register ``cls`` under ``cls.name`` (usable as a decorator); re-registering a name replaces it."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} needs a class attribute 'name'")
    MODELS[name] = cls
    return cls


def get_model_class(name: str) -> type[RankingModel]:
    """The model class registered as ``name``; an unknown name lists the known ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise RankkitError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}") from None


def create_model(name: str, backbone: str | Path | ModelSource | None = None, **settings: Any) -> RankingModel:
    """A fresh model ``name`` to train (or use untrained), its settings checked against its declaration
    and the backbone recorded in them (the one place that records it; ``rankkit train`` builds here).

    ``backbone`` is a model reference (a local folder or a hub id, :mod:`rankkit.hub`, resolved here)
    or a resolved :class:`~rankkit.hub.ModelSource`; None is the packaged MiniLM. The recorded
    backbone is the hub repo id where there is one, else the folder as given.
    ``create_model("matrank", encoder="bi")`` is what ``rankkit train --model matrank --encoder bi``
    builds before its first step.
    """
    from rankkit.models.backbone import backbone_source

    cls = get_model_class(name)
    config = cls.config_class.build(settings, name)
    if backbone is None:
        config.backbone = None
        return cls.for_training(None, config)
    source = backbone_source(backbone)
    config.backbone = source.repo_id or source.reference
    return cls.for_training(source.path, config)
