"""``rankkit train``: fine-tune or train a ranking model on training groups (thin wrapper of the engine)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from rankkit.cli.app import app
from rankkit.cli.model_options import PANEL, model_options_of, model_settings, train_options
from rankkit.errors import RankkitError


@app.command("train")
@model_options_of("train", train_options, PANEL)
def train_command(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", help="Model to train (rankkit models lists them; rankkit train --model NAME --help shows NAME's options). Required, here or in --config."),
    train: list[Path] = typer.Option([], "--train", help="Training groups JSONL (rankkit or FlagEmbedding shape) or MS MARCO triples (text, or qidpidtriples with --collection/--queries); repeatable. Required, here or in --config."),
    collection: Optional[Path] = typer.Option(None, "--collection", help="Passage texts of ids-only --train files (qidpidtriples, rankkit mine --ids-only groups): collection.tsv, any corpus, BEIR folder or irds:ID; read through its docid table when a step draws them."),
    queries: Optional[Path] = typer.Option(None, "--queries", help="Query texts of ids-only --train files: queries.train.tsv, any topics file or irds:ID."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Checkpoint folder to write. Required, here or in --config."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file of settings (a paper recipe: recipes/*.toml); flags given here override it."),
    print_config: bool = typer.Option(False, "--print-config", help="Print the merged settings (--config + flags) as TOML and exit."),
    backbone: Optional[Path] = typer.Option(None, "--backbone", help="Local Hugging Face folder (default: packaged all-MiniLM-L6-v2)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Passes over the data (default: 1)."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Optimiser steps (overrides --epochs)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Groups per forward pass per process."),
    group_size: int = typer.Option(8, "--group-size", help="Candidates per group: 1 positive + N-1 sampled negatives."),
    grad_accum: int = typer.Option(1, "--grad-accum", help="Micro-batches accumulated per optimiser step."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Peak learning rate [default: the model's, e.g. repbert 2e-5, densetrans 1e-4]."),
    warmup: float = typer.Option(0.1, "--warmup", help="Warm-up: fraction of the steps (<1) or a number of steps."),
    optimizer: str = typer.Option("adamw", "--optimizer", help="adamw or adafactor."),
    weight_decay: Optional[float] = typer.Option(None, "--weight-decay", help="[default: the model's, e.g. repbert 0.01, densetrans 0]."),
    max_grad_norm: float = typer.Option(1.0, "--max-grad-norm", help="Gradient clipping norm (0: off)."),
    max_query_length: Optional[int] = typer.Option(None, "--max-query-length", help="Query tokens [default: the model's, e.g. repbert 20, densetrans 30]."),
    max_doc_length: Optional[int] = typer.Option(None, "--max-doc-length", help="Document tokens [default: the model's, e.g. repbert 256, densetrans 30]."),
    seed: int = typer.Option(42, "--seed"),
    save_every: Optional[int] = typer.Option(None, "--save-every", help="Write a resumable step checkpoint every N steps."),
    keep_checkpoints: int = typer.Option(1, "--keep-checkpoints", help="Step checkpoints kept (0: all)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the newest step checkpoint in --output."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    dev: list[Path] = typer.Option([], "--dev", help="Dev groups: MRR of the positive each epoch, best kept in OUTPUT/best."),
    dev_max_candidates: int = typer.Option(100, "--dev-max-candidates", help="Candidates scored per dev group."),
    loss: Optional[str] = typer.Option(None, "--loss", help="Training objective [default: the model's]: listwise-ce, ranknet, hinge, pointwise-ce, margin-mse, kl for every model; multilabel-margin, softmax-ce for bi-encoders; matrank for the MatRank models; passage-ce (passage-level labels) for maxp, firstp, sump, avgp, kmaxp."),
    teacher: Optional[Path] = typer.Option(None, "--teacher", help="Teacher run for ranknet/margin-mse/kl distillation."),
    teacher_checkpoint: Optional[Path] = typer.Option(None, "--teacher-checkpoint", help="Distil from this rankkit checkpoint (PARADE Eq. 12; see --distillation)."),
    alpha: Optional[float] = typer.Option(None, "--alpha", help="With --teacher-checkpoint: weight of the student's own loss, in [0, 1] (default: 0.5)."),
    distillation: Optional[str] = typer.Option(None, "--distillation", help="With --teacher-checkpoint: eq12 (default; PARADE Eq. 12 as written: ALPHA x point-wise cross-entropy + (1 - ALPHA) x squared logit difference per document) or loss-mse (ALPHA x --loss + (1 - ALPHA) x per-group score MSE)."),
    log_every: int = typer.Option(10, "--log-every", help="Write the loss to train.log every N steps."),
    init_checkpoint: Optional[Path] = typer.Option(None, "--init-checkpoint", help="Start from this rankkit checkpoint's weights (same model, or one with a compatible encoder) with a fresh optimiser and schedule."),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing", help="Recompute the transformer blocks' activations in the backward pass: less memory, about one more forward pass per step."),
    precision: str = typer.Option("fp32", "--precision", help="fp32; bf16 autocast (CPU and CUDA); fp16 autocast with loss scaling (CUDA only). Weights and checkpoints stay fp32."),
    workers: int = typer.Option(0, "--workers", help="Processes preparing batches ahead of the training thread (0: on it); same batches either way."),
    whole_lists: bool = typer.Option(False, "--whole-lists", help="Each group's whole candidate list in teacher order (up to --group-size), not 1 positive + sampled negatives; teacher scores from the groups (rankkit mine --teacher-list K). For ranknet/kl/hinge distillation (Set-Encoder §4.3)."),
    **model_options: Any,
) -> None:
    """Train a model on training groups; writes a checkpoint folder with rankkit.json and train.log.

    Multi-process: torchrun --nproc_per_node N -m rankkit train ... (see docs/TRAINING.md).
    The model options below are generated from each model's declared settings:
    `rankkit train --model NAME --help` shows NAME's own options with their defaults.
    """
    import dataclasses

    from rankkit.files import check_output_dir
    from rankkit.models import get_model_class
    from rankkit.training import TrainConfig
    from rankkit.training import recipes
    from rankkit.training import train as run_training

    fixed = {f.name for f in dataclasses.fields(TrainConfig) if f.name != "model_options"}
    values: dict[str, Any] = {name: ctx.params[name] for name in sorted(fixed, key=list(ctx.params).index)}
    recipe = None
    file_options: dict[str, Any] = {}
    if config is not None:
        recipe = recipes.load_recipe(config, recipes.train_kinds())
        given = {name for name in ctx.params
                 if getattr(ctx.get_parameter_source(name), "name", None) in ("COMMANDLINE", "ENVIRONMENT")}
        for key, value in recipe.settings.items():
            if key in fixed:
                if key not in given:
                    values[key] = value
            else:
                file_options[key] = value
    if values["model"] is None:
        raise RankkitError("--model is required (on the command line or as model = ... in --config)")
    cls = get_model_class(values["model"])
    options = {**_file_model_options(cls, file_options, config),
               **model_settings(cls, model_options, train_options())}
    if print_config:
        sys.stdout.write(recipes.format_settings({**values, **options}, recipe))
        return
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
    settings = {**values, "alpha": 0.5 if values["alpha"] is None else values["alpha"],
                "distillation": values["distillation"] or "eq12", "train": list(values["train"])}
    run_training(TrainConfig(**settings, model_options=options))


def _file_model_options(cls: Any, settings: dict[str, Any], config: Path | None) -> dict[str, Any]:
    """The chosen model's settings from a config file, each checked like its command-line flag."""
    own = {spec.name: spec for spec in cls.config_class.model_options()}
    out = {}
    for key, value in settings.items():
        if key not in own:
            flags = ", ".join(spec.name for spec in own.values()) or "none"
            raise RankkitError(f"{config}: key {key!r} is not a setting of model {cls.name} (its settings: {flags})")
        out[key] = own[key].check(value, cls.name, key)
    return out
