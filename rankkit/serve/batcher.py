"""Dynamic batching: concurrent requests gathered into one call of the inference session, on one thread.

An :class:`~rankkit.runtime.session.InferenceSession` is not thread-safe, so one worker thread owns it and every
model call runs there. Requests (:class:`Job`: one query and its whole candidate list, or texts to encode)
wait in a queue; the worker takes the oldest and, while the jobs of the same kind waiting with it come to less
than the token budget (``batch_tokens``, estimated), waits up to ``max_wait_ms`` after that job arrived for
others to join, then scores them together: ``session.scores(queries, lists)`` for re-ranking (each request's
list whole, so list-wise models see their whole set; a point-wise model's pairs of all the requests are
length-sorted into the session's batches together), ``session.encode(texts)`` for embeddings. That is the
call ``rankkit rerank`` and ``rankkit index --kind dense`` make, so a request's scores equal theirs for the
same texts (within float noise of how pairs share padded batches: below 1e-5, tested).

A batch that fails is retried one request at a time, so a request the model refuses fails alone. A job whose
future was cancelled (its request timed out waiting) is skipped. :meth:`Batcher.stop` lets the worker finish
every job already queued before it returns (the drain on SIGTERM).
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import math
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from rankkit.runtime.session import InferenceSession
from rankkit.serve.limits import Limits
from rankkit.serve.metrics import Metrics

#: Bytes of text per token when estimating a batch's tokens (English WordPiece: about 4.5).
BYTES_PER_TOKEN = 4


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``: the heap's free pages back to the system (None elsewhere). Batches of changing
    shapes leave torch's freed buffers in glibc's heaps (its mmap threshold grows past them), so a server's
    resident memory would creep up with every new shape (measured: 463 -> 748 MB over 32 DL19 requests of 30
    passages at concurrency 4, a MiniLM mono; trimmed when the worker goes idle, 462 -> 510 MB and flat)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    return lambda: trim(0)


TRIM = _malloc_trim()
#: Under continuous load (the queue never empty) the heap is trimmed this often, in seconds.
TRIM_SECONDS = 10.0


@dataclass(eq=False)
class Job:
    """One request's work: ``kind`` ``rerank`` (``query`` and its ``texts``), ``query`` or ``document``
    (``texts`` to encode); the result arrives on ``future`` (float64 scores, or float32 vectors)."""

    kind: str
    query: str
    texts: list[str]
    #: Estimated tokens (what the batch budget counts).
    cost: int
    future: Future[Any] = field(default_factory=Future)
    queued: float = field(default_factory=time.monotonic)
    #: Tokens through the model attributed to this job (its share of its batch's, by estimated cost).
    tokens: int = 0


def estimate_tokens(query: str, texts: list[str], limit: int | None) -> int:
    """A job's tokens, estimated from its bytes (pairs: query + text + 3 specials), each text at most ``limit``."""
    q = len(query.encode("utf-8")) // BYTES_PER_TOKEN if query else 0
    total = 0
    for text in texts:
        tokens = q + len(text.encode("utf-8")) // BYTES_PER_TOKEN + 3
        total += min(tokens, limit) if limit else tokens
    return max(total, 1)


class Batcher:
    """The worker thread and its queue (see the module doc)."""

    def __init__(self, session: InferenceSession, limits: Limits, metrics: Metrics) -> None:
        self.session = session
        self.limits = limits
        self.metrics = metrics
        self._queue: collections.deque[Job] = collections.deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        #: Texts a second through the model, smoothed (for Retry-After); None until a batch ran.
        self.rate: float | None = None
        self.running_texts = 0
        #: A failure of the worker itself (not of a batch): the service is unhealthy.
        self.crashed: str | None = None
        self._trimmed = time.monotonic()

    # -- the caller's side ----------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="rankkit-serve-model", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self.crashed is None

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._stopping:
                raise RuntimeError("the model worker has stopped")
            self._queue.append(job)
            self.metrics.queue_depth.set(len(self._queue))
            self._cond.notify()

    def discard(self, job: Job) -> bool:
        """Cancel a job still waiting (its request timed out); False when it is already being scored."""
        with self._cond:
            if not job.future.cancel():
                return False
            try:
                self._queue.remove(job)
            except ValueError:
                pass
            self.metrics.queue_depth.set(len(self._queue))
            return True

    def waiting_texts(self) -> int:
        with self._cond:
            return sum(len(job.texts) for job in self._queue) + self.running_texts

    def retry_after(self) -> int:
        """Seconds until the work queued now is likely done (``Retry-After``): at least 1, at most 60."""
        rate = self.rate or 1.0
        return int(min(60, max(1, math.ceil(self.waiting_texts() / rate))))

    def stop(self, timeout: float | None = None) -> None:
        """Let the worker finish the jobs queued, then end it."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the worker -----------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                batch = self._gather()
                if batch is None:
                    return
                if batch:
                    self._execute(batch)
                    now = time.monotonic()
                    if TRIM is not None and (not self._queue or now - self._trimmed > TRIM_SECONDS):
                        TRIM()  # idle, or busy for a while: hand freed memory back
                        self._trimmed = now
        except BaseException as err:  # noqa: BLE001 - the worker must not die silently
            self.crashed = f"{type(err).__name__}: {err}"
            with self._cond:
                for job in self._queue:
                    if job.future.set_running_or_notify_cancel():
                        job.future.set_exception(RuntimeError("the model worker stopped"))
                self._queue.clear()

    def _gather(self) -> list[Job] | None:
        budget = self.limits.batch_tokens
        with self._cond:
            while not self._queue:
                if self._stopping:
                    return None
                self._cond.wait()
            first = self._queue[0]
            deadline = first.queued + self.limits.max_wait_ms / 1000.0
            while not self._stopping:
                if sum(job.cost for job in self._queue if job.kind == first.kind) >= budget:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
                if not self._queue:
                    return []
                first = self._queue[0]
            kind = self._queue[0].kind
            taken: list[Job] = []
            kept: collections.deque[Job] = collections.deque()
            total = 0
            for job in self._queue:
                if job.kind == kind and (not taken or total + job.cost <= budget):
                    taken.append(job)
                    total += job.cost
                else:
                    kept.append(job)
            self._queue = kept
            self.metrics.queue_depth.set(len(kept))
            batch = [job for job in taken if job.future.set_running_or_notify_cancel()]
            self.running_texts = sum(len(job.texts) for job in batch)
            return batch

    def _execute(self, batch: list[Job]) -> None:
        session = self.session
        tokens_before, seconds_before = session.stats.tokens, session.seconds
        started = time.perf_counter()
        try:
            results = self._score(batch)
        except Exception as err:  # noqa: BLE001 - answered by the request's handler, as one line
            if len(batch) > 1:  # retried one by one, so the failure lands on its own request
                for job in batch:
                    self._execute([job])
                return
            self.running_texts = 0
            batch[0].future.set_exception(err)
            return
        elapsed = time.perf_counter() - started
        tokens = session.stats.tokens - tokens_before
        seconds = max(session.seconds - seconds_before, 1e-9)
        texts = sum(len(job.texts) for job in batch)
        cost = sum(job.cost for job in batch)
        for job in batch:
            job.tokens = round(tokens * job.cost / cost) if cost else 0
        m = self.metrics
        m.batches.inc()
        m.batch_requests.observe(len(batch))
        m.batch_texts.observe(texts)
        m.tokens.inc(tokens)
        m.model_seconds.inc(seconds)
        m.tokens_per_second.set(tokens / seconds)
        m.texts.inc(texts)
        rate = texts / max(elapsed, 1e-9)
        self.rate = rate if self.rate is None else 0.8 * self.rate + 0.2 * rate
        self.running_texts = 0
        for job, result in zip(batch, results):
            job.future.set_result(result)

    def _score(self, batch: list[Job]) -> list[Any]:
        """The batch's results, one per job, through the session."""
        kind = batch[0].kind
        if kind == "rerank":
            scores = self.session.scores([job.query for job in batch], [job.texts for job in batch])
            return [s.double().cpu() for s in scores]
        texts = [text for job in batch for text in job.texts]
        vectors = self.session.encode(texts, is_query=kind == "query")
        array = vectors.detach().to(torch.float32).cpu().numpy()
        out, start = [], 0
        for job in batch:
            out.append(array[start:start + len(job.texts)])
            start += len(job.texts)
        return out


def warm_up(session: InferenceSession, encode: bool, log: Callable[[str], None] | None = None) -> float:
    """One small call through the model before the service listens (first-call costs out of the first
    request); returns its seconds."""
    started = time.perf_counter()
    if encode:
        session.encode(["a warm-up text"], is_query=False)
    session.scores(["warm up"], [["a first warm-up passage", "a second one"]])
    seconds = time.perf_counter() - started
    if log is not None:
        log(f"warm-up call: {seconds:.2f} s")
    return seconds


__all__ = ["Batcher", "Job", "estimate_tokens", "warm_up"]
