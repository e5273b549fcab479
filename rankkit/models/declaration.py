"""What rankkit knows about a model without importing its network: a :class:`ModelSpec`.

A model is its typed settings (a :class:`~rankkit.models.config.ModelConfig` dataclass), a spec naming
it, and a network class; the first two live in a module that imports neither torch nor transformers
(the built-in models' ``configs.py`` of each family), so the command line lists the models, generates
their options, answers ``--help`` and refuses a bad option before torch is imported. The network
class declares ``spec=`` once and takes its name, settings class, output, training defaults and paper
from it; the registry (:mod:`rankkit.models.registry`) imports the class (``target``) only when a
command needs it.

Like lightning-ir's per-model ``config.py`` beside its ``model.py``: the declaration is data, the
network is code.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rankkit.models.config import ModelConfig
from rankkit.models.outputs import RankingOutput

if TYPE_CHECKING:
    from rankkit.models.base import RankingModel

#: What kind of ranker a model is; ``rankkit models`` shows the words on the right.
FAMILIES: dict[str, str] = {
    "bi-encoder": "first stage (bi-encoder)",
    "passages": "re-ranker (passages)",
    "documents": "re-ranker (documents)",
}
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class TrainingDefaults:
    """What ``rankkit train`` uses for this model when ``--loss``/``--lr``/``--weight-decay`` are not given."""

    loss: str = "listwise-ce"
    lr: float = 2e-5
    weight_decay: float = 0.01
    adam_betas: tuple[float, float] = (0.9, 0.999)


@dataclass(frozen=True)
class ModelSpec:
    """A model's declaration: its name, where its network class is (``"package.module:Class"``, imported
    when used), its typed settings, its family, what its ``forward`` returns (which losses fit), its
    training defaults, the paper it implements and a one-line summary."""

    name: str
    target: str
    config_class: type[ModelConfig]
    family: str = "passages"
    output_type: type[RankingOutput] = RankingOutput
    training_defaults: TrainingDefaults = TrainingDefaults()
    paper: str = ""
    summary: str = ""

    @property
    def family_words(self) -> str:
        """The family as ``rankkit models`` words it."""
        return FAMILIES.get(self.family, self.family)

    @classmethod
    def of_class(cls, model: type[RankingModel]) -> "ModelSpec":
        """The spec of a class that declares its attributes itself (a plug-in registered as a class)."""
        own = model.__dict__.get("spec")
        if isinstance(own, ModelSpec):
            return own
        family = getattr(model, "family", "passages")  # the class's own (BiEncoder and document models set theirs)
        doc = (model.__doc__ or "").strip().splitlines()
        return cls(name=getattr(model, "name", None), target=f"{model.__module__}:{model.__qualname__}",  # type: ignore[arg-type]
                   config_class=model.config_class, family=family, output_type=model.output_type,
                   training_defaults=model.training_defaults, paper=model.paper, summary=doc[0] if doc else "")


class DeclarationError(TypeError):
    """A model declaration rankkit cannot use (a wrong type, an option no command line can take)."""


def check_spec(spec: Any) -> None:
    """Refuse a declaration that would break the command line or the registry (:class:`DeclarationError`,
    one line): a bad name or target, settings that are not a :class:`ModelConfig` dataclass of supported
    types, an option whose flag, ``rerank_flag``, aliases, words or bounds are not what :func:`option`
    documents, a default its own checks refuse, wrong training defaults."""
    if not isinstance(spec, ModelSpec):
        raise DeclarationError(f"expected a ModelSpec or a RankingModel class, got {type(spec).__name__}")
    name = spec.name
    if not isinstance(name, str) or not _NAME.match(name):
        raise DeclarationError(f"model name {name!r} must be a lower-case word (letters, digits, '-', '_', '.')")
    if not isinstance(spec.target, str) or not _TARGET.match(spec.target):
        raise DeclarationError(f"model {name}: target {spec.target!r} must be 'package.module:Class'")
    if spec.family not in FAMILIES:
        raise DeclarationError(f"model {name}: family {spec.family!r} must be one of {', '.join(FAMILIES)}")
    if not (isinstance(spec.output_type, type) and issubclass(spec.output_type, RankingOutput)):
        raise DeclarationError(f"model {name}: output_type must be a RankingOutput class")
    defaults = spec.training_defaults
    if not isinstance(defaults, TrainingDefaults) or not isinstance(defaults.loss, str) \
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       for v in (defaults.lr, defaults.weight_decay, *defaults.adam_betas)):
        raise DeclarationError(f"model {name}: training_defaults must be a TrainingDefaults of a loss name and numbers")
    if not isinstance(spec.paper, str) or not isinstance(spec.summary, str):
        raise DeclarationError(f"model {name}: paper and summary must be strings")
    config = spec.config_class
    if not (isinstance(config, type) and issubclass(config, ModelConfig) and dataclasses.is_dataclass(config)):
        raise DeclarationError(f"model {name}: config_class must be a ModelConfig dataclass")
    try:
        options = config.specs()
    except (TypeError, NameError) as err:  # an unsupported or unresolvable annotation
        raise DeclarationError(f"model {name}: {config.__name__}: {err}") from None
    for option in options:
        _check_option(name, option)


def _is_flag(value: Any) -> bool:
    return isinstance(value, str) and bool(re.match(r"^--[a-z0-9][a-z0-9-]*$", value))


def _check_option(model: str, option: Any) -> None:
    """One declared setting (an :class:`~rankkit.models.config.OptionSpec`) of ``model``."""
    where = f"model {model}: setting {option.name}"
    if not isinstance(option.help, str):
        raise DeclarationError(f"{where}: help must be a string")
    if option.paper is not None and not isinstance(option.paper, str):
        raise DeclarationError(f"{where}: paper must be a string or None")
    if not isinstance(option.flag, str) or not all(_is_flag(part) for part in option.flag.split("/")) \
            or option.flag.count("/") > (1 if option.kind is bool else 0):
        raise DeclarationError(f"{where}: flag {option.flag!r} must be '--name' (a boolean: '--on/--off')")
    if option.rerank_flag is not None and not _is_flag(option.rerank_flag):
        raise DeclarationError(f"{where}: rerank_flag must be a '--name' string or None, got {option.rerank_flag!r}")
    if option.rerank_flag is not None and option.kind is bool:
        raise DeclarationError(f"{where}: rerank_flag needs a setting that takes a value (not a boolean)")
    for bound in (option.minimum, option.maximum):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))):
            raise DeclarationError(f"{where}: minimum and maximum must be numbers or None")
    if not isinstance(option.aliases, dict) or not all(_is_flag(flag) for flag in option.aliases):
        raise DeclarationError(f"{where}: aliases must map '--name' flags to values")
    if not isinstance(option.words, dict) or not all(isinstance(word, str) for word in option.words):
        raise DeclarationError(f"{where}: words must map words to values")
    from rankkit.errors import RankkitError

    values = [] if option.default is None else [option.default]
    try:
        for value in [*values, *option.aliases.values()]:
            option.check(value, model, strict=True)
    except RankkitError as err:
        raise DeclarationError(f"{where}: its default or alias value is refused by its own declaration ({err})") \
            from None


__all__ = ["FAMILIES", "DeclarationError", "ModelSpec", "TrainingDefaults", "check_spec"]
