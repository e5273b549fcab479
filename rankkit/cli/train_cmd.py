"""``rankkit train``: fine-tune or train a ranking model on training groups (thin wrapper of the engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from rankkit.cli.app import app
from rankkit.cli.model_options import PANEL, model_options_of, model_settings, train_options
from rankkit.errors import RankkitError


@app.command("train")
@model_options_of("train", train_options, PANEL)
def train_command(
    model: str = typer.Option(..., "--model", help="Model to train (rankkit models lists them; rankkit train --model NAME --help shows NAME's options)."),
    train: list[Path] = typer.Option(..., "--train", help="Training groups JSONL (rankkit or FlagEmbedding shape); repeatable."),
    output: Path = typer.Option(..., "--output", "-o", help="Checkpoint folder to write."),
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
    loss: Optional[str] = typer.Option(None, "--loss", help="Training objective [default: the model's]: listwise-ce, ranknet, hinge, margin-mse, kl for every model; multilabel-margin, softmax-ce for bi-encoders; matrank for the MatRank models."),
    teacher: Optional[Path] = typer.Option(None, "--teacher", help="Teacher run for ranknet/margin-mse/kl distillation."),
    teacher_checkpoint: Optional[Path] = typer.Option(None, "--teacher-checkpoint", help="Distil from this rankkit checkpoint: ALPHA x own loss + (1 - ALPHA) x score MSE (PARADE Eq. 12)."),
    alpha: Optional[float] = typer.Option(None, "--alpha", help="With --teacher-checkpoint: weight of the student's own loss, in [0, 1] (default: 0.5)."),
    log_every: int = typer.Option(10, "--log-every", help="Write the loss to train.log every N steps."),
    workers: int = typer.Option(0, "--workers", help="Processes preparing batches ahead of the training thread (0: on it); same batches either way."),
    whole_lists: bool = typer.Option(False, "--whole-lists", help="Each group's whole candidate list in teacher order (up to --group-size), not 1 positive + sampled negatives; teacher scores from the groups (rankkit mine --teacher-list K). For ranknet/kl/hinge distillation (Set-Encoder §4.3)."),
    **model_options: Any,
) -> None:
    """Train a model on training groups; writes a checkpoint folder with rankkit.json and train.log.

    Multi-process: torchrun --nproc_per_node N -m rankkit train ... (see docs/TRAINING.md).
    The model options below are generated from each model's declared settings:
    `rankkit train --model NAME --help` shows NAME's own options with their defaults.
    """
    from rankkit.models import get_model_class
    from rankkit.training import TrainConfig
    from rankkit.training import train as run_training

    if alpha is not None and teacher_checkpoint is None:
        raise RankkitError("--alpha weighs distillation from a teacher: it needs --teacher-checkpoint")
    from rankkit.formats._files import check_output_dir

    options = model_settings(get_model_class(model), model_options, train_options())
    check_output_dir(output, "--output")
    config = TrainConfig(
        model=model, train=list(train), output=output, backbone=backbone, epochs=epochs, max_steps=max_steps,
        batch_size=batch_size, group_size=group_size, grad_accum=grad_accum, lr=lr, warmup=warmup,
        optimizer=optimizer, weight_decay=weight_decay, max_grad_norm=max_grad_norm,
        max_query_length=max_query_length, max_doc_length=max_doc_length, seed=seed, save_every=save_every,
        keep_checkpoints=keep_checkpoints, resume=resume, device=device, dev=list(dev),
        dev_max_candidates=dev_max_candidates, loss=loss, teacher=teacher, log_every=log_every,
        teacher_checkpoint=teacher_checkpoint, alpha=0.5 if alpha is None else alpha, workers=workers,
        whole_lists=whole_lists,
        model_options=options,
    )
    run_training(config)
