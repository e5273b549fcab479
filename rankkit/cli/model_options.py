"""Model options on the command line, generated from each model's typed settings (:mod:`rankkit.models.config`).

``rankkit train`` gets one option per setting declared by any registered model (the union; a
setting shared by several models is one option), ``rankkit rerank`` one per inference-time
override (``rerank_flag``). The command function's signature is rebuilt from the registry each
time the CLI runs (:func:`install`), so a model registered by a plug-in gets its options with no
other change. Given options are checked against the chosen model: one it does not have is
refused with that model's own option list.

Everything here reads the models' declarations (:func:`rankkit.models.specs`), never their networks: the
options, ``--help`` and a refused option cost no torch. A declaration whose options the command line
cannot take (a flag another option of the command already has, or that another model declares with
another type) is one warning naming the model (and its plug-in), and its options are left out.
"""

from __future__ import annotations

import copy
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

import typer

from rankkit.errors import RankkitError

if TYPE_CHECKING:
    from rankkit.models.config import ModelConfig, OptionSpec
    from rankkit.models.declaration import ModelSpec


class Declared(Protocol):
    """What the option code reads of a model: a declaration, or a network class (the same attributes)."""

    @property
    def name(self) -> str: ...

    @property
    def config_class(self) -> type[ModelConfig]: ...

PANEL = "Model options (each applies to some models: rankkit train --model NAME --help)"
RERANK_PANEL = "Model options (inference-time overrides)"


@dataclass(frozen=True)
class CliOption:
    """One generated command-line option: the Python parameter and what it sets."""

    param: str  # the keyword the command function receives
    kind: type
    decls: str  # typer param declaration ("--hidden", "--freeze-encoder/--tune-encoder")
    help: str
    setting: str  # the config field it sets
    value: Any = None  # for alias flags: the value it sets (None: the option's own value)
    models: tuple[str, ...] = ()  # the models that declare it (named when it cannot be added)


def _models() -> dict[str, ModelSpec]:
    """Every declared model (plug-ins included; their declarations only, no networks)."""
    from rankkit.models import specs

    return specs()


def _owners(setting: str, models: dict[str, ModelSpec]) -> list[str]:
    """The models with a ``rankkit train`` option for ``setting``."""
    return [name for name, cls in sorted(models.items())
            if any(s.name == setting and s.cli for s in cls.config_class.specs())]


def train_options() -> list[CliOption]:
    """The union of every registered model's ``rankkit train`` options (first declaration's help)."""
    seen: dict[str, CliOption] = {}
    models = _models()
    for name, cls in sorted(models.items()):
        for spec in cls.config_class.model_options():
            if spec.name not in seen:
                owners = _owners(spec.name, models)
                kind = str if spec.words else spec.kind  # a word (e.g. none) is parsed by the spec's check
                seen[spec.name] = CliOption(spec.name, kind, spec.flag, f"{', '.join(owners)}: {spec.help}", spec.name,
                                            models=tuple(owners))
            for flag, value in spec.aliases.items():
                param = flag.lstrip("-").replace("-", "_")
                if param not in seen:
                    seen[param] = CliOption(param, bool, flag, f"{name}: same as {spec.flag} {value}", spec.name,
                                            value, models=(name,))
    return list(seen.values())


def rerank_options(bi_encoders_only: bool = False) -> list[CliOption]:
    """Inference-time overrides declared by any model (``option(..., rerank_flag=...)``)."""
    seen: dict[str, CliOption] = {}
    for _, cls in sorted(_models().items()):
        if bi_encoders_only and cls.family != "bi-encoder":
            continue
        for spec in cls.config_class.specs():
            if spec.rerank_flag and spec.rerank_flag not in seen:
                param = spec.rerank_flag.lstrip("-").replace("-", "_")
                kind = str if spec.words else spec.kind
                owners = tuple(n for n, m in sorted(_models().items())
                               if any(s.rerank_flag == spec.rerank_flag for s in m.config_class.specs()))
                seen[spec.rerank_flag] = CliOption(param, kind, spec.rerank_flag, _inference_help(spec.help), spec.name,
                                                   models=owners)
    return list(seen.values())


def _inference_help(text: str) -> str:
    """A setting's help for an inference-time override: the default is the checkpoint's own value
    (the declared rule, ``[default: ...]``, applies to a zero-shot model)."""
    head, bracket, rule = text.partition(" [default: ")
    return f"{head} [default: as trained; zero-shot: {rule}" if bracket else f"{text} [default: as trained]"


def dense_index_options() -> list[CliOption]:
    """``rankkit index --kind dense``'s model options: the bi-encoders' inference-time settings
    (e.g. repbert's ``--pooling``, ``--query-prefix``), recorded in the index and used by its searches."""
    return rerank_options(bi_encoders_only=True)


#: Commands whose model options are generated: name -> (function, option builder, help panel).
GENERATED: dict[str, tuple[Callable[..., Any], Callable[[], list[CliOption]], str]] = {}


def model_options_of(name: str, build: Callable[[], list[CliOption]], panel: str
                     ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator (below ``@app.command``): ``name``'s ``**options`` come from ``build()`` when that
    command runs (:func:`setup_for`); until then the signature has none (no model is imported)."""

    def mark(command: Callable[..., Any]) -> Callable[..., Any]:
        install(command, [], "")
        GENERATED[name] = (command, build, panel)
        return command

    return mark


def _with_model_names(param: inspect.Parameter, names: str) -> inspect.Parameter:
    """``param`` with ``{models}`` in its help replaced by the registered models' names (plug-ins included)."""
    info = param.default
    help_text = getattr(info, "help", None)
    if not isinstance(help_text, str) or "{models}" not in help_text:
        return param
    info = copy.copy(info)
    info.help = help_text.replace("{models}", names)
    return param.replace(default=info)


def install(command: Callable[..., Any], options: list[CliOption], panel: str) -> None:
    """Give ``command`` (a function ending in ``**options``) a signature with ``options`` appended."""
    original = getattr(command, "__rankkit_signature__", None) or inspect.signature(command)
    command.__rankkit_signature__ = original  # type: ignore[attr-defined]
    names = ", ".join(sorted(_models())) if options else "any registered model"
    fixed = [_with_model_names(p, names) for p in original.parameters.values()
             if p.kind != inspect.Parameter.VAR_KEYWORD]
    annotations = {p.name: p.annotation for p in fixed}
    taken = set(annotations)
    flags = {flag for p in fixed for flag in _flags_of(p)}
    params = list(fixed)
    for opt in options:
        mine = {flag for part in opt.decls.split("/") for flag in part.split()}
        if opt.param in taken or mine & flags:
            _left_out(opt)
            continue
        taken.add(opt.param)
        flags |= mine
        annotation = Optional[bool] if opt.kind is bool and opt.value is None else (bool if opt.kind is bool
                                                                                  else Optional[opt.kind])
        default = False if opt.value is not None else None
        info = typer.Option(default, opt.decls, help=opt.help, rich_help_panel=panel, show_default=False)
        params.append(inspect.Parameter(opt.param, inspect.Parameter.KEYWORD_ONLY, default=info,
                                        annotation=annotation))
        annotations[opt.param] = annotation
    command.__signature__ = original.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {**annotations, "return": None}


def _flags_of(param: inspect.Parameter) -> set[str]:
    """The flags of a command's own parameter (``--output``, ``-o``, ``--model``, ...)."""
    info = param.default
    decls = [d for d in (getattr(info, "param_decls", None) or ()) if isinstance(d, str)]
    return {flag for decl in decls for part in decl.split("/") for flag in part.split()} | {
        "--" + param.name.replace("_", "-")}


def _left_out(opt: CliOption) -> None:
    """A model option the command line cannot take (its flag is the command's own): one warning naming the
    models that declare it and the plug-ins that provide them; those models keep their other options."""
    from rankkit.console import warn
    from rankkit.models import PROVIDERS

    who = ", ".join(f"{m} (plug-in {PROVIDERS[m]})" if m in PROVIDERS else m for m in opt.models) or "a model"
    warn(f"model option {opt.decls.split('/')[0]} of {who} is the command's own option: left out")


def model_settings(cls: Declared, given: dict[str, Any], options: list[CliOption]) -> dict[str, Any]:
    """The chosen model's settings from the generated options that were given (others refused)."""
    by_param = {o.param: o for o in options}
    own = {s.name: s for s in cls.config_class.model_options()}
    settings: dict[str, Any] = {}
    used: dict[str, str] = {}
    for param, value in given.items():
        if value is None or value is False and by_param[param].value is not None:
            continue
        opt = by_param[param]
        if opt.setting not in own:
            flags = ", ".join(s.flag for s in own.values()) or "none"
            raise RankkitError(f"{opt.decls.split('/')[0]} is not an option of model {cls.name}; "
                               f"{cls.name}'s options: {flags}")
        if opt.setting in used:
            raise RankkitError(f"{used[opt.setting]} and {opt.decls.split('/')[0]} set the same thing: give one")
        used[opt.setting] = opt.decls.split("/")[0]
        settings[opt.setting] = opt.value if opt.value is not None else value
    for name, value in settings.items():
        own[name].check(value, cls.name, used[name])
    return settings


def declaration_of(name: str, checkpoint: str | Path | None = None) -> ModelSpec:
    """Model ``name``'s declaration (no torch). When it is unknown and ``checkpoint`` is a local rankkit
    checkpoint of a plug-in model, the error names the package that provides it."""
    from rankkit.models import get_spec

    try:
        return get_spec(name)
    except RankkitError:
        if checkpoint is not None:
            from rankkit.models.checkpoint import model_class

            model_class(name, checkpoint)  # raises the error naming the plug-in package the checkpoint recorded
        raise


def rerank_settings(cls: Declared, given: dict[str, Any]) -> dict[str, Any]:
    """The chosen model's inference-time overrides from the generated rerank options that were given."""
    specs = {s.rerank_flag: s for s in cls.config_class.specs() if s.rerank_flag}
    out: dict[str, Any] = {}
    for opt in rerank_options():
        value = given.get(opt.param)
        if value is None:
            continue
        if opt.decls not in specs:
            owners = ", ".join(name for name, model in sorted(_models().items())
                               if any(s.rerank_flag == opt.decls for s in model.config_class.specs()))
            raise RankkitError(f"{opt.decls} applies to {owners} only, not {cls.name!r}")
        spec = specs[opt.decls]
        out[spec.name] = spec.check(value, cls.name, opt.decls)
    return out


def loss_help() -> str:
    """``--loss``'s help, generated from the loss classes and the registry: which models each loss fits
    (a loss declares the model output it reads; a model declares the output it returns)."""
    from rankkit.models.losses import LOSSES

    models = _models()
    groups: dict[str, list[str]] = {}
    for name, loss in sorted(LOSSES.items()):
        fits = sorted(m for m, cls in models.items() if loss.accepts(cls.output_type))
        who = "every model" if len(fits) == len(models) else ", ".join(fits) or "no registered model"
        groups.setdefault(who, []).append(name)
    parts = [f"{', '.join(names)} ({who})" for who, names in sorted(groups.items(), key=lambda kv: kv[0] != "every model")]
    return ("Training objective: " + "; ".join(parts) + " [default: the model's]. `rankkit models NAME` shows NAME's.")


def describe_losses(command: Callable[..., Any]) -> None:
    """Give ``command``'s ``--loss`` option the generated :func:`loss_help`."""
    parameter = inspect.signature(command).parameters.get("loss")
    if parameter is not None and hasattr(parameter.default, "help"):
        parameter.default.help = loss_help()


def print_model_help(name: str) -> None:
    """``rankkit train --model NAME --help``: the model's own options, defaults and sources (plain text)."""
    from rankkit.models import get_spec

    cls = get_spec(name)
    lines = [f"rankkit train --model {name}: {cls.summary or name}", "", f"{name}'s own options:"]
    for spec in cls.config_class.model_options():
        lines.append(f"  {spec.flag} {_type_name(spec)}  [default: {spec.describe_default()}]")
        lines.append(f"      {spec.help}" + (f" ({spec.paper})" if spec.paper else ""))
        if spec.aliases:
            lines.append("      also: " + ", ".join(f"{flag} (= {value})" for flag, value in spec.aliases.items()))
    if len(lines) == 3:
        lines.append("  (none)")
    generic = [s for s in cls.config_class.specs() if s.name in ("max_query_length", "max_doc_length")]
    d = cls.training_defaults
    lines += ["", "defaults of generic options: " + ", ".join(
        f"--{s.name.replace('_', '-')} {s.describe_default()}" for s in generic)
        + f", --loss {d.loss}, --lr {d.lr:g}, --weight-decay {d.weight_decay:g}",
        "every other option: rankkit train --help"]
    sys.stdout.write("\n".join(lines) + "\n")


def _type_name(spec: OptionSpec) -> str:
    if spec.choices:
        return "|".join(spec.choices)
    return "flag" if spec.kind is bool else "|".join([spec.kind.__name__, *spec.words])


def _dense_index(args: list[str]) -> bool:
    """True when ``rankkit index ARGS`` builds (or explains) a dense index: its model options are needed."""
    return ("--help" in args or "-h" in args or "--kind=dense" in args
            or any(a == "--kind" and args[i + 1:i + 2] == ["dense"] for i, a in enumerate(args)))


def setup_for(args: list[str]) -> bool:
    """Before the CLI parses ``args``: generate the model options of ``train``/``rerank``/``serve`` when one of
    them runs, and answer ``rankkit train --model NAME --help`` with NAME's own options (True when
    that help was printed). Other commands never import the model library."""
    command = next((a for a in args if not a.startswith("-")), None)
    if command == "index" and not _dense_index(args):
        return False  # a BM25 index never imports the model library
    if command not in ("train", "rerank", "serve", "index"):
        return False
    if command in GENERATED:
        function, build, panel = GENERATED[command]
        install(function, build(), panel)
        if command == "train":
            describe_losses(function)
    if command == "train" and ("--help" in args or "-h" in args):
        name = None
        for i, arg in enumerate(args):
            if arg == "--model" and i + 1 < len(args):
                name = args[i + 1]
            elif arg.startswith("--model="):
                name = arg.split("=", 1)[1]
        if name is not None:
            print_model_help(name)
            return True
    return False
