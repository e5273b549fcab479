"""``rankkit train``: fine-tune or train a ranking model on training groups (thin wrapper of the engine)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from rankkit.cli.app import app
from rankkit.cli.inputs import check_inputs
from rankkit.cli.model_options import PANEL, model_options_of, model_settings, train_options


def _workers(value: Optional[str]) -> Optional[int]:
    """``--workers``: auto (None) or a number of processes (one line for anything else)."""
    from rankkit.training.config import workers_setting

    return workers_setting(value)


@app.command("train")
@model_options_of("train", train_options, PANEL)
def train_command(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", help="Model to train: {models} (rankkit train --model NAME --help shows NAME's options). Required, here or in --config."),
    train: list[Path] = typer.Option([], "--train", help="Training groups JSONL (rankkit or FlagEmbedding shape) or MS MARCO triples (text, or qidpidtriples with --collection/--queries); repeatable. Required, here or in --config."),
    collection: Optional[Path] = typer.Option(None, "--collection", help="Passage texts of ids-only --train files (qidpidtriples, rankkit mine --ids-only groups): collection.tsv, any corpus, BEIR folder or irds:ID; read through its docid table when a step draws them."),
    queries: Optional[Path] = typer.Option(None, "--queries", help="Query texts of ids-only --train files: queries.train.tsv, any topics file or irds:ID."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Checkpoint folder to write. Required, here or in --config."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file of settings (a paper recipe: recipes/*.toml); flags given here override it."),
    print_config: bool = typer.Option(False, "--print-config", help="Print the merged settings (--config + flags) as TOML and exit."),
    backbone: Optional[str] = typer.Option(None, "--backbone", help="Hugging Face model to start from: a local folder or a hub id ORG/NAME[@REVISION] [default: packaged all-MiniLM-L6-v2]."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Passes over the data (default: 1)."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Optimiser steps (overrides --epochs)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Groups per forward pass per process."),
    group_size: int = typer.Option(8, "--group-size", help="Candidates per group: 1 positive + N-1 sampled negatives."),
    grad_accum: int = typer.Option(1, "--grad-accum", help="Micro-batches accumulated per optimiser step."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Peak learning rate [default: the model's, e.g. repbert 2e-5, densetrans 1e-4]."),
    warmup: float = typer.Option(0.1, "--warmup", help="Warm-up: fraction of the steps (<1) or a number of steps."),
    lr_schedule: str = typer.Option("linear", "--lr-schedule", help="After the warm-up: linear (decay to --lr-decay-to x the peak at the last step) or inverse-time (peak / (1 + --lr-decay-rate x steps since the warm-up / --lr-decay-every): PARADE's 'linear decay rate' as its Capreolus code computes it)."),
    lr_decay_to: float = typer.Option(0.0, "--lr-decay-to", help="--lr-schedule linear: the fraction of the peak rate reached at the last step (0: to 0; 0.1: a tenth; 1: constant after the warm-up)."),
    lr_decay_rate: Optional[float] = typer.Option(None, "--lr-decay-rate", help="--lr-schedule inverse-time: R in peak / (1 + R t)."),
    lr_decay_every: Optional[float] = typer.Option(None, "--lr-decay-every", help="--lr-schedule inverse-time: steps per unit of t (e.g. one of PARADE's 4,096-pair iterations: 4096 / batch size)."),
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
    teacher_checkpoint: Optional[str] = typer.Option(None, "--teacher-checkpoint", help="Distil from this rankkit checkpoint, a folder or hub id ORG/NAME[@REVISION] (PARADE Eq. 12; see --distillation)."),
    alpha: Optional[float] = typer.Option(None, "--alpha", help="With --teacher-checkpoint: weight of the student's own loss, in [0, 1] (default: 0.5)."),
    distillation: Optional[str] = typer.Option(None, "--distillation", help="With --teacher-checkpoint: eq12 (default; PARADE Eq. 12 as written: ALPHA x point-wise cross-entropy + (1 - ALPHA) x squared logit difference per document) or loss-mse (ALPHA x --loss + (1 - ALPHA) x per-group score MSE)."),
    log_every: int = typer.Option(10, "--log-every", help="Write the loss to train.log every N steps."),
    init_checkpoint: Optional[str] = typer.Option(None, "--init-checkpoint", help="Start from this rankkit checkpoint's weights (a folder or hub id ORG/NAME[@REVISION]; same model, or one with a compatible encoder) with a fresh optimiser and schedule; without --backbone the model is built on the checkpoint's own encoder."),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing", help="Recompute the transformer blocks' activations in the backward pass: less memory, about one more forward pass per step."),
    precision: str = typer.Option("auto", "--precision", help="auto (bf16 on GPUs with bf16, else fp16; on a CPU bf16 where it is native, else fp32: logged and recorded in rankkit.json); fp32; bf16 autocast (CPU and CUDA); fp16 autocast with loss scaling (CUDA only). Weights and checkpoints stay fp32."),
    workers: Optional[str] = typer.Option(None, "--workers", callback=_workers, show_default=False, help="auto (the default) or a number of processes preparing batches ahead of the training thread (0: on it); same batches either way. auto: on CUDA no processes but a thread preparing the next steps while the GPU runs this one (measured faster than worker processes on an H200), on a CPU 0 (logged and recorded in rankkit.json)."),
    whole_lists: bool = typer.Option(False, "--whole-lists", help="Each group's whole candidate list in teacher order (up to --group-size), not 1 positive + sampled negatives; teacher scores from the groups (rankkit mine --teacher-list K). For ranknet/kl/hinge distillation (Set-Encoder §4.3)."),
    report_to: list[str] = typer.Option([], "--report-to", help="Also send the loss and dev metrics to: tensorboard (event files in OUTPUT/tensorboard/; needs pip install tensorboard). OUTPUT/metrics.csv and OUTPUT/training.png are always written."),
    **model_options: Any,
) -> None:
    """Train a model on training groups; writes a checkpoint folder with rankkit.json, train.log (JSON lines),
    metrics.csv (step, epoch, loss, lr, dev metrics, seconds) and training.png (loss and dev metrics against
    the step, redrawn at each dev evaluation); compare runs with rankkit plot-training.

    Multi-process: torchrun --nproc_per_node N -m rankkit train ... (see docs/TRAINING.md).
    The model options below are generated from each model's declared settings:
    `rankkit train --model NAME --help` shows NAME's own options with their defaults.
    """
    from rankkit.training import recipes
    from rankkit.training import settings as train_settings

    names = train_settings.setting_names()
    values: dict[str, Any] = {name: ctx.params[name] for name in names}
    given = {name for name in names
             if getattr(ctx.get_parameter_source(name), "name", None) in ("COMMANDLINE", "ENVIRONMENT")}
    values, file_options, recipe = train_settings.merge_recipe(values, given, config)
    cls = train_settings.model_spec(values)
    options = {**train_settings.model_options(cls, file_options, str(config)),
               **model_settings(cls, model_options, train_options())}
    if print_config:
        sys.stdout.write(recipes.format_settings({**values, **options}, recipe))
        return
    settings = train_settings.finish_config(values, options, recipe)
    check_inputs([*(("--train", path) for path in settings.train), *(("--dev", path) for path in settings.dev),
                  ("--teacher", settings.teacher), ("--collection", settings.collection),
                  ("--queries", settings.queries)])
    from rankkit.training import train as run_training  # torch, after every check of the command line

    run_training(settings)
