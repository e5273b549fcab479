"""Step checkpoints: resumable training state beside the model folder (``rankkit train --save-every``).

``OUTPUT/checkpoints/step-NNNNNNNN/`` holds a model folder (:mod:`rankkit.models.checkpoint`) plus
``trainer_state.json`` (step, best dev metric, settings that must match on resume) and
``optimizer.pt`` with optimizer, scheduler and RNG states. ``optimizer.pt`` is written with
:func:`torch.save` but contains only tensors, numbers, strings, lists and dicts, and is read back
with ``torch.load(weights_only=True)``, which refuses anything else (no arbitrary unpickling).
Folders are written to a temporary sibling and renamed into place, so a crash never leaves a
half-written step checkpoint.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Mapping

import torch

from rankkit.errors import InputError, RankkitError, excerpt
from rankkit.files import atomic_write, iter_raw_lines, remove_tree, staging_dir, writing_to
from rankkit.models import RankingModel, safe_loading
from rankkit.models.checkpoint import read_config, read_json, read_meta, write_json, write_model_files

TRAINER_STATE = "trainer_state.json"
OPTIMIZER_STATE = "optimizer.pt"
CHECKPOINTS = "checkpoints"


def step_dir(output: Path, step: int) -> Path:
    return output / CHECKPOINTS / f"step-{step:08d}"


def save_step_checkpoint(output: Path, model: RankingModel, meta: Mapping[str, Any],
                         trainer_state: Mapping[str, Any], optimizer_state: Mapping[str, Any],
                         *, keep: int = 1) -> Path:
    """Write ``OUTPUT/checkpoints/step-N`` atomically (temporary folder renamed), keep the newest ``keep``."""
    final = step_dir(output, int(trainer_state["step"]))
    # A locked staging folder with rankkit's temporary mark: one left by a SIGKILL is removed by the
    # next save into the same folder (rankkit.files.staging_dir).
    with staging_dir(final) as staging:
        tmp = staging / "checkpoint"
        tmp.mkdir()
        write_model_files(model, tmp, meta)
        write_json(tmp / TRAINER_STATE, trainer_state)
        torch.save(dict(optimizer_state), tmp / OPTIMIZER_STATE)
        if os.path.lexists(final):
            remove_tree(final, attempts=5)  # a link is removed as a link, never followed
        os.replace(tmp, final)
    if keep > 0:
        for old in list_step_checkpoints(output)[:-keep]:
            remove_tree(old, attempts=5)
    return final


def list_step_checkpoints(output: Path) -> list[Path]:
    """Complete step checkpoints of ``output``, oldest first."""
    root = output / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir()
             if p.is_dir() and p.name.startswith("step-") and (p / TRAINER_STATE).is_file()]
    return sorted(found, key=lambda p: p.name)


def load_step_checkpoint(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(trainer_state, optimizer_state)`` of a step checkpoint (``optimizer.pt`` loaded weights-only)."""
    state = read_json(folder / TRAINER_STATE)
    path = folder / OPTIMIZER_STATE
    if not path.is_file():
        raise InputError(path, None, "no such file")
    try:
        optim = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # corrupted or foreign file: a user-facing problem, not a crash
        raise InputError(path, None, f"cannot read optimizer state: {' '.join(str(err).split())[:200]}") from None
    _check_state(folder / TRAINER_STATE, state, path, optim)
    return state, optim


def _check_state(source: Path, state: Mapping[str, Any], optim_path: Path, optim: Any) -> None:
    """Typed step-checkpoint state, checked before the trainer takes a value from it (a copied or edited
    folder: ``"step": true`` would be step 1, ``"step": "x"`` a traceback)."""
    step = state.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        raise InputError(source, None, f"step = {excerpt(step)} is not a whole number from 0 to {MAX_STEP:,}")
    best = state.get("best_dev_mrr")
    if best is not None and (isinstance(best, bool) or not isinstance(best, (int, float)) or not math.isfinite(best)):
        raise InputError(source, None, f"best_dev_mrr = {excerpt(best)} is not a finite number")
    metrics = state.get("metrics", {})
    if not isinstance(metrics, dict):
        raise InputError(source, None, "'metrics' is not an object")
    if not isinstance(optim, dict) or not all(isinstance(optim.get(k), dict) for k in ("optimizer", "scheduler")) \
            or not isinstance(optim.get("rng"), (list, tuple)) or not optim["rng"]:
        raise InputError(optim_path, None, "not a rankkit optimizer state (expected 'optimizer', 'scheduler' and 'rng')")


#: Largest step a step checkpoint may record (``max_steps`` stops at 10^9).
MAX_STEP = 10**9


def load_step_weights(model: RankingModel, folder: Path) -> None:
    """Copy a step checkpoint's weights into an already built ``model`` of the same architecture."""
    safe_loading.check_checkpoint(folder)  # a resumed folder may have been copied from elsewhere
    saved = type(model).load(folder, read_config(type(model), read_meta(folder), folder))
    model.load_state_dict(saved.state_dict(), strict=True)




def rng_state() -> dict[str, Any]:
    """torch RNG states (dropout) as tensors, loadable with ``torch.load(weights_only=True)``."""
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# -- the output folder and its log ---------------------------------------------------------------

TRAIN_LOG = "train.log"


def check_output(output: Path, resume: bool, is_model_folder: bool) -> Path | None:
    """The step checkpoint to resume from (``--resume``), after checking the output folder."""
    if output.exists() and not output.is_dir():
        raise InputError(output, None, "output exists and is not a folder")
    steps = list_step_checkpoints(output)
    if resume:
        if not steps:
            raise RankkitError(f"nothing to resume in {output}: no step checkpoint (train with --save-every N)")
        return steps[-1]
    if steps or is_model_folder:
        raise RankkitError(
            f"{output} already holds a training run; pass --resume to continue it or pick a new --output")
    return None


def check_resume_keys(folder: Path, saved: Any, current: Mapping[str, Any]) -> None:
    """Refuse to resume when the settings that shape the run differ from the interrupted run's."""
    current = json.loads(json.dumps(current))
    if saved != current:
        saved = saved if isinstance(saved, dict) else {}
        # Keys on either side: optional settings (e.g. precision) are recorded only when given.
        differ = sorted(k for k in set(current) | set(saved) if saved.get(k) != current.get(k))
        raise RankkitError(f"cannot resume {folder}: settings differ from the interrupted run ({', '.join(differ)})")


def append_log(path: Path, record: Mapping[str, Any]) -> None:
    """One JSON line in train.log (appended: a full disk is one line naming the log, exit 1)."""
    with writing_to(path, path.parent, owned=[path]), open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


def truncate_log(path: Path, step: int) -> None:
    """Drop log lines written after the step a resumed run restarts from (they will be redone)."""
    if not path.is_file():
        return
    kept = []
    # Read line by line within the line limit (a copied folder's log may be anything); a line that is not one
    # of the log's records is dropped, as the records after the step are.
    with open(path, "rb") as raw:
        for _, data in iter_raw_lines(path, raw):
            line = data.decode("utf-8", errors="replace").rstrip("\r\n")
            try:
                if int(json.loads(line).get("step", 0)) <= step:
                    kept.append(line)
            except (ValueError, AttributeError, TypeError, OverflowError, RecursionError):
                continue
    with atomic_write(path) as handle:
        handle.write("".join(k + "\n" for k in kept))
