"""The Python API's training: :func:`train` (``rankkit train`` with the same settings under their Python names)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from rankkit.api.inputs import PathLike

if TYPE_CHECKING:
    from rankkit.training.config import StepInfo, TrainResult


def train(model: str | None = None, train: PathLike | Sequence[PathLike] | None = None, output: PathLike | None = None,
          *, config: PathLike | None = None, collection: PathLike | None = None, queries: PathLike | None = None,
          callbacks: Sequence[Callable[[StepInfo], None]] = (), **settings: Any) -> TrainResult:
    """Train a model as ``rankkit train`` does, with the same settings under their Python names.

    ``settings`` are ``rankkit train``'s options (``epochs``, ``max_steps``, ``batch_size``, ``lr``,
    ``dev``, ``report_to``, ... the fields of :class:`rankkit.training.TrainConfig`, same defaults) and
    the model's own settings (``rankkit train --model NAME --help``: ``encoder="bi"``, ...), each
    checked against its declared type. ``config`` is a TOML recipe (``recipes/*.toml``); arguments
    given here override it. ``callbacks`` run after every optimiser step with a
    :class:`~rankkit.training.StepInfo`. Returns where the model went, its steps and metrics; the
    folder holds the model, ``train.log``, ``metrics.csv`` and ``training.png``.
    """
    from rankkit.training import train as run_training
    from rankkit.training.settings import API, api_settings, finish_config, merge_recipe, model_options, model_spec

    if model is not None:
        settings["model"] = model
    if train is not None:
        settings["train"] = train
    if output is not None:
        settings["output"] = output
    if collection is not None:
        settings["collection"] = collection
    if queries is not None:
        settings["queries"] = queries
    values, given, own = api_settings(settings)
    values, file_options, recipe = merge_recipe(values, given, None if config is None else Path(config))
    cls = model_spec(values)
    options = {**model_options(cls, file_options, str(config)), **model_options(cls, own, API)}
    return run_training(finish_config(values, options, recipe), callbacks)
