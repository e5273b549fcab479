"""Typed model options: each model declares its settings once, as a dataclass of :func:`option` fields.

A declaration carries the type, the default, the help text and the paper section the setting comes
from. Everything else is generated from it: ``rankkit train``'s and ``rankkit rerank``'s model
options (:mod:`rankkit.cli.model_options`), the refusal of an option the chosen model does not
have, ``rankkit train --model NAME --help``, and the ``hparams`` record
of a checkpoint's rankkit.json (:meth:`ModelConfig.to_dict` / :meth:`ModelConfig.from_dict`).

The pattern follows lightning-ir's per-model configs and ir_measures' typed ``SUPPORTED_PARAMS``
(a name, a type, a default and a description per parameter).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Mapping, TypeVar

from rankkit.errors import InputError, RankkitError

C = TypeVar("C", bound="ModelConfig")

#: Largest value of an integer setting that declares no maximum of its own (token lengths, widths,
#: counts): larger ones only ever come from a typo or a hostile rankkit.json, and would be
#: allocated (a 10^30-token limit, a 10^9-wide layer) before anything else could refuse them.
MAX_INT_SETTING = 1 << 20


def option(default: Any, *, help: str, paper: str | None = None, flag: str | None = None,
           minimum: float | None = None, maximum: float | None = None, cli: bool = True,
           rerank_flag: str | None = None, aliases: Mapping[str, Any] | None = None,
           words: Mapping[str, Any] | None = None) -> Any:
    """A model setting: its default, help text and source.

    ``flag`` overrides the generated ``--name`` (e.g. ``--freeze-encoder/--tune-encoder``);
    ``cli=False`` keeps a setting out of the model options (set by rankkit itself or by a generic
    ``rankkit train`` option); ``rerank_flag`` also exposes it on ``rankkit rerank`` (an
    inference-time override); ``aliases`` maps extra boolean flags to a value of the setting
    (DenseTrans' ``--no-dense`` = ``variant no-dense``); ``words`` maps words a number setting also
    takes to the value they stand for (PARADE-Transformer's ``--position-passages none`` = 0).
    """
    meta = {"help": help, "paper": paper, "flag": flag, "minimum": minimum, "maximum": maximum, "cli": cli,
            "rerank_flag": rerank_flag, "aliases": dict(aliases or {}), "words": dict(words or {})}
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class OptionSpec:
    """One declared setting, resolved for the command line."""

    name: str
    kind: type  # int, float, str or bool
    optional: bool  # None is a valid value (meaning "the model's rule")
    default: Any
    help: str
    paper: str | None
    flag: str
    choices: tuple[str, ...]
    minimum: float | None
    maximum: float | None
    cli: bool
    rerank_flag: str | None
    aliases: Mapping[str, Any]
    #: Words the setting also takes on the command line and in config files, and their values.
    words: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def primary_flag(self) -> str:
        """The flag named in messages (``--freeze-encoder`` of ``--freeze-encoder/--tune-encoder``)."""
        return self.flag.split("/")[0]

    def describe_default(self) -> str:
        return "model's rule" if self.default is None else str(self.default).lower() \
            if isinstance(self.default, bool) else str(self.default)

    def check(self, value: Any, model: str, flag: str | None = None, *, strict: bool = False) -> Any:
        """``value`` converted to this setting's type and checked (choices, range, finite).

        A boolean is never a number (``true`` would be 1). ``strict`` (settings read from a file: a
        checkpoint's rankkit.json, a recipe): the value must already have the setting's type, so a string
        is not read as a number nor a number as a string; the command line's text is converted.
        """
        flag = flag or self.primary_flag
        if isinstance(value, str) and value.strip().lower() in self.words:
            return self.words[value.strip().lower()]
        if value is None:
            if self.optional:
                return None
            raise RankkitError(f"{flag} needs a value for model {model}")
        try:
            if self.kind is bool:
                if not isinstance(value, bool):
                    raise ValueError(value)
                converted: Any = value
            elif isinstance(value, bool) or strict and not isinstance(value, _STRICT_TYPES[self.kind]):
                raise ValueError(value)
            elif self.kind is int and isinstance(value, float) and not value.is_integer():
                raise ValueError(value)  # int(2.5) would silently be 2; int(inf) an OverflowError
            else:
                converted = self.kind(value)
        except (TypeError, ValueError, OverflowError):
            also = "".join(f" or {word}" for word in self.words)
            kind = {int: "an integer", float: "a number"}.get(self.kind, f"a {self.kind.__name__}")
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise RankkitError(f"{flag} takes {kind}{also} for model {model}, got {shown}") from None
        if self.choices and converted not in self.choices:
            raise RankkitError(f"{flag} must be one of {', '.join(self.choices)} for model {model}, got {converted!r}")
        if self.kind in (int, float):
            if self.kind is float and not math.isfinite(converted):
                raise RankkitError(f"{flag} must be a finite number, got {converted}")
            if self.minimum is not None and converted < self.minimum:
                raise RankkitError(f"{flag} must be at least {self.minimum:g} for model {model}, got {converted}")
            maximum = self.maximum if self.maximum is not None else MAX_INT_SETTING if self.kind is int else None
            if maximum is not None and converted > maximum:
                shown = str(converted) if len(str(converted)) <= 24 else f"{float(converted):.3g}"
                raise RankkitError(f"{flag} must be at most {maximum:g} for model {model}, got {shown}")
        return converted


#: The types a setting of each kind accepts from a file or the Python API (an integral float is a whole number;
#: numpy's numbers count, being ``numbers.Real``).
_STRICT_TYPES: dict[type, tuple[type, ...]] = {int: (numbers.Real,), float: (numbers.Real,), str: (str,), bool: (bool,)}


def _unwrap(annotation: Any) -> tuple[type, bool, tuple[str, ...]]:
    """``(base type, accepts None, choices)`` of a field annotation (``int | None``, ``Literal[...]``)."""
    optional = False
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        optional = type(None) in args
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"unsupported option type {annotation!r}")
        annotation = rest[0]
    if typing.get_origin(annotation) is Literal:
        choices = tuple(str(c) for c in typing.get_args(annotation))
        return str, optional, choices
    if annotation not in (int, float, str, bool):
        raise TypeError(f"unsupported option type {annotation!r}")
    return annotation, optional, ()


@dataclass
class ModelConfig:
    """Settings every model has; subclasses add theirs and may redeclare these with other defaults.

    ``max_query_length``/``max_doc_length`` are set by ``rankkit train``'s generic options of the
    same names; ``backbone`` records where the weights came from.
    """

    max_query_length: int = option(32, help="query tokens", minimum=1, cli=False)
    max_doc_length: int | None = option(256, help="document tokens", minimum=1, cli=False)
    backbone: str | None = option(None, help="the Hugging Face folder the weights came from", cli=False)

    #: Names of the settings that come from generic ``rankkit train`` options, not model options.
    GENERIC: ClassVar[tuple[str, ...]] = ("max_query_length", "max_doc_length", "backbone")

    @classmethod
    def specs(cls) -> list[OptionSpec]:
        """Every declared setting of this config, in declaration order."""
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            kind, optional, choices = _unwrap(hints[f.name])
            meta = f.metadata
            out.append(OptionSpec(
                name=f.name, kind=kind, optional=optional, default=f.default, help=meta.get("help", ""),
                paper=meta.get("paper"), flag=meta.get("flag") or "--" + f.name.replace("_", "-"),
                choices=choices, minimum=meta.get("minimum"), maximum=meta.get("maximum"),
                cli=bool(meta.get("cli", True)), rerank_flag=meta.get("rerank_flag"),
                aliases=meta.get("aliases") or {}, words=meta.get("words") or {},
            ))
        return out

    @classmethod
    def model_options(cls) -> list[OptionSpec]:
        """The settings a user sets with this model's own ``rankkit train`` options."""
        return [s for s in cls.specs() if s.cli]

    @classmethod
    def build(cls: type[C], given: Mapping[str, Any], model: str) -> C:
        """A config from the defaults and the ``given`` settings (``None`` values = not given),
        each checked; then :meth:`resolve` fills the settings whose default depends on others."""
        specs = {s.name: s for s in cls.specs()}
        unknown = sorted(k for k, v in given.items() if v is not None and k not in specs)
        if unknown:
            raise RankkitError(f"model {model} has no setting {', '.join(unknown)}")
        values: dict[str, Any] = {k: specs[k].check(v, model) for k, v in given.items() if v is not None}
        config = cls(**values)
        config.resolve()
        return config

    def resolve(self) -> None:
        """Fill settings left at ``None`` whose value depends on others (subclasses override)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings (rankkit.json's ``hparams``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls: type[C], data: Mapping[str, Any], source: str) -> C:
        """The config recorded in a checkpoint (``source`` names the file in errors).

        Settings added after a checkpoint was written take their defaults.
        """
        specs = {s.name: s for s in cls.specs()}
        unknown = sorted(set(data) - set(specs))
        if unknown:
            raise InputError(source, None, f"unknown {cls.__name__} setting(s): {', '.join(unknown)}")
        try:
            values: dict[str, Any] = {k: specs[k].check(v, cls.__name__, strict=True) if v is not None else None
                                      for k, v in data.items()}
        except RankkitError as err:
            raise InputError(source, None, str(err)) from None
        return cls(**values)
