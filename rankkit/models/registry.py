"""The model registry: ``rankkit train --model NAME`` (and every other ``--model``) looks names up here.

The registry holds declarations (:class:`~rankkit.models.declaration.ModelSpec`: name, typed settings,
family, output, training defaults, paper) and imports a model's network class only when a command
needs it (:func:`get_model_class`, :data:`MODELS`), so listing the models, generating their command-line
options and refusing a bad one cost no torch. A model is its declaration plus one :func:`register`
line, in :mod:`rankkit.models` for the built-in models or anywhere else for a plug-in (which may also
register a class that declares its attributes itself).

Plug-in distributions declare their models under the entry-point group ``rankkit.models``: the entry
points are read as metadata (name, providing distribution) and loaded when one of their models is
asked for by name, or when every model is listed (``rankkit models``, ``rankkit train --help``). An
entry point names a declaration (``name = "pkg.declarations:SPEC"``: nothing heavy is imported until
the model runs), a class (``"pkg.module:Class"``) or a module whose import runs its ``register()``
lines. A plug-in that fails to load or declares something rankkit cannot use is one warning line
naming it, and every other model keeps working.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, MutableMapping, TypeVar

from rankkit.errors import RankkitError
from rankkit.models.declaration import FAMILIES, DeclarationError, ModelSpec, check_spec

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from rankkit.hub import ModelSource
    from rankkit.models.base import RankingModel

T = TypeVar("T")

#: Every declared model by name (plug-ins once loaded).
SPECS: dict[str, ModelSpec] = {}
#: Plug-in models: name -> the distribution that provides it (``NAME==VERSION``), recorded in rankkit.json.
PROVIDERS: dict[str, str] = {}
#: The entry-point group plug-in distributions declare their models under.
ENTRY_POINT_GROUP = "rankkit.models"
_CLASSES: dict[str, type[RankingModel]] = {}
#: Entry points read but not imported yet: entry-point name -> (entry point, provider).
_PENDING: dict[str, tuple[EntryPoint, str]] = {}
_discovered = False


def register(item: T) -> T:
    """Register a model: its :class:`ModelSpec` (the class is imported when used) or a
    :class:`~rankkit.models.base.RankingModel` class (usable as a decorator); returns ``item``.

    A declaration rankkit cannot use raises :class:`~rankkit.models.declaration.DeclarationError` (a
    ``TypeError``) naming the problem; re-registering a name replaces it.
    """
    if isinstance(item, type):
        from rankkit.models.base import RankingModel

        if not issubclass(item, RankingModel):
            raise DeclarationError(f"{item.__name__} is not a RankingModel subclass")
        spec = ModelSpec.of_class(item)
        check_spec(spec)
        SPECS[spec.name] = spec
        _CLASSES[spec.name] = item
        return item
    check_spec(item)
    assert isinstance(item, ModelSpec)
    SPECS[item.name] = item
    _CLASSES.pop(item.name, None)
    return item


def _discover() -> None:
    """Read the installed distributions' ``rankkit.models`` entry points (metadata only, once); one whose name
    is already declared is loaded now, so a plug-in that replaces a model does so before anyone asks."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(point, "dist", None)
        provider = f"{dist.metadata['Name']}=={dist.version}" if dist is not None else point.value
        _PENDING[point.name] = (point, provider)
    for name in [name for name in _PENDING if name in SPECS]:
        _load(name)


def _load(entry: str) -> list[str]:
    """Import one pending entry point and register what it declares; returns the model names it added.
    A failure (an import error, a bad declaration) is one warning naming the plug-in, its models dropped."""
    point, provider = _PENDING.pop(entry)
    before = dict(SPECS)
    classes = dict(_CLASSES)
    try:
        target = point.load()
        if isinstance(target, (ModelSpec, type)):
            register(target)
    except Exception as err:  # a broken plug-in must not break rankkit
        SPECS.clear()
        SPECS.update(before)
        _CLASSES.clear()
        _CLASSES.update(classes)
        from rankkit.console import warn

        warn(f"plug-in {point.name} ({provider}) could not be loaded: {type(err).__name__}: "
             f"{' '.join(str(err).split())[:200]}")
        return []
    added = [name for name, spec in SPECS.items() if before.get(name) is not spec]
    for name in added:
        PROVIDERS[name] = provider
    return added


def load_plugins() -> list[str]:
    """Load every installed plug-in now; returns the names of the models they registered."""
    _discover()
    loaded: list[str] = []
    for entry in list(_PENDING):
        loaded += _load(entry)
    return loaded


def specs() -> dict[str, ModelSpec]:
    """Every declared model, plug-ins included (loaded here), by name."""
    load_plugins()
    return dict(SPECS)


def get_spec(name: str, *, provider: str | None = None) -> ModelSpec:
    """The declaration of model ``name`` (no torch); an unknown name lists the known ones (and, when a checkpoint
    recorded the plug-in package that provided it, names that package)."""
    _discover()
    if name in _PENDING:
        _load(name)
    if name not in SPECS and _PENDING:
        load_plugins()  # a plug-in module may register models under other names than its entry point's
    if name in SPECS:
        return SPECS[name]
    if provider:
        package = provider.split("==")[0]
        raise RankkitError(f"model {name!r} comes from the plug-in package {provider}, which is not installed "
                           f"(pip install {package})")
    raise RankkitError(f"unknown model {name!r}; known: {', '.join(sorted(SPECS))}")


def get_model_class(name: str, *, provider: str | None = None) -> type[RankingModel]:
    """The network class of model ``name``, imported on first use (see :func:`get_spec` for unknown names)."""
    spec = get_spec(name, provider=provider)
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _import(spec)
        _CLASSES[name] = cls
    return cls


def _import(spec: ModelSpec) -> type[RankingModel]:
    from rankkit.models.base import RankingModel

    module, _, attribute = spec.target.partition(":")
    try:
        found: Any = importlib.import_module(module)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as err:
        if spec.name not in PROVIDERS:
            raise  # a built-in model that does not import is rankkit's bug: its traceback says where
        raise RankkitError(f"model {spec.name!r} (plug-in {PROVIDERS[spec.name]}) could not be imported from "
                           f"{spec.target}: {type(err).__name__}: {err}") from None
    if not (isinstance(found, type) and issubclass(found, RankingModel)) or found.name != spec.name \
            or found.config_class is not spec.config_class:
        raise DeclarationError(f"{spec.target} is not the RankingModel class declared as {spec.name!r} "
                               f"(declare it with spec=: class ...(RankingModel, spec=...))")
    return found


class _Models(MutableMapping[str, "type[RankingModel]"]):
    """Model name -> network class, each imported when looked up (iterating lists the names only)."""

    def __getitem__(self, name: str) -> type[RankingModel]:
        if name not in self:
            raise KeyError(name)
        return get_model_class(name)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            get_spec(name)
        except RankkitError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(specs())

    def __len__(self) -> int:
        return len(specs())

    def __setitem__(self, name: str, cls: type[RankingModel]) -> None:
        if getattr(cls, "name", None) != name:
            raise DeclarationError(f"MODELS[{name!r}] must be a class named {name!r}")
        register(cls)

    def __delitem__(self, name: str) -> None:
        del SPECS[name]
        _CLASSES.pop(name, None)
        PROVIDERS.pop(name, None)

    def __repr__(self) -> str:
        return f"MODELS({', '.join(sorted(specs()))})"


#: Every registered model's class by name, as :func:`get_model_class` imports it.
MODELS: MutableMapping[str, type[RankingModel]] = _Models()


def family(model: type[RankingModel] | ModelSpec) -> str:
    """What kind of ranker a model is, in words: a first-stage bi-encoder, a passage or a document re-ranker."""
    spec = model if isinstance(model, ModelSpec) else ModelSpec.of_class(model)
    return FAMILIES.get(spec.family, spec.family)


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


__all__ = ["ENTRY_POINT_GROUP", "MODELS", "PROVIDERS", "SPECS", "create_model", "family", "get_model_class", "get_spec",
           "load_plugins", "register", "specs"]
