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
#: Plug-in models: name -> the distribution that provides it (``NAME==VERSION``), recorded in rankkit.json.
PROVIDERS: dict[str, str] = {}
#: The entry-point group plug-in distributions declare their models under (``name = "pkg.module:Class"``
#: or ``name = "pkg.module"``, a module whose import runs its ``register()`` lines).
ENTRY_POINT_GROUP = "rankkit.models"


def register(cls: M) -> M:
    """Register ``cls`` under ``cls.name`` (usable as a decorator); re-registering a name replaces it."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} needs a class attribute 'name'")
    MODELS[name] = cls
    return cls


def load_plugins() -> list[str]:
    """Register the models of every installed distribution's ``rankkit.models`` entry points; returns their
    names. A plug-in that fails to load is reported in one warning line and skipped (rankkit still works)."""
    from importlib.metadata import entry_points

    loaded: list[str] = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        before = dict(MODELS)
        dist = getattr(point, "dist", None)
        provider = f"{dist.metadata['Name']}=={dist.version}" if dist is not None else point.value
        try:
            target = point.load()
        except Exception as err:  # a broken plug-in must not break rankkit
            from rankkit.console import warn

            warn(f"plug-in {point.name} ({provider}) could not be loaded: {type(err).__name__}: "
                 f"{' '.join(str(err).split())[:160]}")
            continue
        if isinstance(target, type) and issubclass(target, RankingModel):
            register(target)
        for name, cls in MODELS.items():
            if before.get(name) is not cls:
                PROVIDERS[name] = provider
                loaded.append(name)
    return loaded


def get_model_class(name: str, *, provider: str | None = None) -> type[RankingModel]:
    """The model class registered as ``name``; an unknown name lists the known ones (and, when a checkpoint
    recorded the plug-in package that provided it, names that package)."""
    try:
        return MODELS[name]
    except KeyError:
        if provider:
            package = provider.split("==")[0]
            raise RankkitError(f"model {name!r} comes from the plug-in package {provider}, which is not installed "
                               f"(pip install {package})") from None
        raise RankkitError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}") from None


def family(cls: type[RankingModel]) -> str:
    """What kind of ranker ``cls`` is: a first-stage bi-encoder, a passage re-ranker or a document re-ranker."""
    from rankkit.models.base import BiEncoder
    from rankkit.models.documents.base import DocumentModel

    if issubclass(cls, BiEncoder):
        return "first stage (bi-encoder)"
    if issubclass(cls, DocumentModel):
        return "re-ranker (documents)"
    return "re-ranker (passages)"


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
