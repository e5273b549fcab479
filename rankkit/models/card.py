"""Model cards: the ``README.md`` written into every checkpoint ``rankkit train`` saves (the hub shows it as is).

The card is rendered from what the checkpoint records (rankkit.json's ``model``, ``hparams``,
``base_model``, ``training``, ``data``, ``metrics``) and from the files beside it, so it never says
more than was recorded: the model and its paper, the base model (hub repo id and commit, or the
local folder's weights fingerprint), the training data (files, SHA-256, group counts), the
settings, the last dev metrics, and how to load it in rankkit and, where the folder's format
allows, in transformers, sentence-transformers and lightning-ir.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from rankkit.models.base import BiEncoder, RankingModel

CARD = "README.md"
#: Files of the training run that the card links when they sit beside it (written by the trainer).
TRAINING_FILES = {"metrics.csv": "the loss, learning rate and dev metrics of every logged step",
                  "training.png": "the loss and dev-metric curves", "train.log": "the JSONL training log",
                  "tensorboard": "TensorBoard event files (`tensorboard --logdir tensorboard`)"}


def _front_matter(model: RankingModel, meta: Mapping[str, Any]) -> str:
    base = meta.get("base_model") or {}
    lines = ["---", "library_name: rankkit", "tags:", "- rankkit", f"- {model.name}",
             f"- {'dense-retrieval' if isinstance(model, BiEncoder) else 'reranking'}"]
    if isinstance(base, dict) and base.get("repo_id"):
        lines.append(f"base_model: {base['repo_id']}")
    lines.append(f"pipeline_tag: {'sentence-similarity' if isinstance(model, BiEncoder) else 'text-ranking'}")
    lines.append("---")
    return "\n".join(lines)


def _base_model(base: Any) -> str:
    if not isinstance(base, dict) or not base:
        return "not recorded"
    via = base.get("via_init_checkpoint")
    parts = []
    if base.get("repo_id"):
        parts.append(f"[{base['repo_id']}](https://huggingface.co/{base['repo_id']})")
        if base.get("commit"):
            parts.append(f"commit `{base['commit']}`")
        if base.get("package"):
            parts.append(f"(packaged as `{base['package']}`)")
    elif base.get("local_folder"):
        parts.append(f"a local folder `{base['local_folder']}`")
        if base.get("config_name_or_path"):
            parts.append(f"(its config names `{base['config_name_or_path']}`)")
        if base.get("weights_sha256"):
            parts.append(f"with weights of SHA-256 `{base['weights_sha256']}`")
    text = " ".join(parts) if parts else "not recorded"
    if isinstance(via, dict):
        start = via.get("repo_id") or via.get("local_folder") or "a checkpoint"
        text += f"; trained on from the rankkit checkpoint `{start}`" + (f" (commit `{via['commit']}`)"
                                                                          if via.get("commit") else "")
    return text


def _data(data: Any) -> list[str]:
    if not isinstance(data, dict):
        return ["not recorded"]
    rows = ["| file | SHA-256 | groups |", "| --- | --- | --- |"]
    for item in data.get("train", []) or []:
        if isinstance(item, dict):
            rows.append(f"| `{Path(str(item.get('path', '?'))).name}` | `{item.get('sha256', '?')}` | "
                        f"{item.get('groups', '?')} |")
    rows.append(f"\n{data.get('groups', '?')} training groups in all.")
    return rows


def _settings(training: Any, hparams: Mapping[str, Any]) -> list[str]:
    rows = ["| setting | value |", "| --- | --- |"]
    if isinstance(training, dict):
        for key in ("loss", "lr", "warmup_steps", "optimizer", "weight_decay", "batch_size", "group_size", "grad_accum",
                    "world_size", "global_batch", "total_steps", "epochs", "max_grad_norm", "precision", "seed",
                    "teacher", "teacher_checkpoint", "alpha", "distillation", "init_checkpoint"):
            value = training.get(key)
            if value is not None:
                rows.append(f"| training.{key} | `{value}` |")
    for key, value in sorted(hparams.items()):
        if value is not None:
            rows.append(f"| model.{key} | `{json.dumps(value) if not isinstance(value, str) else value}` |")
    return rows


def _usage(model: RankingModel, folder: Path, name: str) -> list[str]:
    from rankkit.models import lightning_ir

    if isinstance(model, BiEncoder):
        command = f"rankkit index --kind dense --model {model.name} --checkpoint {name} --corpus CORPUS --index INDEX"
    else:
        command = f"rankkit rerank --model {model.name} --checkpoint {name} --run RUN --topics TOPICS --corpus CORPUS -o OUT"
    lines = ["```bash", command, "```", "", "```python", "import rankkit",
             f"model = rankkit.load_model({model.name!r}, {name!r})", "```"]
    architectures: list[Any] = []
    try:
        architectures = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        pass
    if any(str(a).endswith("ForSequenceClassification") for a in architectures):
        lines += ["", "A standard Hugging Face sequence classifier (one label: the score):", "", "```python",
                  "import torch", "from sentence_transformers import CrossEncoder",
                  f"CrossEncoder({name!r}, activation_fn=torch.nn.Identity())  # rankkit's raw scores", "```"]
    if (folder / "modules.json").is_file():
        lines += ["", "A sentence-transformers model (its pooling and normalisation as rankkit encodes):", "",
                  "```python", "from sentence_transformers import SentenceTransformer",
                  f"SentenceTransformer({name!r})", "```"]
    if lightning_ir.exportable(model):
        lines += ["", "In lightning-ir's layout:", "", "```bash",
                  f"rankkit export {name} LIGHTNING_IR_FOLDER --format lightning-ir", "```"]
    return lines


def render(model: RankingModel, meta: Mapping[str, Any], folder: Path, *, name: str | None = None) -> str:
    """The card's Markdown for ``model`` saved in ``folder`` with rankkit.json ``meta``."""
    shown = name or "CHECKPOINT"
    training = meta.get("training") or {}
    metrics = meta.get("metrics") or {}
    lines = [_front_matter(model, meta), "", f"# rankkit `{model.name}`", "",
             f"A `{model.name}` model trained with rankkit {meta.get('rankkit_version', '')}.",
             "", f"**Paper:** {model.paper or 'none recorded'}.", "",
             f"**Base model:** {_base_model(meta.get('base_model'))}.", "", "## Training data", "",
             *_data(meta.get("data")), "", f"{meta.get('steps', '?')} optimiser steps "
             f"({meta.get('epochs', '?')} epochs).", "", "## Settings", "",
             *_settings(training, model.hparams), "", "## Metrics", ""]
    if metrics:
        lines += ["The last values the trainer recorded (`loss`: the last logged training loss; the others: the "
                  "last dev evaluation, and the best one).", "", "| measure | value |", "| --- | --- |"]
        lines += [f"| {key} | {value:.4f} |" if isinstance(value, float) else f"| {key} | {value} |"
                  for key, value in sorted(metrics.items())]
    if not any(key != "loss" for key in metrics):
        lines += ["", "No dev set was given (`rankkit train --dev GROUPS` evaluates one)."]
    linked = [f"- [{file}]({file}): {what}" for file, what in TRAINING_FILES.items() if (folder / file).exists()]
    if linked:
        lines += ["", "Training curves and logs beside this card:", "", *linked]
    lines += ["", "## How to load it", "", *_usage(model, folder, shown), ""]
    return "\n".join(lines)


def write_card(model: RankingModel, meta: Mapping[str, Any], folder: Path) -> Path:
    """Write :data:`CARD` into the checkpoint ``folder`` (after its model files: it describes them and
    links the training files beside them); the card names the checkpoint by its folder name."""
    from rankkit.files import atomic_write

    path = folder / CARD
    with atomic_write(path) as out:
        out.write(render(model, meta, folder, name=folder.name))
    return path


__all__ = ["CARD", "render", "write_card"]
