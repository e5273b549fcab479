"""From settings to a :class:`~rankkit.training.config.TrainConfig`: what ``rankkit train`` and ``rankkit.train()`` share.

Both take the same settings (the command line by flag, Python by name), merge a TOML recipe under
them (``--config``/``config=``: what is given wins over the file, the file over the defaults),
check the chosen model's own settings against its declaration, apply the same cross-checks and
defaults, and turn qidpidtriples files into the groups they stand for. One path, so a notebook run
and a command-line run with the same settings train the same model.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, Mapping

from rankkit.errors import RankkitError
from rankkit.models import ModelSpec, get_spec
from rankkit.training import recipes
from rankkit.training.config import TrainConfig

#: How messages name rankkit.train's keyword arguments.
API = "train()"
#: TrainConfig fields given by the caller rather than as settings.
_NOT_SETTINGS = ("model_options",)


def setting_names() -> list[str]:
    """The settings of :class:`TrainConfig`, in declaration order (``rankkit train``'s own options)."""
    return [f.name for f in dataclasses.fields(TrainConfig) if f.name not in _NOT_SETTINGS]


#: Settings whose default depends on another one: None means "not given" until :func:`finish_config`.
_UNSET_UNTIL_CHECKED = ("alpha", "distillation")


def defaults() -> dict[str, Any]:
    """Every setting at ``rankkit train``'s default (``None``/``[]`` for the required model, train and
    output; ``None`` for alpha and distillation, which need a teacher checkpoint when given)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(TrainConfig):
        if f.name in _NOT_SETTINGS:
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = [] if f.name == "train" else None
    return {**out, **{name: None for name in _UNSET_UNTIL_CHECKED}}


def _convert(key: str, value: Any, hint: Any) -> Any:
    """A Python value checked against (and converted to) the annotation of setting ``key``."""
    if value is None:
        if type(None) in typing.get_args(hint) or key in ("model", "output"):
            return None
        raise RankkitError(f"train(): {key} needs a value, got None")

    def wrong(expected: str) -> RankkitError:
        return RankkitError(f"train(): {key} must be {expected}, got {value!r}")

    if key == "workers":  # auto (None) or a number of processes
        from rankkit.training.config import workers_setting

        return workers_setting(value)

    return recipes.convert_setting(value, recipes.kind_of(hint), wrong)


def api_settings(settings: Mapping[str, Any]) -> tuple[dict[str, Any], set[str], dict[str, Any]]:
    """``(values, given, model settings)`` of ``rankkit.train(**settings)``: every TrainConfig setting
    (given ones checked and converted, the rest at their defaults), the names given, and the
    remaining names, which must be settings of the chosen model (checked by :func:`model_options`)."""
    if "model_options" in settings:
        raise RankkitError("train(): give the model's own settings as keyword arguments (encoder='bi', ...), "
                           "not model_options=")
    hints = typing.get_type_hints(TrainConfig)
    values = defaults()
    given: set[str] = set()
    own: dict[str, Any] = {}
    for key, value in settings.items():
        if key in values:
            values[key] = _convert(key, value, hints[key])
            given.add(key)
        else:
            own[key] = value
    return values, given, own


def merge_recipe(values: dict[str, Any], given: set[str], config: Path | None
                 ) -> tuple[dict[str, Any], dict[str, Any], recipes.Recipe | None]:
    """``(values, the recipe's model settings, the recipe)``: the recipe's settings where none was given."""
    if config is None:
        return values, {}, None
    recipe = recipes.load_recipe(config, recipes.train_kinds())
    merged = dict(values)
    file_options: dict[str, Any] = {}
    for key, value in recipe.settings.items():
        if key in merged:
            if key not in given:
                merged[key] = value
        else:
            file_options[key] = value
    return merged, file_options, recipe


def model_spec(values: Mapping[str, Any]) -> ModelSpec:
    """The declaration of the model to train (the one setting without a default; no torch imported)."""
    if values.get("model") is None:
        raise RankkitError("--model is required (on the command line or as model = ... in --config)")
    return get_spec(values["model"])


def model_options(cls: ModelSpec, settings: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The chosen model's settings by name (from a recipe, or ``rankkit.train``'s keywords), each checked
    like its command-line flag; a name that is not one of them is a one-line error naming ``source``."""
    own = {spec.name: spec for spec in cls.config_class.model_options()}
    out = {}
    for key, value in settings.items():
        if key not in own:
            names = ", ".join(spec.name for spec in own.values()) or "none"
            if source == API:
                raise RankkitError(f"{API}: {key!r} is neither a rankkit train setting (rankkit train --help) nor a "
                                   f"setting of model {cls.name} (its settings: {names})")
            raise RankkitError(f"{source}: key {key!r} is not a setting of model {cls.name} (its settings: {names})")
        out[key] = own[key].check(value, cls.name, key, strict=True)  # typed in a recipe, as rankkit.json
    return out


def finish_config(values: Mapping[str, Any], options: Mapping[str, Any], recipe: recipes.Recipe | None) -> TrainConfig:
    """The :class:`TrainConfig` of merged settings, after the checks ``rankkit train`` makes before any work.

    Ids-only ``--train`` files (qidpidtriples, ``rankkit mine --ids-only`` groups) take their texts from the
    ``collection`` and ``queries`` settings, looked up when a step draws them (:mod:`rankkit.training.data`).
    """
    from rankkit.files import check_output_dir

    if recipe is not None:
        recipes.check_runnable(recipe, {**values, **options})
    if values["alpha"] is not None and values["teacher_checkpoint"] is None:
        raise RankkitError("--alpha weighs distillation from a teacher: it needs --teacher-checkpoint")
    if values["distillation"] is not None and values["teacher_checkpoint"] is None:
        raise RankkitError("--distillation chooses how to distil from a teacher: it needs --teacher-checkpoint")
    for key in ("train", "output"):
        if not values[key]:
            raise RankkitError(f"--{key} is required (on the command line or as {key} = ... in --config)")
    check_output_dir(values["output"], "--output")
    if values["device"] == "cpu" and values["precision"] != "auto":
        from rankkit.devices import check_precision_on

        check_precision_on(values["precision"], "cpu")  # before any file is read (no torch needed to know)
    from rankkit.training.config import workers_setting

    settings = {**values, "workers": workers_setting(values["workers"]),
                "alpha": 0.5 if values["alpha"] is None else values["alpha"],
                "distillation": values["distillation"] or "eq12", "train": list(values["train"])}
    return TrainConfig(**settings, model_options=dict(options))


__all__ = ["api_settings", "defaults", "finish_config", "merge_recipe", "model_options", "model_spec",
           "setting_names"]
