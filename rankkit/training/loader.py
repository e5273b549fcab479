"""Training batches prepared off the training thread (``rankkit train --workers N``).

:class:`~rankkit.training.sampling.MicroBatches` makes each step's micro-batches a pure function
of ``(seed, step)``, so a map-style dataset over *step indices* (:class:`StepBatches`) gives a
:class:`torch.utils.data.DataLoader` everything it needs: worker processes sample, collate and
tokenise (the model's ``prepare``, which reads only the tokenizer and settings) whole steps
ahead while the main process runs the network. The sampler is the plain sequence of the steps
still to run, and the loader hands results back in that order, so:

* a fixed seed gives the same batches, hence the same losses, as the in-thread path (``--workers 0``);
* ``--resume`` starts the sequence at the restored step: exact, as in-thread;
* each DDP rank loads its own micro-batches (``k = m * world + rank``), so DDP still equals
  gradient accumulation.

Workers are forked after the model is built (Linux' default start method): they share the
groups and the tokenizer copy-on-write; fast tokenizers' own thread pools are switched off in
them (``TOKENIZERS_PARALLELISM=false``), as Hugging Face advises for forked processes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Iterator

import torch
from torch.utils.data import DataLoader, Dataset

from rankkit.errors import EnvironmentFailure, RankkitError
from rankkit.models import RankingModel
from rankkit.models.inputs import GroupBatch
from rankkit.training.config import check_workers
from rankkit.training.sampling import MicroBatches

#: Steps each worker prepares ahead (DataLoader's ``prefetch_factor``).
PREFETCH = 2


@dataclass(frozen=True)
class WorkerFailure:
    """A rankkit error raised in a worker process, carried back as data (its exceptions do not pickle) and raised
    again in the training process as the one line it is."""

    message: str
    exit_code: int

    def raise_again(self) -> None:
        if self.exit_code == 1:
            raise EnvironmentFailure(self.message)
        raise RankkitError(self.message)


class StepBatches(Dataset[list[GroupBatch]]):
    """Item ``t`` = this rank's prepared (tokenised, on the CPU) micro-batches of global step ``t``."""

    def __init__(self, batches: MicroBatches, model: RankingModel) -> None:
        self.batches = batches
        self.model = model

    def __len__(self) -> int:  # only used by samplers that ask; the loop passes its own steps
        return 1 << 62

    def __getitem__(self, step: int) -> list[GroupBatch]:
        return [self.model.prepare(batch) for batch in self.batches.at_step(step)]


class WorkerSteps(StepBatches):
    """:class:`StepBatches` in a worker process: a rankkit error becomes a :class:`WorkerFailure` item."""

    def __getitem__(self, step: int) -> list[GroupBatch]:
        try:
            return super().__getitem__(step)
        except RankkitError as err:
            return WorkerFailure(str(err), err.exit_code)  # type: ignore[return-value]


def _checked(loader: Iterable[list[GroupBatch]]) -> Iterator[list[GroupBatch]]:
    for item in loader:
        if isinstance(item, WorkerFailure):
            item.raise_again()
        yield item


def _as_is(item: list[GroupBatch]) -> list[GroupBatch]:
    """The DataLoader's collate function: a step is already collated."""
    return item


def _quiet_tokenizers(worker: int) -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    torch.set_num_threads(1)  # tokenising needs no intra-op threads; leave the cores to training


def resolve_workers(workers: int | None, device: torch.device) -> tuple[int, bool, str]:
    """``--workers`` (None: auto) as ``(processes, prefetch thread, why)``. Auto on CUDA: no processes, the next
    steps prepared on a thread while the GPU runs this one (measured on an H200, mono 8 x 8 x 256 tokens, bf16:
    0.0493 s a step on the training thread, 0.0544 s with 4 worker processes, against a bare loop's 0.0441 on
    pre-tokenised batches; docs/RESULTS.md issue 36); auto on the CPU: on the training thread (worker processes or
    threads would take the cores the step itself computes on). A number is that many processes, no thread."""
    if workers is not None:
        return check_workers(workers), False, "as given"
    if device.type != "cuda":
        return 0, False, "CPU training: batches are prepared on the training thread (workers would take its cores)"
    return 0, True, "CUDA: the next batches are prepared on a thread while the GPU runs the step"


def step_batches(batches: MicroBatches, model: RankingModel, start: int, stop: int, *,
                 workers: int = 0, thread: bool = False) -> Iterator[list[GroupBatch]]:
    """Prepared micro-batches of steps ``start .. stop - 1`` in order; ``workers`` > 0 prepares them
    in that many processes; 0 on this thread when each step asks for them (the path before workers), or with
    ``thread`` up to :data:`PREFETCH` steps ahead on one thread (the same batches: a pure function of the step)."""
    steps = range(start, stop)
    dataset = StepBatches(batches, model)
    if check_workers(workers) == 0:
        if thread:
            from rankkit.models.batching import pipelined

            return pipelined(steps, dataset.__getitem__, PREFETCH)
        return (dataset[t] for t in steps)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # before the fork: no tokenizer threads in workers
    dataset = WorkerSteps(batches, model)
    loader = DataLoader(dataset, batch_size=None, sampler=steps, num_workers=workers, collate_fn=_as_is,
                        prefetch_factor=PREFETCH, worker_init_fn=_quiet_tokenizers, persistent_workers=False,
                        # Its own generator: the loader draws its workers' base seed from it, and
                        # drawing from torch's global RNG would shift the training's dropout masks.
                        generator=torch.Generator().manual_seed(batches.seed))
    return _checked(loader)
