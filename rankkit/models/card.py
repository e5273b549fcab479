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
import re
import shlex
from pathlib import Path
from typing import Any, Mapping

from rankkit.errors import RankkitError
from rankkit.files.limits import read_json
from rankkit.hub import looks_like_hub_id
from rankkit.models.base import BiEncoder, RankingModel

CARD = "README.md"
#: Files of the training run that the card links when they sit beside it (written by the trainer).
TRAINING_FILES = {"metrics.csv": "the loss, learning rate and dev metrics of every logged step",
                  "training.png": "the loss and dev-metric curves", "train.log": "the JSONL training log",
                  "tensorboard": "TensorBoard event files (`tensorboard --logdir tensorboard`)"}


def _printable(value: Any) -> str:
    """``value`` as text on one line: characters that are not printable (a newline, a NUL, U+2028) written
    as their Python escapes, so nothing a checkpoint recorded can start a line of its own in the card."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _code(value: Any, *, cell: bool = False) -> str:
    """``value`` as a Markdown code span that shows it literally: a fence longer than any run of backticks
    in it, padded when it starts or ends with one; in a table ``cell``, ``|`` escaped (GFM splits cells first)."""
    text = _printable(value)
    if cell:
        text = text.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _plain(value: Any, *, cell: bool = False) -> str:
    """``value`` as Markdown text shown as it is: emphasis, links, HTML and (in a table ``cell``) pipes escaped."""
    text = re.sub(r"([\\`*_\[\]<>|#!])", r"\\\1", _printable(value))
    return text if cell or not text.startswith(("-", "+", "=")) else "\\" + text


def _front_matter(model: RankingModel, meta: Mapping[str, Any]) -> str:
    """The YAML metadata block the hub reads, written by a YAML serializer (never by string joining: a value
    holding a newline would add keys of its own); a base model is named only when it is a valid hub id."""
    import yaml

    base = meta.get("base_model") or {}
    data: dict[str, Any] = {"library_name": "rankkit",
                            "tags": ["rankkit", str(model.name),
                                     "dense-retrieval" if isinstance(model, BiEncoder) else "reranking"]}
    repo = base.get("repo_id") if isinstance(base, dict) else None
    if isinstance(repo, str) and looks_like_hub_id(repo) and "@" not in repo:
        data["base_model"] = repo
    data["pipeline_tag"] = "sentence-similarity" if isinstance(model, BiEncoder) else "text-ranking"
    return "---\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False) + "---"


def _base_model(base: Any) -> str:
    if not isinstance(base, dict) or not base:
        return "not recorded"
    via = base.get("via_init_checkpoint")
    parts = []
    repo = base.get("repo_id")
    if repo:
        if isinstance(repo, str) and looks_like_hub_id(repo) and "@" not in repo:
            parts.append(f"[{repo}](https://huggingface.co/{repo})")
        else:
            parts.append(_code(repo))
        if base.get("commit"):
            parts.append(f"commit {_code(base['commit'])}")
        if base.get("package"):
            parts.append(f"(packaged as {_code(base['package'])})")
    elif base.get("local_folder"):
        parts.append(f"a local folder {_code(base['local_folder'])}")
        if base.get("config_name_or_path"):
            parts.append(f"(its config names {_code(base['config_name_or_path'])})")
        if base.get("weights_sha256"):
            parts.append(f"with weights of SHA-256 {_code(base['weights_sha256'])}")
    text = " ".join(parts) if parts else "not recorded"
    if isinstance(via, dict):
        start = via.get("repo_id") or via.get("local_folder") or "a checkpoint"
        text += f"; trained on from the rankkit checkpoint {_code(start)}" + (f" (commit {_code(via['commit'])})"
                                                                              if via.get("commit") else "")
    return text


def _data(data: Any) -> list[str]:
    if not isinstance(data, dict):
        return ["not recorded"]
    rows = ["| file | SHA-256 | groups |", "| --- | --- | --- |"]
    for item in data.get("train", []) or []:
        if isinstance(item, dict):
            rows.append(f"| {_code(Path(str(item.get('path', '?'))).name, cell=True)} | "
                        f"{_code(item.get('sha256', '?'), cell=True)} | {_plain(item.get('groups', '?'), cell=True)} |")
    rows.append(f"\n{_plain(data.get('groups', '?'))} training groups in all.")
    return rows


def _settings(training: Any, hparams: Mapping[str, Any]) -> list[str]:
    rows = ["| setting | value |", "| --- | --- |"]
    if isinstance(training, dict):
        for key in ("loss", "lr", "warmup_steps", "optimizer", "weight_decay", "batch_size", "group_size", "grad_accum",
                    "world_size", "global_batch", "total_steps", "epochs", "max_grad_norm", "precision", "seed",
                    "teacher", "teacher_checkpoint", "alpha", "distillation", "init_checkpoint"):
            value = training.get(key)
            if value is not None:
                rows.append(f"| training.{key} | {_code(value, cell=True)} |")
    for key, value in sorted(hparams.items()):
        if value is not None:
            shown = json.dumps(value) if not isinstance(value, str) else value
            rows.append(f"| model.{_plain(key, cell=True)} | {_code(shown, cell=True)} |")
    return rows


def _usage(model: RankingModel, folder: Path, name: str) -> list[str]:
    from rankkit.models import lightning_ir

    shell = shlex.quote(_printable(name))  # one shell word on one line, whatever the folder is called
    if isinstance(model, BiEncoder):
        command = f"rankkit index --kind dense --model {model.name} --checkpoint {shell} --corpus CORPUS --index INDEX"
    else:
        command = f"rankkit rerank --model {model.name} --checkpoint {shell} --run RUN --topics TOPICS --corpus CORPUS -o OUT"
    lines = ["```bash", command, "```", "", "```python", "import rankkit",
             f"model = rankkit.load_model({model.name!r}, {name!r})", "```"]
    architectures: list[Any] = []
    try:
        architectures = read_json(folder / "config.json", within=folder).get("architectures") or []
    except (OSError, ValueError, AttributeError, RankkitError):
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
                  f"rankkit export {shell} LIGHTNING_IR_FOLDER --format lightning-ir", "```"]
    return lines


def render(model: RankingModel, meta: Mapping[str, Any], folder: Path, *, name: str | None = None) -> str:
    """The card's Markdown for ``model`` saved in ``folder`` with rankkit.json ``meta``."""
    shown = name or "CHECKPOINT"
    training = meta.get("training") or {}
    metrics = meta.get("metrics") or {}
    lines = [_front_matter(model, meta), "", f"# rankkit {_code(model.name)}", "",
             f"A {_code(model.name)} model trained with rankkit {_plain(meta.get('rankkit_version', ''))}.",
             "", f"**Paper:** {model.paper or 'none recorded'}.", "",
             f"**Base model:** {_base_model(meta.get('base_model'))}.", "", "## Training data", "",
             *_data(meta.get("data")), "", f"{_plain(meta.get('steps', '?'))} optimiser steps "
             f"({_plain(meta.get('epochs', '?'))} epochs).", "", "## Settings", "",
             *_settings(training, model.hparams), "", "## Metrics", ""]
    if not isinstance(metrics, dict):
        metrics = {}
    if metrics:
        lines += ["The last values the trainer recorded (`loss`: the mean training loss over the last `loss_steps` "
                  "optimiser steps, as the last line of metrics.csv; the others: the last dev evaluation, and the best "
                  "one).", "", "| measure | value |", "| --- | --- |"]
        lines += [f"| {_plain(key, cell=True)} | {value:.4f} |" if isinstance(value, float)
                  else f"| {_plain(key, cell=True)} | {_plain(value, cell=True)} |"
                  for key, value in sorted(metrics.items(), key=lambda item: str(item[0]))]
    if not any(key not in ("loss", "loss_steps") for key in metrics):
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
