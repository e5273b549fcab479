"""Paper recipes: ``rankkit train --config FILE`` reads a TOML file of training settings.

A recipe (``recipes/*.toml``) holds one paper experiment's hyper-parameters, each under a comment
quoting the sentence of the paper it comes from::

    [recipe]                      # what the file is (all optional)
    paper = "Luo et al., 2022, MatRank: Text Re-ranking by Latent Preference Matrix"
    experiment = "MS MARCO passage re-ranking (Table 1)"
    backbone = "the paper's encoder; rankkit's packaged MiniLM is used unless --backbone"
    cannot_run = "why the paper's setting cannot run on the packaged MiniLM"  # refused without --backbone
    cannot_run_settings = ["piece_length"]  # ... unless one of these settings is overridden
    first_stage = "how the training candidates are retrieved: the commands and settings of that stage"
    [recipe.requires]             # settings the user must give, and what they are
    teacher = "a teacher run (TREC format) scoring every training query's candidates"
    [recipe.from_rankkit]         # settings whose value is rankkit's, not the paper's: why
    max_grad_norm = "1.0, rankkit train's default: the paper states no gradient clipping"

    [train]                       # any rankkit train option by its name (batch_size, group_size, ...)
    model = "matrank"             # and the model's own settings by name (window, encoder, hidden, ...)
    group_size = 97

``[recipe.from_rankkit]`` names every setting whose value comes from rankkit (a default the recipe
leaves unset, or rankkit's choice where the paper gives no number) rather than from the paper or the
authors' published configuration, so a reader sees what the paper does not fix.

Command-line flags override the file; ``--print-config`` prints the merged settings as TOML (a
file ``--config`` reads back). Unknown sections or keys, and values of the wrong type, are
one-line errors naming the file and the key. Relative paths are relative to the current directory,
as on the command line.
"""

from __future__ import annotations

import json
import math
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from rankkit.errors import InputError, RankkitError
from rankkit.files.limits import read_toml
from rankkit.hub import ModelReference

RECIPE_KEYS = ("paper", "experiment", "backbone", "cannot_run", "cannot_run_settings", "first_stage", "requires",
               "from_rankkit")
#: The [recipe] strings, in the order --print-config shows them.
RECIPE_TEXTS = ("paper", "experiment", "backbone", "cannot_run", "first_stage")


@dataclass(frozen=True)
class Worded:
    """The kind of a number setting that also takes words (``position_passages = "none"``)."""

    base: Any
    words: tuple[str, ...]


@dataclass
class Recipe:
    """A parsed config file: its ``[train]`` settings and what ``[recipe]`` says about them."""

    path: Path
    settings: dict[str, Any]
    paper: str | None = None
    experiment: str | None = None
    backbone: str | None = None
    cannot_run: str | None = None
    #: The [train] settings ``cannot_run`` is about: overriding any of them (or --backbone) lifts it.
    cannot_run_settings: list[str] = field(default_factory=list)
    requires: dict[str, str] = field(default_factory=dict)
    #: How the training candidates are retrieved (a stage before ``rankkit train``, e.g. BM25's k1 and b).
    first_stage: str | None = None
    #: Settings whose value is rankkit's (a default left unset, or rankkit's choice), not the paper's: why.
    from_rankkit: dict[str, str] = field(default_factory=dict)


def kind_of(annotation: Any) -> Any:
    """``int``/``float``/``str``/``bool``/``Path``/``list[Path]`` of a resolved annotation (``X | None`` unwrapped)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return kind_of(args[0])
    return annotation


def train_kinds() -> dict[str, Any]:
    """Every key ``[train]`` accepts: :class:`TrainConfig`'s fields and every registered model's settings."""
    from rankkit.models import specs
    from rankkit.training.config import TrainConfig

    hints = typing.get_type_hints(TrainConfig)
    kinds = {name: kind_of(hint) for name, hint in hints.items() if name != "model_options"}
    kinds["workers"] = Worded(int, ("auto",))  # workers = "auto" or a number of processes
    for model in specs().values():
        for spec in model.config_class.model_options():
            kinds.setdefault(spec.name, Worded(spec.kind, tuple(spec.words)) if spec.words else spec.kind)
    return kinds


def convert_setting(value: Any, kind: Any, wrong: Callable[[str], Exception]) -> Any:
    """``value`` checked against ``kind`` (``int``, ``float``, ``str``, ``bool``, ``Path``, a :class:`Worded`
    number or a list of one, see :func:`kind_of`) and converted; ``wrong(expected)`` makes the error. A
    single value stands for a one-item list; a path may be any ``os.PathLike`` (``rankkit.train``) or a
    string (TOML)."""
    if isinstance(kind, Worded):
        if isinstance(value, str) and value.strip().lower() in kind.words:
            return value  # the model's own check turns the word into its value
        expected = f"{'an integer' if kind.base is int else 'a number'} or {' or '.join(map(repr, kind.words))}"
        return convert_setting(value, kind.base, lambda _: wrong(expected))
    if typing.get_origin(kind) is list:
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        return [convert_setting(item, typing.get_args(kind)[0], wrong) for item in items]
    if kind is bool:
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong("an integer")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise wrong("a number")
        return float(value)
    if kind is Path:
        if not isinstance(value, (str, os.PathLike)) or not str(value):
            raise wrong("a path (a string)")
        return Path(value)
    if kind is ModelReference:  # a folder (string or path) or a hub id, kept as given
        if not isinstance(value, (str, os.PathLike)) or not str(value):
            raise wrong("a model folder or hub id (a string or a path)")
        return os.fspath(value)
    if kind is str:
        if not isinstance(value, str):
            raise wrong("a string")
        return value
    raise wrong(getattr(kind, "__name__", str(kind)))


def _convert(path: Path, key: str, value: Any, kind: Any) -> Any:
    def wrong(expected: str) -> InputError:
        return InputError(path, None, f"{key} = {json.dumps(value, default=str)}: expected {expected}")

    return convert_setting(value, kind, wrong)


def load_recipe(path: Path, kinds: Mapping[str, Any]) -> Recipe:
    """The config file ``path``; ``kinds`` maps every accepted ``[train]`` key to its type."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "no such config file")
    data = read_toml(path)  # size and nesting bounded (rankkit.files.limits)
    for section in data:
        if section not in ("recipe", "train"):
            raise InputError(path, None, f"unknown section or key {section!r} (known: [recipe], [train])")
    train = data.get("train", {})
    about = data.get("recipe", {})
    if not isinstance(train, dict) or not isinstance(about, dict):
        raise InputError(path, None, "[recipe] and [train] must be tables")
    for key in about:
        if key not in RECIPE_KEYS:
            raise InputError(path, None, f"unknown key {key!r} in [recipe] (known: {', '.join(RECIPE_KEYS)})")
    requires = _setting_notes(path, about, "requires", kinds)
    from_rankkit = _setting_notes(path, about, "from_rankkit", kinds)
    for key in RECIPE_TEXTS:
        if key in about and not isinstance(about[key], str):
            raise InputError(path, None, f"[recipe] {key} must be a string")
    lifted_by = about.get("cannot_run_settings", [])
    if not isinstance(lifted_by, list) or not all(isinstance(k, str) and k in train for k in lifted_by):
        raise InputError(path, None, "[recipe] cannot_run_settings must list keys of [train]")
    settings: dict[str, Any] = {}
    for key, value in train.items():
        if key not in kinds:
            raise InputError(path, None, f"unknown key {key!r} in [train] (not a rankkit train option or model setting)")
        settings[key] = _convert(path, key, value, kinds[key])
    return Recipe(path=path, settings=settings, paper=about.get("paper"), experiment=about.get("experiment"),
                  backbone=about.get("backbone"), cannot_run=about.get("cannot_run"),
                  cannot_run_settings=list(lifted_by), requires=requires, first_stage=about.get("first_stage"),
                  from_rankkit=from_rankkit)


def _setting_notes(path: Path, about: Mapping[str, Any], table: str, kinds: Mapping[str, Any]) -> dict[str, str]:
    """``[recipe.<table>]``: setting names (keys ``[train]`` accepts) mapped to a description each."""
    notes = about.get(table, {})
    if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
        raise InputError(path, None, f"[recipe.{table}] must map setting names to descriptions")
    for key in notes:
        if key not in kinds:
            raise InputError(path, None, f"unknown key {key!r} in [recipe.{table}] (not a rankkit train option or "
                                         "model setting)")
    return dict(notes)


def check_runnable(recipe: Recipe, merged: Mapping[str, Any]) -> None:
    """Refuse, with the recipe's own reason, a recipe that cannot run as merged."""
    kept = all(merged.get(key) == recipe.settings[key] for key in recipe.cannot_run_settings)
    if recipe.cannot_run and merged.get("backbone") is None and kept:
        raise RankkitError(f"{recipe.path}: cannot run with the packaged all-MiniLM-L6-v2: {recipe.cannot_run}")
    for key, what in recipe.requires.items():
        if merged.get(key) in (None, [], False):
            raise RankkitError(f"{recipe.path}: needs --{key.replace('_', '-')}: {what}")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


def format_settings(merged: Mapping[str, Any], recipe: Recipe | None) -> str:
    """The merged settings as TOML (``--print-config``); ``None`` values are shown as comments."""
    lines = ["# rankkit train settings" + (f": {recipe.path}, then the command line" if recipe else "")]
    if recipe is not None:
        lines.append("[recipe]")
        for key in (*RECIPE_TEXTS, "cannot_run_settings"):
            if getattr(recipe, key):
                lines.append(f"{key} = {_toml_value(getattr(recipe, key))}")
        for table in ("requires", "from_rankkit"):
            notes: dict[str, str] = getattr(recipe, table)
            if notes:
                lines.append(f"[recipe.{table}]")
                lines += [f"{key} = {_toml_value(what)}" for key, what in notes.items()]
    lines.append("[train]")
    for key, value in merged.items():
        if key == "workers" and value is None:
            lines.append('workers = "auto"')
        elif value is None or value == []:
            lines.append(f"# {key}: not set (the model's default or none)")
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"
