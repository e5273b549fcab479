"""The inference session: what runs a loaded model (device, numerics, attention kernel, batching, prefetch).

Every inference driver (``rankkit rerank``, ``explain``, ``index --kind dense``, ``retrieve``, the Python API and
the benchmarks) scores through an :class:`InferenceSession`; none of them enters autocast or reads a precision
string. The session owns:

* the model on its device, its weights in the precision they run in (:mod:`rankkit.runtime.precision`: bf16
  encoder weights on CUDA, autocast on the CPU, TF32 only when named);
* the attention kernel on CUDA: the memory-efficient (and flash) kernels, not cuDNN's, which builds an execution
  plan per new input shape (on an H200 a re-ranking's cold pass ran at 1,301 pairs/s with it and 9,904 without,
  docs/RESULTS.md issue 36);
* batching (:mod:`rankkit.models.batching`): inputs sorted by length and cut by rows and a token budget, lengths
  rounded up to buckets so shapes recur (on CUDA; on the CPU rows only, exactly as before sessions, so runs stay
  byte-identical);
* prefetch: the next chunk's inputs tokenised, padded and pinned on a thread while the model runs the current one
  (:meth:`InferenceSession.stream_scores`, :meth:`InferenceSession.stream_encode`);
* statistics for the last log line: tokens/s and the share of padded tokens (:meth:`InferenceSession.summary`).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

import torch

from rankkit.console import work_reporter
from rankkit.errors import EnvironmentFailure, RankkitError, is_out_of_memory
from rankkit.models.base import BiEncoder, RankingModel
from rankkit.models.batching import (
    CPU_CHUNK_PAIRS,
    CPU_ROWS,
    CUDA_CHUNK_PAIRS,
    Batching,
    BatchStats,
    batching_policy,
    collecting,
    pipelined,
)
from rankkit.models.outputs import PreferenceMatrix
from rankkit.runtime.precision import Numerics
from rankkit.runtime.settings import Runtime

K = TypeVar("K")

#: CUDA defaults, measured on an H200 with a BERT-base cross-encoder (docs/RESULTS.md issue 36): batches of at
#: most 32k padded tokens with lengths rounded up to 8 re-ranked at 18,999 pairs/s vs 12,125 in 59-row batches
#: (bf16 weights, memory-efficient attention); 64k tokens and 16-token buckets were no faster, 64-token buckets
#: 20 % slower (33 % padding).
CUDA_TOKENS, CUDA_BUCKET, CUDA_ROWS = 32_768, 8, 4_096


def tokenize_in_parallel() -> None:
    """Let the fast tokenizers use every core (their default) when the ``rankkit`` command turned that off: the
    command sets ``TOKENIZERS_PARALLELISM=false`` for processes that fork, but a GPU session waits on the CPU's
    tokenising (4,300 DL19 pairs: ~0.1 s on 16 cores against ~1 s on one, docs/RESULTS.md issue 36). A value the
    user set is kept."""
    if os.environ.get("RANKKIT_TOKENIZERS_PARALLELISM_DEFAULT") == "1":
        os.environ["TOKENIZERS_PARALLELISM"] = "true"


def default_batching(device: torch.device, rows: int | None = None, tokens: int | None = None) -> Batching:
    """The batching a session on ``device`` uses unless told: on CUDA a token budget, 8-token buckets and one
    chunk prefetched; on the CPU ``rows`` a batch and nothing else (the path before sessions: byte-identical)."""
    if device.type == "cuda":
        return Batching(rows or CUDA_ROWS, tokens or CUDA_TOKENS, CUDA_BUCKET, prefetch=1)
    return Batching(rows or CPU_ROWS, tokens, 1, prefetch=0)


def attention_kernels(device: torch.device) -> contextlib.AbstractContextManager[object]:
    """The scaled-dot-product-attention kernels on ``device``: on CUDA memory-efficient, flash and math (never
    cuDNN's, which plans per shape); elsewhere torch's own choice."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.MATH])


@dataclass
class InferenceSession:
    """A loaded model, ready to score: see the module doc. Build one with :meth:`of` (a
    :class:`~rankkit.runtime.compose.LoadedModel`) or :meth:`for_model` (a model as it is, torch fp32)."""

    model: RankingModel
    device: torch.device
    runtime: Runtime
    numerics: Numerics
    batching: Batching
    stats: BatchStats = field(default_factory=BatchStats)
    #: Seconds spent inside the model (scoring, encoding), for the rates of :meth:`summary`.
    seconds: float = 0.0

    @classmethod
    def of(cls, loaded: Any, *, batch_size: int | None = None, max_tokens: int | None = None,
           batching: Batching | None = None) -> "InferenceSession":
        """A session for a :class:`~rankkit.runtime.compose.LoadedModel`; ``batch_size`` (rows) and ``max_tokens``
        override the device's defaults (:func:`default_batching`)."""
        chosen = batching or default_batching(loaded.device, batch_size, max_tokens)
        if loaded.device.type == "cuda":
            tokenize_in_parallel()
        session = cls(loaded.model, loaded.device, loaded.runtime, loaded.numerics, chosen)
        session.model.eval()
        session.model.inference_context = session.running  # model.rank() runs in this session too
        return session

    @classmethod
    def for_model(cls, model: RankingModel, *, batch_size: int | None = None, max_tokens: int | None = None,
                  device: torch.device | str | None = None) -> "InferenceSession":
        """A session for a model as it is (torch, its weights' numerics, on ``device`` or where it is)."""
        on = torch.device(device) if device is not None else model.device
        model.to(on)
        model.eval()
        return cls(model, on, Runtime(), Numerics(), default_batching(on, batch_size, max_tokens))

    # -- running ----------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The context of every call into the model: inference mode, numerics, attention kernels, batching and
        statistics; running out of memory becomes one line naming the batch."""
        started = time.perf_counter()
        try:
            with torch.inference_mode(), self.numerics.running(self.device), attention_kernels(self.device), \
                    batching_policy(self.batching), collecting(self.stats):
                yield
        except (MemoryError, RuntimeError) as err:
            if not is_out_of_memory(err):
                raise
            rows = self.batching.rows
            budget = f" or --max-tokens (now {self.batching.tokens})" if self.batching.tokens else ""
            raise EnvironmentFailure(f"out of memory scoring {rows} pairs at a time on {self.device}; lower --batch-size "
                                     f"(now {rows}){budget}") from None
        finally:
            self.seconds += time.perf_counter() - started

    def scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
               on_work: Callable[[int, int], None] | None = None) -> list[torch.Tensor]:
        """Each query's scores of its candidate texts (float64, CPU), as ``model.rerank_scores`` computes them in
        this session; ``on_work(done, total)`` hears the model's batches."""
        with self.running(), (work_reporter(on_work) if on_work else contextlib.nullcontext()):
            return self.model.rerank_scores(queries, candidates, self.batching.rows)

    def stream_scores(self, chunks: Iterable[tuple[K, Sequence[str], Sequence[Sequence[str]]]],
                      on_work: Callable[[K, int], Callable[[int, int], None] | None] | None = None
                      ) -> Iterator[tuple[K, list[torch.Tensor]]]:
        """``(key, scores)`` for each ``(key, queries, candidates)`` chunk, in order; the next chunk's inputs are
        prepared (``model.rerank_inputs``: tokenised, batched) on a thread while this one is scored, when the
        batching prefetches. ``on_work(key, pairs)`` may give a listener for the chunk's batches."""
        def prepare(chunk: tuple[K, Sequence[str], Sequence[Sequence[str]]]) -> tuple[K, int, Any]:
            key, queries, candidates = chunk
            with batching_policy(self.batching):
                return key, sum(len(c) for c in candidates), \
                    self.model.rerank_inputs(queries, candidates, self.batching.rows)

        for key, pairs, prepared in pipelined(chunks, prepare, self.batching.prefetch):
            listener = on_work(key, pairs) if on_work is not None else None
            with self.running(), (work_reporter(listener) if listener else contextlib.nullcontext()):
                scores = self.model.rerank_prepared(prepared)
            yield key, scores  # outside the context: the caller's code never runs in inference mode

    def encode(self, texts: Sequence[str], *, is_query: bool,
               on_batch: Callable[[int], None] | None = None) -> torch.Tensor:
        """Vectors of ``texts`` (a bi-encoder; float32, CPU, input order)."""
        encoder = self.bi_encoder()
        with self.running():
            return encoder.encode(texts, is_query=is_query, batch_size=self.batching.rows, on_batch=on_batch)

    def stream_encode(self, chunks: Iterable[tuple[K, Sequence[str]]], *, is_query: bool,
                      on_batch: Callable[[int], None] | None = None) -> Iterator[tuple[K, torch.Tensor]]:
        """``(key, vectors)`` for each ``(key, texts)`` chunk, in order, the next chunk tokenised ahead on a thread
        when the batching prefetches."""
        encoder = self.bi_encoder()

        def prepare(chunk: tuple[K, Sequence[str]]) -> tuple[K, Any]:
            key, texts = chunk
            with batching_policy(self.batching):
                return key, encoder.encode_inputs(texts, is_query=is_query, batch_size=self.batching.rows)

        for key, prepared in pipelined(chunks, prepare, self.batching.prefetch):
            with self.running():
                vectors = encoder.encode_prepared(prepared, on_batch=on_batch)
            yield key, vectors

    def preference_matrix(self, query: str, texts: Sequence[str]) -> PreferenceMatrix:
        """The model's preference matrix of one query's candidates (``rankkit explain``)."""
        with self.running():
            return self.model.preference_matrix(query, texts)

    def bi_encoder(self) -> BiEncoder:
        if not isinstance(self.model, BiEncoder):
            raise RankkitError(f"model {self.model.name!r} is not a bi-encoder: it cannot encode texts on their own")
        return self.model

    # -- reporting --------------------------------------------------------------------------------------
    def describe(self) -> str:
        """``torch bf16 on cuda:0 (bf16 encoder weights; 4,096 rows, 32,768 padded tokens, ...)`` for log lines."""
        return (f"{self.runtime.describe()} on {self.device} ({self.numerics.describe()}; "
                f"batches of {self.batching.describe()})")

    def summary(self) -> str:
        """Tokens and the padded share of what ran, and the rate inside the model: for the last log line."""
        return self.stats.summary(self.seconds)


__all__ = ["CPU_CHUNK_PAIRS", "CPU_ROWS", "CUDA_BUCKET", "CUDA_CHUNK_PAIRS", "CUDA_ROWS", "CUDA_TOKENS",
           "InferenceSession", "attention_kernels", "default_batching", "tokenize_in_parallel"]
