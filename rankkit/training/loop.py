"""The training loop shared by every model (``rankkit train``): a network composed with a loss.

The loop knows no model family: :class:`~rankkit.training.sampling.MicroBatches` gives each step's
collated groups, the model tokenises them (``prepare``), :class:`~rankkit.training.objective.TrainingObjective`
runs the network and its :class:`~rankkit.models.losses.Loss`, and the pieces around it handle
optimisation (:mod:`~rankkit.training.optim`), dev evaluation (:mod:`~rankkit.training.dev`), step
checkpoints and exact resume (:mod:`~rankkit.training.resume`) and data parallelism
(:mod:`~rankkit.training.distributed`).

Batches and steps: ``batch_size`` groups per forward pass on one process; one optimiser step
consumes ``batch_size * grad_accum * world_size`` groups (the global batch), an incomplete last
global batch of an epoch is dropped. ``--resume`` skips consumed batches by arithmetic and
continues exactly (RNG states restored from the step checkpoint); ``torchrun --nproc_per_node W``
with ``--grad-accum A`` computes the same updates as one process with ``--grad-accum A*W``.
"""

from __future__ import annotations

import math
import tempfile
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from rankkit.version import __version__
from rankkit.console import log, progress_bar, warn
from rankkit.devices import autocast, check_precision, resolve_precision
from rankkit.errors import InputError, RankkitError
from rankkit.files import exclusive
from rankkit.formats import TrainingGroup, iter_groups
from rankkit.models import RankingModel, create_model
from rankkit.models.backbone import backbone_source
from rankkit.models.checkpoint import is_checkpoint, read_meta, save_model
from rankkit.hub import ModelSource
from rankkit.models.inputs import GroupBatch
from rankkit.models.losses import get_loss
from rankkit.training import resume as rs
from rankkit.training.config import StepInfo, TrainConfig, TrainResult, check_config
from rankkit.training.curves import TrainingCurves
from rankkit.training.data import TextSource, TrainingData, open_training_data
from rankkit.training.dev import evaluate_groups
from rankkit.training.distributed import Dist, init_distributed, params_digest
from rankkit.training.frozen import precompute_frozen_features
from rankkit.training.lists import check_list_loss, list_teacher
from rankkit.training.loader import resolve_workers, step_batches
from rankkit.training.objective import DistillationObjective, Teacher, TrainingObjective
from rankkit.training.optim import build_optimizer, lr_schedule, seed_everything, warmup_steps
from rankkit.training.sampling import MicroBatches, TeacherScores, TeacherSource
from rankkit.training.teacher_run import TeacherRun
from rankkit.training.warm_start import WarmStart, carry_weights, load_init_checkpoint, save_encoder

BEST = "best"


def train(config: TrainConfig, callbacks: Sequence[Callable[[StepInfo], None]] = ()) -> TrainResult:
    """Train ``config.model`` on the groups and write the checkpoint folder ``config.output``.

    ``callbacks`` run after every optimiser step on every rank (progress hooks, tests).
    """
    cls = check_config(config)
    dist = init_distributed(config.device)
    trainer = None
    try:
        # One training run per output folder: a second one (or a --resume of a running one) is
        # refused in one line instead of mixing its checkpoints and log into the first's.
        with exclusive(config.output, "--output", wait=False) if dist.main else nullcontext():
            return Trainer(config, cls, dist).run(callbacks)
    finally:
        if trainer is not None:
            trainer.groups.close()
        dist.close()


def schedule_record(config: TrainConfig) -> dict[str, Any]:
    """The learning-rate schedule's settings, empty for the default (linear decay to 0)."""
    if config.lr_schedule == "linear" and config.lr_decay_to == 0.0:
        return {}
    if config.lr_schedule == "linear":
        return {"lr_schedule": "linear", "lr_decay_to": config.lr_decay_to}
    return {"lr_schedule": config.lr_schedule, "lr_decay_rate": config.lr_decay_rate,
            "lr_decay_every": config.lr_decay_every}


def dev_groups(paths: Sequence[Path], texts: TextSource | None) -> list[TrainingGroup]:
    """The ``--dev`` groups, whole and with their texts (ids-only ones looked up in ``texts``)."""
    out = []
    for path in paths:
        for group in iter_groups(path, ids=True):
            if group.ids_only:
                if texts is None:
                    raise InputError(path, None, "ids-only dev groups take their texts from --collection and --queries, "
                                     "which come with ids-only --train files")
                group = texts.fill_group(group)
            out.append(group)
    return out


class Trainer:
    """One training run: set up in the constructor, then :meth:`run`."""

    def __init__(self, config: TrainConfig, cls: type[RankingModel], dist: Dist) -> None:
        self.config, self.dist, self.output = config, dist, Path(config.output)
        if config.precision != "auto":
            check_precision(config.precision, dist.device)  # fp16 on a CPU: refused before any work
        self.resume_from = rs.check_output(self.output, config.resume, is_checkpoint(self.output))
        # The loss and the model first: an option the loss or the backbone refuses (a piece longer than its
        # positions, say) is reported before a new training file is indexed, which takes minutes at MS MARCO scale.
        self._choose_loss(config, cls)
        self._build_model(config, cls, dist)
        config = self.config  # --precision auto resolved
        # Read when a step draws them: an on-disk table of each file's groups (rankkit.training.data).
        self.groups: TrainingData = open_training_data(config.train, collection=config.collection,
                                                       queries=config.queries, dist=dist)
        try:
            self._setup(config, cls, dist)
        except BaseException:
            self.groups.close()
            raise

    def _choose_loss(self, config: TrainConfig, cls: type[RankingModel]) -> None:
        """The objective's loss, checked against the model's output (a teacher from the data is checked later)."""
        if config.teacher_checkpoint is not None and config.distillation == "eq12":
            # PARADE Eq. 12: the student term is the point-wise cross-entropy, not a --loss.
            if config.loss is not None:
                raise RankkitError(f"--loss {config.loss} is not used by --distillation eq12 (its student term is "
                                   "PARADE's point-wise cross-entropy); pass --distillation loss-mse to distil with it")
            self.loss = get_loss("pointwise-ce", cls.output_type, cls.name)
        else:
            self.loss = get_loss(config.loss or cls.training_defaults.loss, cls.output_type, cls.name)
        if config.teacher is None and not config.whole_lists and self.loss.needs_teacher:
            raise RankkitError(f"--loss {self.loss.name} needs --teacher RUN")

    def _build_model(self, config: TrainConfig, cls: type[RankingModel], dist: Dist) -> None:
        """The student on its device (from --backbone or --init-checkpoint), and the run's resolved precision.

        Reads no training data and draws no data randomness, so building it first changes no weights.
        """
        # Loaded before seeding: building the loaded model's modules draws random numbers.
        init = None if config.init_checkpoint is None else load_init_checkpoint(config.init_checkpoint)
        seed_everything(config.seed)  # identical initial weights on every rank
        settings = {**config.model_options, "max_query_length": config.max_query_length,
                    "max_doc_length": config.max_doc_length}
        self.base_model = self.backbone_provenance(init)
        if init is not None and config.backbone is None:
            # The checkpoint's own architecture and vocabulary; its weights are carried just below.
            with tempfile.TemporaryDirectory(prefix="rankkit-init-encoder-") as folder:
                backbone = ModelSource(save_encoder(init, Path(folder)), str(init.config.backbone or init.name))
                self.model = create_model(cls.name, backbone, **settings)
            self.model.config.backbone = init.config.backbone
        else:
            self.model = create_model(cls.name, config.backbone, **settings)
        self.warm_start: WarmStart | None = None
        if init is not None and self.resume_from is None:  # a resumed run restores its own weights
            self.warm_start = carry_weights(self.model, init)
            if dist.main:
                log(self.warm_start.describe())
        del init
        if config.gradient_checkpointing:
            parts = self.model.enable_gradient_checkpointing()
            if dist.main:
                log(f"activation checkpointing: {', '.join(parts)}")
        self.model.to(dist.device)
        self.precision_reason = ""
        if config.precision == "auto":  # decided by the device and the model's size; logged and recorded
            precision, why = resolve_precision("auto", dist.device, sum(p.numel() for p in self.model.parameters()))
            self.config = replace(config, precision=precision)
            self.precision_reason = f" (--precision auto: {why})"
        # --workers auto: processes preparing batches on CUDA, none on the CPU (logged and recorded).
        #: Processes preparing batches (``--workers``, auto resolved) and whether a thread prepares them ahead.
        self.workers, self.prefetch_thread, why = resolve_workers(self.config.workers, dist.device)
        self.workers_reason = "" if self.config.workers is not None else f" (--workers auto: {why})"
        self.config = replace(self.config, workers=self.workers)
        # fp16 needs loss scaling (its range underflows small gradients); bf16 has fp32's range and
        # fp32 needs nothing: a disabled scaler passes losses and steps through unchanged.
        self.scaler = torch.amp.GradScaler(dist.device.type, enabled=self.config.precision == "fp16")

    def _setup(self, config: TrainConfig, cls: type[RankingModel], dist: Dist) -> None:
        self.data = self.groups.records
        texts = self.groups.texts
        self.dev_groups = dev_groups(config.dev, texts)
        teacher: TeacherSource | None = None
        if config.teacher is not None:
            teacher = TeacherScores(TeacherRun.read(config.teacher), str(config.teacher))
            teacher.check(self.groups)
        if config.whole_lists:
            teacher = list_teacher(self.groups.all_scored, teacher, announce=dist.main)
        self.batches = MicroBatches(self.groups, seed=config.seed, batch_size=config.batch_size,
                                    group_size=config.group_size, grad_accum=config.grad_accum, rank=dist.rank,
                                    world=dist.world_size, teacher=teacher, whole_lists=config.whole_lists,
                                    texts=texts)
        self.global_batch = config.batch_size * config.grad_accum * dist.world_size
        self.steps_per_epoch = self.batches.steps_per_epoch
        if self.steps_per_epoch == 0:
            raise RankkitError(
                f"{len(self.groups)} training groups are fewer than one global batch of {self.global_batch} (batch "
                f"size {config.batch_size} x grad-accum {config.grad_accum} x {dist.world_size} processes)")
        self.total_steps = config.max_steps or (config.epochs or 1) * self.steps_per_epoch
        if config.whole_lists:
            check_list_loss(self.loss, config.group_size, self.groups.longest, announce=dist.main)
        if teacher is None and self.loss.needs_teacher:
            raise RankkitError(f"--loss {self.loss.name} needs --teacher RUN")
        if teacher is not None and not self.loss.uses_teacher and dist.main:
            warn(f"--teacher is ignored by --loss {self.loss.name} (only losses that read teacher scores use it)")
        # Loaded after the student is built so the student's initial weights do not depend on it.
        self.kd_teacher = None if config.teacher_checkpoint is None else Teacher.load(config.teacher_checkpoint,
                                                                                   dist.device)
        self.model.train()
        defaults = cls.training_defaults
        self.lr = config.lr if config.lr is not None else defaults.lr
        self.weight_decay = config.weight_decay if config.weight_decay is not None else defaults.weight_decay
        self.optimizer = build_optimizer(self.model, config.optimizer, self.lr, self.weight_decay, defaults.adam_betas)
        self.warmup = warmup_steps(config.warmup, self.total_steps)
        factor = lr_schedule(config.lr_schedule, self.warmup, self.total_steps, decay_to=config.lr_decay_to,
                             rate=config.lr_decay_rate, every=config.lr_decay_every)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)
        self.step, self.best, self.metrics = 0, None, {}  # type: int, float | None, dict[str, float]
        # Dropout differs per rank (like separate GPUs would), and is re-seeded deterministically.
        torch.manual_seed(config.seed * 1000 + dist.rank)
        self.resume_keys = {
            "model": cls.name, "hparams": self.model.hparams, "loss": self.loss.name,
            "data": [d["sha256"] for d in self.data], "batch_size": config.batch_size,
            "group_size": config.group_size, "grad_accum": config.grad_accum, "world_size": dist.world_size,
            "seed": config.seed, "total_steps": self.total_steps, "optimizer": config.optimizer,
            **({"whole_lists": True} if config.whole_lists else {}),
            **({} if config.teacher_checkpoint is None
               else {"teacher_checkpoint": str(config.teacher_checkpoint), "alpha": config.alpha,
                     "distillation": config.distillation}),
            # Recorded only when not fp32, so step checkpoints written before --precision existed still resume.
            **({} if config.precision == "fp32" else {"precision": config.precision}),
            **({} if config.init_checkpoint is None else {"init_checkpoint": str(config.init_checkpoint)}),
            # Recorded only when not the linear decay to 0, so step checkpoints written before the schedule
            # options existed still resume.
            **schedule_record(config),
        }
        if self.resume_from is not None:
            self.restore(self.resume_from)
        # After every load of weights (start checkpoint, resume): the table holds the final frozen encoder's vectors.
        precompute_frozen_features(self.model, self.batches, self.total_steps, self.dev_groups if dist.main else (),
                                   dev_max_candidates=config.dev_max_candidates, announce=dist.main)
        objective = (TrainingObjective(self.model, self.loss) if self.kd_teacher is None
                     else DistillationObjective(self.model, self.loss, config.alpha, config.distillation))
        self.objective: torch.nn.Module = objective
        if dist.active:
            self.objective = torch.nn.parallel.DistributedDataParallel(
                objective, device_ids=[dist.device.index] if dist.device.type == "cuda" else None)

    # -- state ----------------------------------------------------------------------------------
    def restore(self, folder: Path) -> None:
        """Continue from a step checkpoint: weights, optimiser, schedule, RNG, step, metrics."""
        state, optim = rs.load_step_checkpoint(folder)
        rs.check_resume_keys(folder, state.get("resume_keys"), self.resume_keys)
        rs.load_step_weights(self.model, folder)
        self.model.to(self.dist.device)
        self.optimizer.load_state_dict(optim["optimizer"])
        self.scheduler.load_state_dict(optim["scheduler"])
        if "scaler" in optim:
            self.scaler.load_state_dict(optim["scaler"])
        rng = optim["rng"]
        rs.set_rng_state(rng[self.dist.rank] if len(rng) == self.dist.world_size else rng[0])
        self.step, self.best = int(state["step"]), state.get("best_dev_mrr")
        self.metrics = dict(state.get("metrics", {}))
        if self.dist.main:
            rs.truncate_log(self.output / rs.TRAIN_LOG, self.step)
            log(f"resuming from {folder} at step {self.step}/{self.total_steps}")

    def backbone_provenance(self, init: RankingModel | None) -> dict[str, Any]:
        """Where the weights came from (rankkit.json ``base_model``): the backbone's hub repo id and commit
        (or local folder fingerprint); with ``--init-checkpoint`` alone, that checkpoint's own base model."""
        if init is not None and self.config.backbone is None:
            assert init.source is not None
            recorded = read_meta(init.source.path).get("base_model")
            return {**(recorded if isinstance(recorded, dict) else {}),
                    "via_init_checkpoint": init.source.provenance()}
        return backbone_source(self.config.backbone).provenance()

    def meta(self) -> dict[str, Any]:
        """rankkit.json's training record."""
        c = self.config
        training = {
            "backbone": None if c.backbone is None else str(c.backbone), "epochs": c.epochs,
            "max_steps": c.max_steps, "total_steps": self.total_steps, "batch_size": c.batch_size,
            "group_size": c.group_size, "grad_accum": c.grad_accum, "world_size": self.dist.world_size,
            "global_batch": self.global_batch, "lr": self.lr, "warmup_steps": self.warmup,
            "optimizer": c.optimizer, "weight_decay": self.weight_decay, "max_grad_norm": c.max_grad_norm,
            "seed": c.seed, "loss": self.loss.name, "teacher": None if c.teacher is None else str(c.teacher),
            "teacher_checkpoint": None if c.teacher_checkpoint is None else str(c.teacher_checkpoint),
            "alpha": None if c.teacher_checkpoint is None else c.alpha, "dev": [str(p) for p in c.dev],
            "precision": c.precision, "gradient_checkpointing": c.gradient_checkpointing, "workers": c.workers,
            **({"prefetch_thread": True} if self.prefetch_thread else {}),
            "init_checkpoint": None if c.init_checkpoint is None else str(c.init_checkpoint),
            "distillation": None if c.teacher_checkpoint is None else c.distillation,
            # Only when set: a run with the default linear decay to 0 writes the same record as before.
            **schedule_record(c),
            **({"whole_lists": True} if c.whole_lists else {}),
        }
        return {"training": training, "base_model": self.base_model,
                "data": {"train": self.data, "groups": len(self.groups)}, "steps": self.step,
                "epochs": round(self.step / self.steps_per_epoch, 6), "metrics": dict(self.metrics),
                "rankkit_version": __version__}

    def evaluate(self, epoch: int) -> dict[str, float] | None:
        """Dev metrics (rank 0; None elsewhere and without dev groups), logged; the best model so far is
        kept in ``OUTPUT/best``."""
        if not self.dev_groups:
            return None
        result = None
        if self.dist.main:
            c = self.config
            # About as many documents per forward pass as a training micro-batch.
            per_pass = max(1, c.batch_size * c.group_size // max(1, c.dev_max_candidates))
            with autocast(c.precision, self.dist.device):  # dev scores as the training forward computes them
                result = evaluate_groups(self.model, self.dev_groups, batch_size=per_pass,
                                         max_candidates=c.dev_max_candidates, device=self.dist.device)
            self.metrics.update(result)
            rs.append_log(self.output / rs.TRAIN_LOG, {"step": self.step, "epoch": epoch, **result})
            log(f"step {self.step}: dev MRR {result['dev_mrr']:.4f}")
            if self.best is None or result["dev_mrr"] > self.best:
                self.best = result["dev_mrr"]
                self.metrics.update(best_dev_mrr=self.best, best_step=self.step)
                save_model(self.model, self.output / BEST, self.meta())
        self.dist.barrier()
        return result

    def save_step(self) -> None:
        rngs = self.dist.gather(rs.rng_state())
        if self.dist.main:
            state = {"step": self.step, "best_dev_mrr": self.best, "metrics": self.metrics,
                     "resume_keys": self.resume_keys}
            optim = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(), "rng": rngs,
                     **({"scaler": self.scaler.state_dict()} if self.scaler.is_enabled() else {})}
            rs.save_step_checkpoint(self.output, self.model, self.meta(), state, optim,
                                    keep=self.config.keep_checkpoints)
        self.dist.barrier()

    # -- the loop -------------------------------------------------------------------------------
    def train_step(self, micro_batches: Sequence[GroupBatch] | None = None) -> float:
        """One optimiser step over this rank's micro-batches (prepared here unless given, e.g. by
        :func:`~rankkit.training.loader.step_batches`); the loss averaged over processes."""
        c, total = self.config, 0.0
        if micro_batches is None:
            micro_batches = [self.model.prepare(b) for b in self.batches.at_step(self.step)]
        for m, batch in enumerate(micro_batches):
            batch = batch.to(self.dist.device)
            sync = m == c.grad_accum - 1 or not self.dist.active
            with (nullcontext() if sync else self.objective.no_sync()):  # type: ignore[operator]
                # Autocast covers the forward pass and the loss only; backward runs outside it and
                # the gradients land on the fp32 master weights.
                with autocast(c.precision, self.dist.device):
                    teacher = None if self.kd_teacher is None else self.kd_teacher.scores(batch)
                    loss = self.objective(batch, teacher).float() / c.grad_accum
                self.scaler.scale(loss).backward()
            total += float(loss.detach())
        if not math.isfinite(total):
            raise RankkitError(f"loss became {total} at step {self.step + 1}; lower --lr")
        if c.max_grad_norm > 0:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the fp16-scaled ones
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.max_grad_norm)
        self.scaler.step(self.optimizer)  # fp16: skipped when a gradient overflowed, and the scale lowered
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return self.dist.mean(total)

    def run(self, callbacks: Sequence[Callable[[StepInfo], None]] = ()) -> TrainResult:
        c, dist = self.config, self.dist
        if dist.main:
            self.output.mkdir(parents=True, exist_ok=True)
            if self.warm_start is not None:
                rs.append_log(self.output / rs.TRAIN_LOG, self.warm_start.record())
            log(f"training {self.model.name} on {len(self.groups):,} groups: {self.total_steps:,} steps of "
                f"{self.global_batch} groups ({self.steps_per_epoch:,} steps/epoch), lr {self.lr:g}, warm-up "
                f"{self.warmup} steps, device {dist.device}, {c.precision}{self.precision_reason}, "
                f"{c.workers} batch workers{' and a prefetch thread' if self.prefetch_thread else ''}"
                f"{self.workers_reason}"
                + (f", {dist.world_size} processes" if dist.active else "")
                + (f", distilling from {c.teacher_checkpoint} ({c.distillation}, alpha {c.alpha:g})" if self.kd_teacher else ""))
        # metrics.csv, training.png and TensorBoard (rank 0), continued from a resumed run's rows.
        curves = (TrainingCurves(self.output, title=f"{self.output.name}: rankkit train --model {self.model.name}",
                                 report_to=c.report_to, resume_step=None if self.resume_from is None else self.step)
                  if dist.main else None)
        # The loss that is logged (train.log, metrics.csv, TensorBoard, the bar, the final line, the model card) is
        # the mean over the steps since the previous log line (loss_steps of them), not one step's value: one
        # step's loss swings with its batch, so the bar could end at 3.21 while the card said 6.05.
        window, window_steps, shown, started, start_step = 0.0, 0, None, time.perf_counter(), self.step
        prepared = step_batches(self.batches, self.model, self.step, self.total_steps, workers=self.workers,
                                thread=self.prefetch_thread)
        with progress_bar("ex", transient=False) as bar:
            task = bar.add_task("training", total=self.total_steps * self.global_batch,
                                completed=self.step * self.global_batch, visible=dist.main)
            while self.step < self.total_steps:
                epoch = self.step // self.steps_per_epoch
                lr_now = float(self.scheduler.get_last_lr()[0])
                step_loss = self.train_step(next(prepared))
                window, window_steps = window + step_loss, window_steps + 1
                rate = (self.step - start_step) * self.global_batch / max(time.perf_counter() - started, 1e-9)
                evaluating = self.step % self.steps_per_epoch == 0 or self.step == self.total_steps
                # A dev evaluation writes a metrics.csv row, so it is a log line too: every record has the same loss.
                logged = (self.step % c.log_every == 0 or self.step == self.total_steps
                          or (evaluating and bool(self.dev_groups)))
                mean = window / window_steps
                if logged:
                    shown = f"loss {mean:.4f} (mean of {window_steps} steps)"
                    self.metrics.update(loss=mean, loss_steps=window_steps)
                if dist.main:
                    bar.update(task, advance=self.global_batch,
                               description=f"training {shown or f'loss {mean:.4f} (mean so far)'} lr {lr_now:.2e}")
                    if logged:
                        rs.append_log(self.output / rs.TRAIN_LOG, {"step": self.step, "epoch": epoch, "loss": mean,
                                                                   "loss_steps": window_steps, "lr": lr_now,
                                                                   "examples_per_s": round(rate, 2)})
                for callback in callbacks:
                    callback(StepInfo(self.step, self.total_steps, epoch, step_loss, lr_now))
                dev = self.evaluate(epoch) if evaluating else None
                if curves is not None and logged:
                    curves.log(self.step, epoch, loss=mean, lr=lr_now, dev=dev, seconds=time.perf_counter() - started)
                    if dev is not None and self.step < self.total_steps:
                        curves.plot()  # the picture at each dev evaluation (and at the end, below)
                if logged:
                    window, window_steps = 0.0, 0
                if c.save_every is not None and self.step % c.save_every == 0 and self.step < self.total_steps:
                    self.save_step()
        digests = dist.gather(params_digest(self.model))
        if curves is not None:
            curves.plot()  # the picture at the end, drawn before the final save so its model card links it
        if dist.main:
            if len(set(digests)) != 1:
                raise RankkitError(f"replicas diverged: parameter digests {digests}")
            save_model(self.model, self.output, self.meta())
            rs.append_log(self.output / rs.TRAIN_LOG, {"step": self.step, "event": "done", "replica_digests": digests,
                                                       "seconds": round(time.perf_counter() - started, 3)})
            log(f"saved {self.model.name} to {self.output} ({self.step} steps, loss "
                f"{self.metrics.get('loss', float('nan')):.4f}: the mean of the last {self.metrics.get('loss_steps', 0)} "
                f"steps)")
        if curves is not None:
            curves.close()
        dist.barrier()
        return TrainResult(self.output, self.step, dict(self.metrics))
