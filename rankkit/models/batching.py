"""How a model's inference inputs are cut into forward passes: the batching policy, the plan, its statistics.

A model's inference loops (:meth:`~rankkit.models.base.RankingModel.rerank_scores`,
:meth:`~rankkit.models.base.BiEncoder.encode`) sort their inputs longest first and cut them into batches by a
:class:`Batching` policy:

* ``rows``: at most this many sequences a forward pass (``--batch-size``);
* ``tokens``: at most this many *padded* tokens a forward pass (rows x padded length), so short inputs travel
  in large batches and long ones in small batches (a GPU runs ~200 kernels a BERT-base forward whatever the
  batch: small batches leave it waiting on launches, docs/RESULTS.md issue 36);
* ``bucket``: padded lengths rounded up to a multiple of this, so the same few shapes recur and the kernels
  and attention plans chosen for a shape are reused (1 = each batch padded to its own longest input);
* ``prefetch``: inputs of the next chunk prepared (tokenised, padded, pinned) in a thread while the model
  runs the current one (:func:`pipelined`; 0 = on the calling thread).

The inference session (:mod:`rankkit.runtime.session`) sets the policy for the models it runs
(:func:`batching_policy`); a model reads it with :func:`current_batching`, which without a session is plain
``rows`` batches, the behaviour before sessions (so a model used directly scores exactly as before). Each
forward pass is recorded (:func:`record_batch`) for the session's statistics (tokens/s, padded share).
"""

from __future__ import annotations

import contextvars
import queue
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence, TypeVar

import numpy as np

from rankkit.errors import RankkitError

# torch only where tensors are made (pad_rows, widen): the ONNX scorer (rankkit.runtime.scorer) batches with the
# same plan without importing it (issue 39).
if TYPE_CHECKING:
    import torch

T = TypeVar("T")
U = TypeVar("U")

#: Rows a forward pass on the CPU: the command's historical default (and the measured CPU table's setting).
CPU_ROWS = 32
#: Pairs scored between writes of a re-ranked run. On CUDA the next chunk is read and tokenised on a thread while
#: the GPU scores this one, so chunks are a few batches long (the first chunk's preparation is not hidden).
CUDA_CHUNK_PAIRS, CPU_CHUNK_PAIRS = 2_048, 1_024


@dataclass(frozen=True)
class Batching:
    """A batching policy (see the module doc)."""

    rows: int = 32
    tokens: int | None = None
    bucket: int = 1
    prefetch: int = 0

    def __post_init__(self) -> None:
        if self.rows < 1:
            raise RankkitError(f"--batch-size must be at least 1, got {self.rows}")
        if self.tokens is not None and self.tokens < 1:
            raise RankkitError(f"--max-tokens must be at least 1, got {self.tokens}")
        if self.bucket < 1:
            raise RankkitError(f"the length bucket must be at least 1, got {self.bucket}")
        if self.prefetch < 0:
            raise RankkitError(f"prefetch must be at least 0, got {self.prefetch}")

    def with_rows(self, rows: int) -> "Batching":
        return replace(self, rows=rows)

    def padded(self, length: int, limit: int | None = None) -> int:
        """``length`` rounded up to the bucket, never beyond ``limit`` (the model's longest input)."""
        width = -(-length // self.bucket) * self.bucket
        return min(width, limit) if limit is not None and length <= limit else width

    def describe(self) -> str:
        parts = [f"{self.rows:,} rows"]
        if self.tokens is not None:
            parts.append(f"{self.tokens:,} padded tokens")
        if self.bucket > 1:
            parts.append(f"lengths in steps of {self.bucket}")
        if self.prefetch:
            parts.append(f"prefetch {self.prefetch}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Batch:
    """One forward pass: ``rows`` (indices into the inputs, longest first) padded to ``width`` tokens."""

    rows: list[int]
    width: int


def length_order(lengths: Sequence[int]) -> list[int]:
    """Indices sorted by length, longest first, ties in input order (so the result is deterministic).

    Batching texts of similar length cuts padding; longest first makes an out-of-memory error
    happen on the first batch instead of hours in.
    """
    return sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))


def plan_batches(lengths: Sequence[int], batching: Batching, limit: int | None = None) -> list[Batch]:
    """The forward passes of inputs of ``lengths`` under ``batching``: longest first, cut by rows and padded
    tokens, each padded to its longest input rounded up to the bucket (at most ``limit``). Always at least one
    row a batch (an input longer than the token budget goes alone)."""
    out: list[Batch] = []
    rows: list[int] = []
    width = 0
    for i in length_order(lengths):
        need = max(width, batching.padded(lengths[i], limit))
        if rows and (len(rows) >= batching.rows
                     or (batching.tokens is not None and need * (len(rows) + 1) > batching.tokens)):
            out.append(Batch(rows, width))
            rows, need = [], batching.padded(lengths[i], limit)
        rows.append(i)
        width = need
    if rows:
        out.append(Batch(rows, width))
    return out


def pad_arrays(ids: Sequence[Sequence[int]], width: int, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """``(input_ids, attention_mask)`` int64 arrays ``[len(ids), width]`` of id lists right-padded to ``width``
    (no per-row work: this runs for every batch, often on a prefetch thread)."""
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    mask = np.arange(width)[None, :] < lengths[:, None]
    input_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
    if len(ids):
        input_ids[mask] = np.fromiter((t for row in ids for t in row), dtype=np.int64, count=int(lengths.sum()))
    return input_ids, mask.astype(np.int64)


def pad_rows(ids: Sequence[Sequence[int]], width: int, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`pad_arrays` as torch tensors (sharing the arrays' memory)."""
    import torch

    input_ids, mask = pad_arrays(ids, width, pad_id)
    return torch.from_numpy(input_ids), torch.from_numpy(mask)


def widen(features: dict[str, torch.Tensor], width: int, pad_id: int) -> dict[str, torch.Tensor]:
    """``features`` (``[rows, length]`` tensors) right-padded to ``width`` columns: ``input_ids`` with ``pad_id``,
    every other tensor (masks, segment ids) with 0. Unchanged when already that wide."""
    import torch

    out = {}
    for name, value in features.items():
        missing = width - value.shape[-1] if value.dim() == 2 else 0
        if missing > 0:
            value = torch.nn.functional.pad(value, (0, missing), value=pad_id if name == "input_ids" else 0)
        out[name] = value
    return out


# -- statistics -------------------------------------------------------------------------------------------
@dataclass
class BatchStats:
    """What the forward passes of a session did: sequences, real and padded tokens, distinct shapes."""

    batches: int = 0
    rows: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    shapes: set[tuple[int, int]] = field(default_factory=set)

    @property
    def padded_share(self) -> float:
        """Share of the computed positions that were padding."""
        return 1 - self.tokens / self.padded_tokens if self.padded_tokens else 0.0

    def summary(self, seconds: float) -> str:
        """Tokens and the padded share of what ran, and the rate over ``seconds`` in the model: a last log line."""
        if not self.batches:
            return "no forward pass ran"
        return (f"{self.tokens:,} tokens in {self.batches:,} batches ({len(self.shapes):,} shapes), "
                f"{self.padded_share:.1%} padding, {self.tokens / max(seconds, 1e-9):,.0f} tokens/s in the model")

    def add(self, rows: int, tokens: int, width: int) -> None:
        self.batches += 1
        self.rows += rows
        self.tokens += tokens
        self.padded_tokens += rows * width
        self.shapes.add((rows, width))


_stats: contextvars.ContextVar[BatchStats | None] = contextvars.ContextVar("rankkit_batch_stats", default=None)
_policy: contextvars.ContextVar[Batching | None] = contextvars.ContextVar("rankkit_batching", default=None)


def record_batch(rows: int, tokens: int, width: int) -> None:
    """A forward pass of ``rows`` sequences with ``tokens`` real tokens, padded to ``width`` (a context-variable
    lookup when no session listens)."""
    stats = _stats.get()
    if stats is not None:
        stats.add(rows, tokens, width)


def record_mask(mask: torch.Tensor) -> None:
    """:func:`record_batch` of an attention mask ``[rows, width]``."""
    if _stats.get() is not None and mask.dim() == 2:
        record_batch(int(mask.shape[0]), int(mask.sum()), int(mask.shape[1]))


@contextmanager
def collecting(stats: BatchStats) -> Iterator[BatchStats]:
    """While inside, forward passes on this thread are recorded in ``stats``."""
    token = _stats.set(stats)
    try:
        yield stats
    finally:
        _stats.reset(token)


@contextmanager
def batching_policy(batching: Batching) -> Iterator[Batching]:
    """While inside, :func:`current_batching` on this thread is ``batching`` (rows replaced by the caller's)."""
    token = _policy.set(batching)
    try:
        yield batching
    finally:
        _policy.reset(token)


def current_batching(rows: int) -> Batching:
    """The policy a model's inference loop follows: the session's with ``rows`` as its rows, or plain ``rows``
    batches without one."""
    policy = _policy.get()
    return Batching(rows) if policy is None else policy.with_rows(rows)


# -- prefetch ---------------------------------------------------------------------------------------------
_DONE = object()


def pipelined(items: Iterable[T], prepare: Callable[[T], U], depth: int) -> Iterator[U]:
    """``prepare(item)`` for each item, in order, computed up to ``depth`` items ahead on one thread while the
    caller works on the current one (``depth`` 0: on the caller's thread). The thread runs in a copy of the
    caller's context (its batching policy); an exception there is raised here, at that item; leaving the loop
    early stops the thread."""
    if depth <= 0:
        for item in items:
            yield prepare(item)
        return
    ready: queue.Queue[tuple[object, BaseException | None]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                value = prepare(item)
                while not stop.is_set():
                    try:
                        ready.put((value, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
            ready.put((_DONE, None))
        except BaseException as err:  # handed to the consumer, raised there
            ready.put((_DONE, err))

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(produce,), name="rankkit-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            value, error = ready.get()
            if error is not None:
                raise error
            if value is _DONE:
                return
            yield value  # type: ignore[misc]
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting to put
            try:
                ready.get_nowait()
            except queue.Empty:
                pass
            thread.join(timeout=0.05)


__all__ = ["CPU_CHUNK_PAIRS", "CPU_ROWS", "CUDA_CHUNK_PAIRS", "Batch", "BatchStats", "Batching", "batching_policy",
           "collecting", "current_batching", "length_order", "pad_arrays", "pad_rows", "pipelined", "plan_batches",
           "record_batch", "record_mask", "widen"]
