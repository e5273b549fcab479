"""Second-stage re-ranking of a run, streamed query by query (``rankkit rerank``).

Each query's top ``depth`` candidates are scored by a model from the query text and the passage
text only (never the first-stage rank or score) and re-ordered; the candidates below ``depth``
follow unchanged, as pygaggle does, so the output keeps the input's depth. Their scores are
re-written as ``min(re-ranked scores) - 1, - 2, ...`` in their input order, so that
:func:`rankkit.formats.write_run`'s sort reproduces exactly that order.

Queries stream from the run a few at a time (until ``chunk_pairs`` candidates are gathered), so
memory does not grow with the run; all pairs of a chunk are encoded together, longest first, in
batches of ``batch_size`` under ``torch.inference_mode``.

Under torchrun (``dist``, :mod:`rankkit.distributed`) every process reads the run and cuts the
same chunks; chunk ``k`` is scored by rank ``k % N`` exactly as one process would score it (the
same queries encoded together), the scored chunks are gathered after every round of N, and rank 0
writes them in run order: the run is byte-identical to a one-process run (tested).

Models:

each model's :meth:`~rankkit.models.base.RankingModel.rerank_scores`: point-wise logits
(``mono``), MatRank's Borda vote, Set-Encoder's listwise scores, document aggregates (PARADE),
or the embedding similarity of bi-encoders (``repbert``, ``densetrans``; untrained ``repbert`` is
the zero-shot baseline).
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from rankkit.console import log, progress_bar, work_reporter
from rankkit.devices import autocast
from rankkit.distributed import SINGLE, Dist
from rankkit.docstore import DocStore
from rankkit.errors import EnvironmentFailure, InputError, RankkitError, excerpt, is_out_of_memory
from rankkit.formats import read_topics, write_run
from rankkit.files import iter_lines
from rankkit.formats.runs import iter_run_queries
from rankkit.models.base import RankingModel


@dataclass
class RerankReport:
    """What a re-ranking pass did."""

    queries: int
    reranked: int  # candidates scored by the model
    lines: int  # lines written
    seconds: float

    @property
    def pairs_per_second(self) -> float:
        return self.reranked / self.seconds if self.seconds > 0 else 0.0


def count_run_pairs(path: str | os.PathLike[str], depth: int) -> tuple[int, int] | None:
    """``(queries, pairs)`` a re-ranking to ``depth`` scores: one fast pass reading the first column (progress
    totals). None for anything but a regular file (a pipe can be read once only)."""
    if not Path(path).is_file():
        return None
    queries = pairs = 0
    previous: str | None = None
    here = 0
    for _, text in iter_lines(path, skip_comments=True):
        qid = text.split(None, 1)[0]
        if qid != previous:
            queries += 1
            previous, here = qid, 0
        if here < depth:
            pairs += 1
            here += 1
    return queries, pairs


@dataclass
class RerankProgress:
    """``rankkit rerank``'s bar: (query, passage) pairs scored, moving within a chunk as the model's batches
    finish (:func:`rankkit.console.report_work`), and queries written as its detail."""

    bar: Any
    task: Any
    queries: int | None
    emitted: int = 0  # pairs of the queries written so far

    def __post_init__(self) -> None:
        self.done(0, 0)

    def done(self, queries: int, pairs: int) -> None:
        """``queries`` queries and their ``pairs`` pairs are scored and written."""
        self.emitted = pairs
        total = f"/{self.queries:,}" if self.queries is not None else ""
        self.bar.update(self.task, completed=pairs, detail=f"{queries:,}{total} q")

    def within(self, size: int) -> Callable[[int, int], None]:
        """A listener for the model's ``report_work(done, total)`` while it scores a chunk of ``size`` pairs."""
        def heard(done: int, total: int) -> None:
            if total > 0:
                self.bar.update(self.task, completed=self.emitted + size * min(done, total) // total)

        return heard


def _model_scores(model: RankingModel, queries: Sequence[str], candidates: Sequence[Sequence[str]], batch_size: int,
                  precision: str, device: torch.device | str,
                  on_work: Callable[[int, int], None] | None = None) -> list[torch.Tensor]:
    """``model.rerank_scores`` under ``precision``'s autocast; ``on_work(done, total)`` hears its batches; running
    out of memory is one line naming the batch size."""
    try:
        with autocast(precision, torch.device(device)), (work_reporter(on_work) if on_work else nullcontext()):
            return model.rerank_scores(queries, candidates, batch_size)
    except (MemoryError, RuntimeError) as err:
        if not is_out_of_memory(err):
            raise
        raise EnvironmentFailure(f"out of memory scoring {batch_size} pairs at a time on {device}; lower "
                                 f"--batch-size (now {batch_size})") from None


def score_lists(model: RankingModel, queries: Sequence[str], candidates: Sequence[Sequence[str]], *,
                batch_size: int = 32, precision: str = "fp32", device: torch.device | str = "cpu",
                chunk_pairs: int = 1024, show_progress: bool = True) -> list[torch.Tensor]:
    """Each query's scores of its candidate texts, as :func:`rerank_run` scores them: whole queries a chunk of
    about ``chunk_pairs`` pairs at a time (memory does not grow with the number of queries), under a progress
    bar of (query, passage) pairs that moves with the model's batches (``show_progress``; a heartbeat line off
    a terminal). Used by :func:`rankkit.rerank`."""
    sizes = [len(texts) for texts in candidates]
    bounds, start, pairs = [], 0, 0
    for end, size in enumerate(sizes, start=1):
        pairs += size
        if pairs >= chunk_pairs:
            bounds.append((start, end))
            start, pairs = end, 0
    if start < len(sizes):
        bounds.append((start, len(sizes)))
    scores: list[torch.Tensor] = []
    with progress_bar("pairs") if show_progress else nullcontext() as bar:
        progress = None if bar is None else RerankProgress(bar, bar.add_task("re-ranking", total=sum(sizes)),
                                                           len(queries))
        for first, last in bounds:
            scores += _model_scores(model, queries[first:last], candidates[first:last], batch_size, precision, device,
                                    None if progress is None else progress.within(sum(sizes[first:last])))
            if progress is not None:
                progress.done(last, sum(sizes[:last]))
    return scores


def merge_tail(reranked: dict[str, float], tail: Sequence[str]) -> dict[str, float]:
    """Re-ranked scores plus the unchanged tail below them, in its given order."""
    docs = dict(reranked)
    floor = min(reranked.values()) if reranked else 0.0
    for i, docid in enumerate(tail, start=1):
        docs[docid] = floor - float(i)
    return docs


def rerank_run(model: RankingModel, run: str | os.PathLike[str], topics: str | os.PathLike[str] | Mapping[str, str],
               store: DocStore, output: str | os.PathLike[str], *, depth: int = 100, batch_size: int = 32,
               max_length: int | None = None, device: torch.device | str = "cpu", tag: str | None = None,
               chunk_pairs: int = 1024, precision: str = "fp32", dist: Dist = SINGLE) -> RerankReport:
    """Re-rank each query's top ``depth`` candidates of ``run`` with ``model``; write ``output``.

    ``topics`` gives the query texts (a file or ``{qid: text}``; every run query needs one), ``store`` the passage texts.
    ``max_length`` overrides the model's input length (whole pair for cross-encoders, passage for
    bi-encoders). ``precision`` ``bf16`` runs the model under autocast (:func:`rankkit.devices.autocast`).
    The output is written atomically, streaming: a failure leaves no file. Under torchrun, ``dist``
    splits the chunks of queries across the processes; rank 0 writes.
    """
    import time

    if depth < 1:
        raise RankkitError(f"--depth must be at least 1, got {depth}")
    if batch_size < 1:
        raise RankkitError(f"--batch-size must be at least 1, got {batch_size}")
    for path in (run, topics):
        if isinstance(path, Mapping):
            continue
        if not Path(path).is_file():
            raise InputError(path, None, "is a directory, expected a file" if Path(path).is_dir() else "no such file")
    texts_of = topics if isinstance(topics, Mapping) else read_topics(topics)
    if max_length is not None:
        model.set_max_length(max_length)
    model.to(device)
    model.eval()
    autocast(precision, torch.device(device))  # refuses a precision the device cannot run, before any work
    tag = tag or f"rankkit-{model.name}"
    stats = {"queries": 0, "reranked": 0}
    started = time.perf_counter()

    def chunks() -> Iterator[list[tuple[str, list[tuple[str, float]]]]]:
        chunk: list[tuple[str, list[tuple[str, float]]]] = []
        pairs = 0
        for qid, ranking in iter_run_queries(run):
            if qid not in texts_of:
                raise RankkitError(f"query {excerpt(qid)} of {'the run' if isinstance(run, Mapping) else run} has no "
                                   f"text in {'the topics' if isinstance(topics, Mapping) else topics}")
            chunk.append((qid, ranking))
            pairs += min(depth, len(ranking))
            if pairs >= chunk_pairs:
                yield chunk
                chunk, pairs = [], 0
        if chunk:
            yield chunk

    def score(chunk: list[tuple[str, list[tuple[str, float]]]],
              on_work: Callable[[int, int], None] | None = None) -> list[tuple[str, dict[str, float], int]]:
        """Each query of ``chunk`` with its re-ranked ranking and how many candidates were scored;
        ``on_work(done, total)`` hears the model's batches (:func:`rankkit.console.report_work`)."""
        heads = [[docid for docid, _ in ranking[:depth]] for _, ranking in chunk]
        wanted = sorted({d for h in heads for d in h})
        passages = store.get_many(wanted)
        scores = _model_scores(model, [texts_of[qid] for qid, _ in chunk], [[passages[d] for d in h] for h in heads],
                               batch_size, precision, device, on_work)
        out = []
        for (qid, ranking), head, s in zip(chunk, heads, scores):
            top = {docid: float(v) for docid, v in zip(head, s.tolist())}
            out.append((qid, merge_tail(top, [docid for docid, _ in ranking[depth:]]), len(head)))
        return out

    def scored() -> Iterator[tuple[str, dict[str, float]]]:
        with progress_bar("pairs") as bar:
            # The totals cost one quick pass over the run; without them the bar shows 0/? and no ETA.
            # The bar counts (query, passage) pairs, what the model scores: queries vary in depth.
            queries, pairs = count_run_pairs(run, depth) or (None, None)
            progress = RerankProgress(bar, bar.add_task("re-ranking", total=pairs, visible=dist.main), queries)
            held: list[tuple[str, dict[str, float], int]] | None = None
            count = 0
            for k, chunk in enumerate(chunks()):
                count = k + 1
                if dist.mine(k):
                    # One process: the model's batches move the count inside a chunk too.
                    size = sum(min(depth, len(ranking)) for _, ranking in chunk)
                    held = score(chunk, progress.within(size) if dist.world_size == 1 else None)
                if count % dist.world_size == 0:  # a round: one chunk per rank, gathered in chunk order
                    yield from emit(dist.gather(held), progress)
                    held = None
            if count % dist.world_size:
                yield from emit(dist.gather(held), progress)

    def emit(parts: list[list[tuple[str, dict[str, float], int]] | None],
             progress: RerankProgress) -> Iterator[tuple[str, dict[str, float]]]:
        for part in parts:
            for qid, docs, scored_here in part or []:
                stats["queries"] += 1
                stats["reranked"] += scored_here
                yield qid, docs
            progress.done(stats["queries"], stats["reranked"])

    if dist.main:
        lines = write_run(output, scored(), tag)
    else:
        lines = sum(len(docs) for _, docs in scored())  # take part in every gather; rank 0 writes
    dist.barrier()
    report = RerankReport(stats["queries"], stats["reranked"], lines, time.perf_counter() - started)
    if dist.main:
        log(f"re-ranked {report.reranked:,} candidates of {report.queries:,} queries in {report.seconds:.1f} s "
            f"({report.pairs_per_second:,.1f} pairs/s); wrote {lines:,} lines to {output}")
    return report


__all__ = ["RerankProgress", "RerankReport", "count_run_pairs", "merge_tail", "rerank_run", "score_lists"]
