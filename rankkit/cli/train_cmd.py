"""``rankkit train``: fine-tune or train a ranking model on training groups (thin wrapper of the engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rankkit.cli.app import app
from rankkit.errors import RankkitError


@app.command("train")
def train_command(
    model: str = typer.Option(..., "--model", help="Model to train: repbert, densetrans, mono, matrank, matrank-row, set-encoder; long documents: maxp, firstp, sump, parade-max|avg|sum|attn|cnn|transformer, matrank-split."),
    train: list[Path] = typer.Option(..., "--train", help="Training groups JSONL (rankkit or FlagEmbedding shape); repeatable."),
    output: Path = typer.Option(..., "--output", "-o", help="Checkpoint folder to write."),
    backbone: Optional[Path] = typer.Option(None, "--backbone", help="Local Hugging Face folder (default: packaged all-MiniLM-L6-v2)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Passes over the data (default: 1)."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Optimiser steps (overrides --epochs)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Groups per forward pass per process."),
    group_size: int = typer.Option(8, "--group-size", help="Candidates per group: 1 positive + N-1 sampled negatives."),
    grad_accum: int = typer.Option(1, "--grad-accum", help="Micro-batches accumulated per optimiser step."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Peak learning rate (default: model's, repbert 2e-5, densetrans 1e-4)."),
    warmup: float = typer.Option(0.1, "--warmup", help="Warm-up: fraction of the steps (<1) or a number of steps."),
    optimizer: str = typer.Option("adamw", "--optimizer", help="adamw or adafactor."),
    weight_decay: Optional[float] = typer.Option(None, "--weight-decay", help="(default: repbert 0.01, densetrans 0)."),
    max_grad_norm: float = typer.Option(1.0, "--max-grad-norm", help="Gradient clipping norm (0: off)."),
    max_query_length: Optional[int] = typer.Option(None, "--max-query-length", help="(default: repbert 20, densetrans 30)."),
    max_doc_length: Optional[int] = typer.Option(None, "--max-doc-length", help="(default: repbert 256, densetrans 30)."),
    seed: int = typer.Option(42, "--seed"),
    save_every: Optional[int] = typer.Option(None, "--save-every", help="Write a resumable step checkpoint every N steps."),
    keep_checkpoints: int = typer.Option(1, "--keep-checkpoints", help="Step checkpoints kept (0: all)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the newest step checkpoint in --output."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    dev: list[Path] = typer.Option([], "--dev", help="Dev groups: MRR of the positive each epoch, best kept in OUTPUT/best."),
    dev_max_candidates: int = typer.Option(100, "--dev-max-candidates", help="Candidates scored per dev group."),
    loss: Optional[str] = typer.Option(None, "--loss", help="Model's own loss (default), or listwise-ce, ranknet, hinge, margin-mse, kl."),
    teacher: Optional[Path] = typer.Option(None, "--teacher", help="Teacher run for ranknet/margin-mse/kl distillation."),
    teacher_checkpoint: Optional[Path] = typer.Option(None, "--teacher-checkpoint", help="Distil from this rankkit checkpoint: ALPHA x own loss + (1 - ALPHA) x score MSE (PARADE Eq. 12)."),
    alpha: Optional[float] = typer.Option(None, "--alpha", help="With --teacher-checkpoint: weight of the student's own loss, in [0, 1] (default: 0.5)."),
    log_every: int = typer.Option(10, "--log-every", help="Write the loss to train.log every N steps."),
    doc_segment_id: Optional[int] = typer.Option(None, "--doc-segment-id", help="repbert: segment id of documents (default: 1)."),
    normalize: Optional[bool] = typer.Option(None, "--normalize/--inner-product", help="repbert: cosine or raw inner product (default: inner product)."),
    no_top_dense: bool = typer.Option(False, "--no-top-dense", help="densetrans: -TopDense ablation."),
    no_dense: bool = typer.Option(False, "--no-dense", help="densetrans: -AllDense ablation."),
    concat_layers: bool = typer.Option(False, "--concat-layers", help="densetrans: +Concat ablation."),
    scale: Optional[float] = typer.Option(None, "--scale", help="densetrans: cosine multiplier in the softmax (default: 1, Eq. 6)."),
    embedding_init: Optional[str] = typer.Option(None, "--embedding-init", help="densetrans: backbone (MiniLM vectors) or random."),
    d_model: Optional[int] = typer.Option(None, "--d-model", help="densetrans: token width (default: the backbone's 384; smaller = the table's principal components, a CPU-sized model)."),
    ffn_multiplier: Optional[int] = typer.Option(None, "--ffn-multiplier", help="densetrans: feed-forward width / layer width (default: 4)."),
    encoder: Optional[str] = typer.Option(None, "--encoder", help="mono/matrank/matrank-row: cross ([CLS] of the pair, default) or bi (frozen bi-encoder features)."),
    freeze_encoder: Optional[bool] = typer.Option(None, "--freeze-encoder/--tune-encoder", help="mono/matrank: freeze the backbone (default: frozen for --encoder bi only)."),
    hidden: Optional[int] = typer.Option(None, "--hidden", help="mono/matrank/set-encoder/parade-cnn/matrank-split: head hidden width (default: mono cross 0 = linear, matrank cross 384, bi 256; parade-cnn, matrank-split: the encoder width)."),
    window: Optional[int] = typer.Option(None, "--window", help="maxp/firstp/sump/parade-*: passage window in tokens (default: 225)."),
    stride: Optional[int] = typer.Option(None, "--stride", help="maxp/sump/parade-*: tokens between window starts (default: 200)."),
    max_passages: Optional[int] = typer.Option(None, "--max-passages", help="maxp/sump/parade-*: passages per document; first and last kept, rest sampled (default: 16)."),
    piece_length: Optional[int] = typer.Option(None, "--piece-length", help="matrank-split: tokens per document piece (default: 128)."),
    max_pieces: Optional[int] = typer.Option(None, "--max-pieces", help="matrank-split: pieces per document, from its start (default: 4)."),
) -> None:
    """Train a model on training groups; writes a checkpoint folder with rankkit.json and train.log.

    Multi-process: torchrun --nproc_per_node N -m rankkit train ... (see docs/TRAINING.md).
    """
    from rankkit.training.engine import TrainConfig
    from rankkit.training.engine import train as run_training

    if alpha is not None and teacher_checkpoint is None:
        raise RankkitError("--alpha weighs distillation from a teacher: it needs --teacher-checkpoint")

    variants = [name for flag, name in ((no_top_dense, "no-top-dense"), (no_dense, "no-dense"),
                                        (concat_layers, "concat")) if flag]
    if len(variants) > 1:
        raise RankkitError("--no-top-dense, --no-dense and --concat-layers are exclusive (one ablation at a time)")
    options = {
        "doc_segment_id": doc_segment_id,
        "normalize": normalize,
        "variant": variants[0] if variants else None,
        "scale": scale,
        "embedding_init": embedding_init,
        "d_model": d_model,
        "ffn_multiplier": ffn_multiplier,
        "encoder": encoder,
        "freeze_encoder": freeze_encoder,
        "hidden": hidden,
        "window": window,
        "stride": stride,
        "max_passages": max_passages,
        "piece_length": piece_length,
        "max_pieces": max_pieces,
    }
    config = TrainConfig(
        model=model, train=list(train), output=output, backbone=backbone, epochs=epochs, max_steps=max_steps,
        batch_size=batch_size, group_size=group_size, grad_accum=grad_accum, lr=lr, warmup=warmup,
        optimizer=optimizer, weight_decay=weight_decay, max_grad_norm=max_grad_norm,
        max_query_length=max_query_length, max_doc_length=max_doc_length, seed=seed, save_every=save_every,
        keep_checkpoints=keep_checkpoints, resume=resume, device=device, dev=list(dev),
        dev_max_candidates=dev_max_candidates, loss=loss, teacher=teacher, log_every=log_every,
        teacher_checkpoint=teacher_checkpoint, alpha=0.5 if alpha is None else alpha,
        model_options=options,
    )
    run_training(config)
