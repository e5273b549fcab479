"""The training loop shared by every model (``rankkit train``).

The engine knows nothing about model families: it samples groups, collates them into a
:class:`~rankkit.training.batching.GroupBatch`, lets the model tokenise it (``prepare``) and return
a loss (``forward``), and handles optimisation, schedules, logging, dev evaluation, checkpoints,
resume and distributed data parallelism.

Batches and steps. ``batch_size`` is the number of groups per forward pass on one process;
one optimiser step consumes ``batch_size * grad_accum * world_size`` groups (the global batch).
The data order of an epoch is a permutation fixed by ``(seed, epoch)`` and each group's candidates
by ``(seed, epoch, group index)``; global step ``t`` takes the ``t``-th slice of the permutation and
splits it into micro-batches, micro-batch ``k = m * world_size + rank`` going to ``rank`` at
accumulation step ``m``. An incomplete last global batch of an epoch is dropped (every rank must
take the same number of steps). Consequences:

* ``--resume`` skips consumed batches by arithmetic and continues exactly (same losses, same
  weights, within float noise), RNG states (dropout) being restored from the step checkpoint;
* ``torchrun --nproc_per_node W`` with ``--grad-accum A`` computes the same updates as one process
  with ``--grad-accum A*W`` (same micro-batches, hence the same in-batch negatives: negatives are
  not gathered across processes).

Distributed runs are detected from torchrun's environment (``WORLD_SIZE`` > 1): gloo on CPU,
nccl on GPU, one GPU per local rank, only rank 0 writes files.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from rankkit import __version__
from rankkit.console import log, progress_bar, warn
from rankkit.errors import InputError, RankkitError
from rankkit.formats import TrainingGroup, read_groups, read_run
from rankkit.models import RankingModel, get_model_class
from rankkit.training import batching, checkpoint, distill
from rankkit.training.batching import TeacherScores

TRAIN_LOG = "train.log"
BEST = "best"


@dataclass
class TrainConfig:
    """Everything ``rankkit train`` accepts; ``None`` means the model's default."""

    model: str
    train: list[Path]
    output: Path
    backbone: Path | None = None
    epochs: int | None = None
    max_steps: int | None = None
    batch_size: int = 32
    group_size: int = 8
    grad_accum: int = 1
    lr: float | None = None
    warmup: float = 0.1
    optimizer: str = "adamw"
    weight_decay: float | None = None
    max_grad_norm: float = 1.0
    max_query_length: int | None = None
    max_doc_length: int | None = None
    seed: int = 42
    save_every: int | None = None
    keep_checkpoints: int = 1
    resume: bool = False
    device: str = "auto"
    dev: list[Path] = field(default_factory=list)
    dev_max_candidates: int = 100
    loss: str | None = None
    teacher: Path | None = None
    #: Knowledge distillation from a rankkit checkpoint (PARADE Eq. 12, :mod:`rankkit.training.distill`).
    teacher_checkpoint: Path | None = None
    alpha: float = 0.5
    log_every: int = 10
    model_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepInfo:
    """What callbacks see after each optimiser step."""

    step: int
    total_steps: int
    epoch: int
    loss: float
    lr: float


@dataclass
class TrainResult:
    """Where the model went and how training ended."""

    output: Path
    steps: int
    metrics: dict[str, float]


# -- distributed ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Dist:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` = the local rank's GPU when CUDA is available, else the CPU."""
    if name not in ("auto", "cpu", "cuda"):
        raise RankkitError(f"unknown device {name!r}; use auto, cpu or cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise RankkitError("--device cuda but no CUDA device is available")
    if name == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", local_rank % torch.cuda.device_count())


def init_distributed(device: str) -> Dist:
    """Join the torchrun process group when launched by torchrun, else a single-process setup."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = pick_device(device, local_rank)
    if world > 1 and not torch.distributed.is_initialized():
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        torch.distributed.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
    return Dist(rank, world, local_rank, dev)


def _all_mean(value: float, dist: Dist) -> float:
    if not dist.active:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=dist.device)
    torch.distributed.all_reduce(t)
    return float(t.item()) / dist.world_size


def _gather(obj: Any, dist: Dist) -> list[Any]:
    if not dist.active:
        return [obj]
    out: list[Any] = [None] * dist.world_size
    torch.distributed.all_gather_object(out, obj)
    return out


def _barrier(dist: Dist) -> None:
    if dist.active:
        torch.distributed.barrier()


# -- data ----------------------------------------------------------------------------------------

def file_fingerprint(path: Path) -> str:
    """SHA-256 of a file's bytes (streamed)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_training_data(paths: Sequence[Path]) -> tuple[list[TrainingGroup], list[dict[str, Any]]]:
    """All groups of the ``--train`` files in order, with a fingerprint record per file."""
    groups: list[TrainingGroup] = []
    records: list[dict[str, Any]] = []
    for path in paths:
        loaded = read_groups(path)
        groups.extend(loaded)
        records.append({"path": str(path), "sha256": file_fingerprint(Path(path)), "groups": len(loaded)})
    return groups, records


def micro_batch_indices(order: np.ndarray, step_in_epoch: int, micro: int, dist_rank: int, world: int,
                        batch_size: int, grad_accum: int) -> np.ndarray:
    """Group indices of micro-batch ``micro`` of this rank at a step (see the module docstring)."""
    global_batch = batch_size * grad_accum * world
    k = micro * world + dist_rank
    start = step_in_epoch * global_batch + k * batch_size
    return order[start:start + batch_size]


# -- schedule and optimiser ----------------------------------------------------------------------

def warmup_steps(warmup: float, total_steps: int) -> int:
    """``--warmup`` below 1 is a fraction of the total steps, from 1 on a number of steps."""
    if warmup < 0:
        raise RankkitError(f"--warmup must be >= 0, got {warmup}")
    return int(round(warmup * total_steps)) if warmup < 1 else int(warmup)


def linear_schedule(warmup: int, total: int) -> Callable[[int], float]:
    """Linear warm-up to the peak learning rate, then linear decay to 0 at ``total`` steps."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def build_optimizer(model: RankingModel, name: str, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW (or Adafactor) with no weight decay on biases and normalisation weights (1-d tensors)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if name == "adamw":
        betas = getattr(model, "adam_betas", (0.9, 0.999))
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=1e-8)
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(groups, lr=lr, scale_parameter=False, relative_step=False, warmup_init=False)
    raise RankkitError(f"unknown optimizer {name!r}; use adamw or adafactor")


# -- RNG -----------------------------------------------------------------------------------------

def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA); data sampling does not use these streams."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


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


# -- evaluation ----------------------------------------------------------------------------------

@torch.inference_mode()
def evaluate_groups(model: RankingModel, groups: Sequence[TrainingGroup], *, batch_size: int,
                    max_candidates: int, device: torch.device) -> dict[str, float]:
    """MRR of the best-ranked positive among each group's candidates (all positives + negatives).

    Ties count against the positive (a model scoring everything equally gets MRR 1/n, not 1).
    """
    was_training = model.training
    model.eval()
    total = 0.0
    for start in range(0, len(groups), batch_size):
        chunk = [batching.all_candidates(g, max_candidates) for g in groups[start:start + batch_size]]
        batch = model.prepare(batching.collate(chunk)).to(device)
        scores = model.score(batch).float().cpu()
        for row, sampled in enumerate(chunk):
            n = len(sampled.docids)
            is_pos = torch.tensor([d in sampled.positives for d in sampled.docids])
            s = scores[row, :n]
            best = s[is_pos].max()
            rank = 1 + int((s[~is_pos] >= best).sum())
            total += 1.0 / rank
    model.train(was_training)
    return {"dev_mrr": total / max(1, len(groups))}


# -- the loop ------------------------------------------------------------------------------------

def _resume_keys(config: TrainConfig, model: RankingModel, data: list[dict[str, Any]], dist: Dist,
                 total_steps: int) -> dict[str, Any]:
    """Settings a resumed run must share with the interrupted one."""
    distilling: dict[str, Any] = {} if config.teacher_checkpoint is None else {
        "teacher_checkpoint": str(config.teacher_checkpoint), "alpha": config.alpha}
    return {
        "model": model.name, "hparams": model.hparams, "loss": model.loss_name,
        "data": [d["sha256"] for d in data], "batch_size": config.batch_size, "group_size": config.group_size,
        "grad_accum": config.grad_accum, "world_size": dist.world_size, "seed": config.seed,
        "total_steps": total_steps, "optimizer": config.optimizer,
        **distilling,
    }


def _check_output(config: TrainConfig) -> Path | None:
    """The step checkpoint to resume from (``--resume``), after checking the output folder."""
    output = Path(config.output)
    if output.exists() and not output.is_dir():
        raise InputError(output, None, "output exists and is not a folder")
    steps = checkpoint.list_step_checkpoints(output)
    if config.resume:
        if not steps:
            raise RankkitError(f"nothing to resume in {output}: no step checkpoint (train with --save-every N)")
        return steps[-1]
    if steps or checkpoint.is_checkpoint(output):
        raise RankkitError(
            f"{output} already holds a training run; pass --resume to continue it or pick a new --output")
    return None


def _append_log(path: Path, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


def _truncate_log(path: Path, step: int) -> None:
    """Drop log lines written after the step a resumed run restarts from (they will be redone)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if int(json.loads(line).get("step", 0)) <= step:
                kept.append(line)
        except (ValueError, AttributeError):
            continue
    path.write_text("".join(k + "\n" for k in kept), encoding="utf-8")


def params_digest(model: torch.nn.Module) -> str:
    """SHA-256 over every parameter's bytes: equal digests = identical replicas."""
    digest = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def train(config: TrainConfig, callbacks: Sequence[Callable[[StepInfo], None]] = ()) -> TrainResult:
    """Train ``config.model`` on the groups and write the checkpoint folder ``config.output``.

    ``callbacks`` run after every optimiser step on every rank (progress hooks, tests).
    """
    for name in ("batch_size", "group_size", "grad_accum", "log_every", "keep_checkpoints"):
        if getattr(config, name) < 1 and not (name == "keep_checkpoints" and getattr(config, name) == 0):
            raise RankkitError(f"--{name.replace('_', '-')} must be at least 1")
    if config.save_every is not None and config.save_every < 1:
        raise RankkitError("--save-every must be at least 1")
    if config.epochs is not None and config.epochs < 1:
        raise RankkitError("--epochs must be at least 1")
    if config.max_steps is not None and config.max_steps < 1:
        raise RankkitError("--max-steps must be at least 1")
    distill.check_alpha(config.alpha)
    cls = get_model_class(config.model)
    unknown = sorted(k for k, v in config.model_options.items() if v is not None and k not in cls.option_names)
    if unknown:
        raise RankkitError(f"model {cls.name!r} does not take option(s): {', '.join(unknown)}")

    dist = init_distributed(config.device)
    try:
        return _train(config, cls, dist, callbacks)
    finally:
        if dist.active and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _train(config: TrainConfig, cls: type[RankingModel], dist: Dist,
           callbacks: Sequence[Callable[[StepInfo], None]]) -> TrainResult:
    output = Path(config.output)
    resume_from = _check_output(config)
    groups, data = load_training_data(config.train)
    dev_groups: list[TrainingGroup] = []
    for path in config.dev:
        dev_groups.extend(read_groups(path))
    teacher = None
    if config.teacher is not None:
        teacher = TeacherScores(read_run(config.teacher), str(config.teacher))
        teacher.check(groups)

    world = dist.world_size
    global_batch = config.batch_size * config.grad_accum * world
    steps_per_epoch = len(groups) // global_batch
    if steps_per_epoch == 0:
        raise RankkitError(
            f"{len(groups)} training groups are fewer than one global batch of {global_batch} "
            f"(batch size {config.batch_size} x grad-accum {config.grad_accum} x {world} processes)"
        )
    total_steps = config.max_steps if config.max_steps is not None else (config.epochs or 1) * steps_per_epoch

    seed_everything(config.seed)  # identical initial weights on every rank
    options = dict(config.model_options)
    options["max_query_length"] = config.max_query_length
    options["max_doc_length"] = config.max_doc_length
    model = cls.for_training(config.backbone, options)
    model.set_loss(config.loss)
    if teacher is None and model.loss_name in ("margin-mse", "kl"):
        raise RankkitError(f"--loss {model.loss_name} needs --teacher RUN")
    if teacher is not None and model.loss_name not in ("ranknet", "margin-mse", "kl") and dist.main:
        warn(f"--teacher is ignored by --loss {model.loss_name} (only ranknet, margin-mse and kl use it)")
    model.to(dist.device)
    # Loaded after the student is built so the student's initial weights do not depend on it.
    kd_teacher = (None if config.teacher_checkpoint is None
                  else distill.Teacher.load(config.teacher_checkpoint, dist.device))
    model.train()

    lr = config.lr if config.lr is not None else float(getattr(cls, "default_lr", 2e-5))
    weight_decay = (config.weight_decay if config.weight_decay is not None
                    else float(getattr(cls, "default_weight_decay", 0.01)))
    optimizer = build_optimizer(model, config.optimizer, lr, weight_decay)
    warm = warmup_steps(config.warmup, total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_schedule(warm, total_steps))

    resume_keys = _resume_keys(config, model, data, dist, total_steps)
    training_meta = {
        "backbone": None if config.backbone is None else str(config.backbone),
        "epochs": config.epochs, "max_steps": config.max_steps, "total_steps": total_steps,
        "batch_size": config.batch_size, "group_size": config.group_size, "grad_accum": config.grad_accum,
        "world_size": world, "global_batch": global_batch, "lr": lr, "warmup_steps": warm,
        "optimizer": config.optimizer, "weight_decay": weight_decay, "max_grad_norm": config.max_grad_norm,
        "seed": config.seed, "loss": model.loss_name,
        "teacher": None if config.teacher is None else str(config.teacher),
        "teacher_checkpoint": None if config.teacher_checkpoint is None else str(config.teacher_checkpoint),
        "alpha": None if config.teacher_checkpoint is None else config.alpha,
        "dev": [str(p) for p in config.dev],
    }
    data_meta = {"train": data, "groups": len(groups)}

    step = 0
    best: float | None = None
    metrics: dict[str, float] = {}
    # Dropout differs per rank (like separate GPUs would), and is re-seeded deterministically.
    torch.manual_seed(config.seed * 1000 + dist.rank)
    if resume_from is not None:
        state, optim = checkpoint.load_step_checkpoint(resume_from)
        saved = state.get("resume_keys")
        if saved != json.loads(json.dumps(resume_keys)):
            differ = sorted(k for k in resume_keys if (saved or {}).get(k) != json.loads(json.dumps(resume_keys[k])))
            raise RankkitError(
                f"cannot resume {resume_from}: settings differ from the interrupted run ({', '.join(differ)})")
        checkpoint.load_step_weights(model, resume_from)
        model.to(dist.device)
        optimizer.load_state_dict(optim["optimizer"])
        scheduler.load_state_dict(optim["scheduler"])
        rng = optim["rng"]
        set_rng_state(rng[dist.rank] if len(rng) == world else rng[0])
        step = int(state["step"])
        best = state.get("best_dev_mrr")
        metrics = dict(state.get("metrics", {}))
        if dist.main:
            _truncate_log(output / TRAIN_LOG, step)
            log(f"resuming from {resume_from} at step {step}/{total_steps}")

    # With a teacher checkpoint the engine calls (and DDP wraps) Eq. 12 around the student.
    ddp_model: torch.nn.Module = (model if kd_teacher is None
                                  else distill.DistillationObjective(model, config.alpha))
    if dist.active:
        ddp_model = torch.nn.parallel.DistributedDataParallel(
            ddp_model, device_ids=[dist.device.index] if dist.device.type == "cuda" else None,
        )

    if dist.main:
        output.mkdir(parents=True, exist_ok=True)
        log(f"training {model.name} on {len(groups):,} groups: {total_steps:,} steps of {global_batch} groups "
            f"({steps_per_epoch:,} steps/epoch), lr {lr:g}, warm-up {warm} steps, device {dist.device}"
            + (f", {world} processes" if dist.active else "")
            + (f", distilling from {config.teacher_checkpoint} (alpha {config.alpha:g})"
               if kd_teacher is not None else ""))

    def meta(step_now: int) -> dict[str, Any]:
        return {"training": training_meta, "data": data_meta, "steps": step_now,
                "epochs": round(step_now / steps_per_epoch, 6), "metrics": dict(metrics),
                "rankkit_version": __version__}

    def evaluate(step_now: int, epoch: int) -> None:
        nonlocal best
        if not dev_groups:
            return
        if dist.main:
            # About as many documents per forward pass as a training micro-batch.
            per_pass = max(1, config.batch_size * config.group_size // max(1, config.dev_max_candidates))
            result = evaluate_groups(model, dev_groups, batch_size=per_pass,
                                     max_candidates=config.dev_max_candidates, device=dist.device)
            metrics.update(result)
            _append_log(output / TRAIN_LOG, {"step": step_now, "epoch": epoch, **result})
            log(f"step {step_now}: dev MRR {result['dev_mrr']:.4f}")
            if best is None or result["dev_mrr"] > best:
                best = result["dev_mrr"]
                metrics["best_dev_mrr"] = best
                metrics["best_step"] = step_now
                checkpoint.save_model(model, output / BEST, meta(step_now))
        _barrier(dist)

    order_cache: dict[int, np.ndarray] = {}

    def micro_batches(t: int) -> Iterator[batching.GroupBatch]:
        epoch, i = divmod(t, steps_per_epoch)
        if epoch not in order_cache:
            order_cache.clear()
            order_cache[epoch] = batching.epoch_order(len(groups), config.seed, epoch)
        for m in range(config.grad_accum):
            idx = micro_batch_indices(order_cache[epoch], i, m, dist.rank, world, config.batch_size, config.grad_accum)
            sampled = [
                batching.sample_group(groups[j], config.group_size, batching.group_rng(config.seed, epoch, int(j)))
                for j in idx
            ]
            yield model.prepare(batching.collate(sampled, config.group_size, teacher)).to(dist.device)

    running = 0.0
    started = time.perf_counter()
    start_step = step
    with progress_bar("ex", transient=False) as bar:
        task = bar.add_task("training", total=total_steps * global_batch, completed=step * global_batch,
                            visible=dist.main)
        while step < total_steps:
            epoch = step // steps_per_epoch
            total_loss = 0.0
            for m, batch in enumerate(micro_batches(step)):
                sync = m == config.grad_accum - 1 or not dist.active
                with (nullcontext() if sync else ddp_model.no_sync()):  # type: ignore[operator]
                    loss = (ddp_model(batch) if kd_teacher is None
                            else ddp_model(batch, kd_teacher.scores(batch))) / config.grad_accum
                    loss.backward()
                total_loss += float(loss.detach())
            if not math.isfinite(total_loss):
                raise RankkitError(f"loss became {total_loss} at step {step + 1}; lower --lr")
            if config.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            lr_now = scheduler.get_last_lr()[0]
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            step_loss = _all_mean(total_loss, dist)
            running = step_loss if step == start_step + 1 else 0.98 * running + 0.02 * step_loss
            metrics["loss"] = step_loss
            elapsed = time.perf_counter() - started
            rate = (step - start_step) * global_batch / max(elapsed, 1e-9)
            if dist.main:
                bar.update(task, advance=global_batch,
                           description=f"training loss {running:.4f} lr {lr_now:.2e}")
                if step % config.log_every == 0 or step == total_steps:
                    _append_log(output / TRAIN_LOG, {"step": step, "epoch": epoch, "loss": step_loss, "lr": lr_now,
                                                     "examples_per_s": round(rate, 2)})
            for callback in callbacks:
                callback(StepInfo(step, total_steps, epoch, step_loss, lr_now))
            if step % steps_per_epoch == 0 or step == total_steps:
                evaluate(step, epoch)
            if config.save_every is not None and step % config.save_every == 0 and step < total_steps:
                rngs = _gather(rng_state(), dist)
                if dist.main:
                    state = {"step": step, "best_dev_mrr": best, "metrics": metrics, "resume_keys": resume_keys}
                    checkpoint.save_step_checkpoint(
                        output, model, meta(step), state,
                        {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rngs},
                        keep=config.keep_checkpoints,
                    )
                _barrier(dist)

    digests = _gather(params_digest(model), dist)
    if dist.main:
        if len(set(digests)) != 1:
            raise RankkitError(f"replicas diverged: parameter digests {digests}")
        final = meta(step)
        checkpoint.save_model(model, output, final)
        _append_log(output / TRAIN_LOG, {"step": step, "event": "done", "replica_digests": digests,
                                         "seconds": round(time.perf_counter() - started, 3)})
        log(f"saved {model.name} to {output} ({step} steps, loss {metrics.get('loss', float('nan')):.4f})")
    _barrier(dist)
    return TrainResult(output, step, dict(metrics))


def config_dict(config: TrainConfig) -> dict[str, Any]:
    """A JSON-friendly view of a config (paths as strings)."""
    return json.loads(json.dumps(asdict(config), default=str))
