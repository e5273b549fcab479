"""Second-stage re-ranking of a run, streamed query by query (``rankkit rerank``).

Each query's top ``depth`` candidates are scored by a model from the query text and the passage
text only (never the first-stage rank or score) and re-ordered; the candidates below ``depth``
follow unchanged, as pygaggle does, so the output keeps the input's depth. Their scores are
re-written as ``min(re-ranked scores) - 1, - 2, ...`` in their input order, so that
:func:`rankkit.formats.write_run`'s sort reproduces exactly that order.

Queries stream from the run a few at a time (until ``chunk_pairs`` candidates are gathered), so
memory does not grow with the run; all pairs of a chunk are encoded together, longest first, in
the batches of the model's inference session (:class:`rankkit.runtime.session.InferenceSession`: its
device, numerics, attention kernels, batching and prefetch; the next chunk is read, tokenised and
batched on a thread while the model scores this one where the session prefetches).

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
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence, Union

from rankkit.console import log, progress_bar
from rankkit.distributed import Dist
from rankkit.docstore import DocStore
from rankkit.errors import InputError, RankkitError, excerpt
from rankkit.files import iter_lines
from rankkit.formats import read_topics, write_run
from rankkit.formats.runs import iter_run_queries
from rankkit.models.batching import CPU_CHUNK_PAIRS, CUDA_CHUNK_PAIRS
from rankkit.runtime.scorer import ScorerSession

# torch loads with a torch model: rerank_run driven by the ONNX scorer (rankkit.runtime.scorer) imports neither
# torch nor transformers (issue 39).
if TYPE_CHECKING:
    import torch

    from rankkit.models.base import RankingModel
    from rankkit.runtime.session import InferenceSession

#: What scores a re-ranking: a session (torch's, or the ONNX scorer's) or a model run as it is.
Ranker = Union["RankingModel", "InferenceSession", ScorerSession]


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


def session_of(ranker: Ranker, batch_size: int | None = None,
               device: torch.device | str | None = None) -> Any:
    """``ranker`` if it is a session (``batch_size`` then overrides its rows), else a session for the model as it
    is (torch, its weights' numerics) on ``device`` (default: where it is)."""
    if isinstance(ranker, ScorerSession):
        if batch_size is not None:
            ranker.batching = ranker.batching.with_rows(batch_size)
        return ranker
    from rankkit.models.base import RankingModel
    from rankkit.runtime.session import InferenceSession

    if isinstance(ranker, InferenceSession):
        if batch_size is not None:
            ranker.batching = ranker.batching.with_rows(batch_size)
        return ranker
    if not isinstance(ranker, RankingModel):
        raise RankkitError(f"expected a rankkit model or an inference session, got {type(ranker).__name__}")
    return InferenceSession.for_model(ranker, batch_size=batch_size, device=device)


def default_chunk_pairs(session: Any) -> int:
    """Pairs scored between writes: many on CUDA (each chunk sorts into few shapes), 1,024 on the CPU."""
    return CUDA_CHUNK_PAIRS if session.device.type == "cuda" else CPU_CHUNK_PAIRS


def score_lists(ranker: Ranker, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                *, batch_size: int | None = None, device: torch.device | str | None = None,
                chunk_pairs: int | None = None, show_progress: bool = True) -> list[torch.Tensor]:
    """Each query's scores of its candidate texts, as :func:`rerank_run` scores them: whole queries a chunk of
    about ``chunk_pairs`` pairs at a time (memory does not grow with the number of queries), in ``ranker``'s
    inference session (a model is run as it is, torch fp32), under a progress bar of (query, passage) pairs that
    moves with the model's batches (``show_progress``; a heartbeat line off a terminal). Used by
    :func:`rankkit.rerank`."""
    session = session_of(ranker, batch_size, device)
    chunk_pairs = chunk_pairs or default_chunk_pairs(session)
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
        chunks = ((last, queries[first:last], candidates[first:last]) for first, last in bounds)
        listen = None if progress is None else (lambda _key, pairs: progress.within(pairs))
        for last, part in session.stream_scores(chunks, listen):
            scores += part
            if progress is not None:
                progress.done(last, sum(sizes[:last]))
    return scores


def run_sample(run: str | os.PathLike[str], topics: Mapping[str, str], store: DocStore, depth: int) -> Any:
    """The run's first queries with their top candidates' texts (:class:`rankkit.runtime.auto.InputSample`), for
    auto's self-check on the user's own input; None for a run that is not a regular file (a pipe is read once)
    or whose first queries have no text (the re-ranking reports that)."""
    from rankkit.runtime.auto import SAMPLE_DEPTH, SAMPLE_QUERIES, InputSample

    if not Path(run).is_file():
        return None
    heads: list[tuple[str, list[str]]] = []
    for qid, ranking in iter_run_queries(run):
        if qid not in topics:
            return None
        heads.append((qid, [docid for docid, _ in ranking[: min(depth, SAMPLE_DEPTH)]]))
        if len(heads) == SAMPLE_QUERIES:
            break
    passages = store.get_many(sorted({d for _, head in heads for d in head}))
    return InputSample.of_lists([topics[qid] for qid, _ in heads], [[passages[d] for d in head] for _, head in heads])


def merge_tail(reranked: dict[str, float], tail: Sequence[str]) -> dict[str, float]:
    """Re-ranked scores plus the unchanged tail below them, in its given order."""
    docs = dict(reranked)
    floor = min(reranked.values()) if reranked else 0.0
    for i, docid in enumerate(tail, start=1):
        docs[docid] = floor - float(i)
    return docs


def rerank_run(ranker: Ranker, run: str | os.PathLike[str],
               topics: str | os.PathLike[str] | Mapping[str, str], store: DocStore, output: str | os.PathLike[str], *,
               depth: int = 100, batch_size: int | None = None, max_length: int | None = None,
               device: torch.device | str | None = None, tag: str | None = None, chunk_pairs: int | None = None,
               dist: Dist | None = None) -> RerankReport:
    """Re-rank each query's top ``depth`` candidates of ``run`` with ``ranker``; write ``output``.

    ``ranker`` is an :class:`~rankkit.runtime.session.InferenceSession` (what ``rankkit rerank`` builds: device,
    numerics, batching), the ONNX scorer's :class:`~rankkit.runtime.scorer.ScorerSession` (a one-label
    cross-encoder without torch) or a model, run as it is (torch, on ``device`` or where it is). ``topics`` gives the query
    texts (a file or ``{qid: text}``; every run query needs one), ``store`` the passage texts. ``max_length``
    overrides the model's input length (whole pair for cross-encoders, passage for bi-encoders); ``batch_size``
    the session's rows. The output is written atomically, streaming: a failure leaves no file. Under torchrun,
    ``dist`` splits the chunks of queries across the processes; rank 0 writes.
    """
    import time

    if depth < 1:
        raise RankkitError(f"--depth must be at least 1, got {depth}")
    if batch_size is not None and batch_size < 1:
        raise RankkitError(f"--batch-size must be at least 1, got {batch_size}")
    for path in (run, topics):
        if isinstance(path, Mapping):
            continue
        if not Path(path).is_file():
            raise InputError(path, None, "is a directory, expected a file" if Path(path).is_dir() else "no such file")
    texts_of = topics if isinstance(topics, Mapping) else read_topics(topics)
    session = session_of(ranker, batch_size, device)
    if dist is None:
        from rankkit.distributed import single_process

        dist = single_process(session.device)
    model = session.model
    if max_length is not None:
        model.set_max_length(max_length)
    chunk_pairs = chunk_pairs or default_chunk_pairs(session)
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

    Chunk = list[tuple[str, list[tuple[str, float]]]]

    def texts(numbered: Iterator[tuple[int, Chunk]]) -> Iterator[tuple[tuple[int, Chunk], list[str], list[list[str]]]]:
        """This process's chunks with their query and passage texts (read on the session's prefetch thread)."""
        for k, chunk in numbered:
            if not dist.mine(k):
                yield (k, chunk), [], []
                continue
            heads = [[docid for docid, _ in ranking[:depth]] for _, ranking in chunk]
            passages = store.get_many(sorted({d for h in heads for d in h}))
            yield (k, chunk), [texts_of[qid] for qid, _ in chunk], [[passages[d] for d in h] for h in heads]

    def scored() -> Iterator[tuple[str, dict[str, float]]]:
        with progress_bar("pairs") as bar:
            # The totals cost one quick pass over the run; without them the bar shows 0/? and no ETA.
            # The bar counts (query, passage) pairs, what the model scores: queries vary in depth.
            queries, pairs = count_run_pairs(run, depth) or (None, None)
            progress = RerankProgress(bar, bar.add_task("re-ranking", total=pairs, visible=dist.main), queries)
            held: list[tuple[str, dict[str, float], int]] | None = None
            count = 0
            # One process: the model's batches move the count inside a chunk too.
            listen = (lambda _key, size: progress.within(size)) if dist.world_size == 1 else None
            for (k, chunk), scores in session.stream_scores(texts(enumerate(chunks())), listen):
                count = k + 1
                if dist.mine(k):
                    held = []
                    for (qid, ranking), s in zip(chunk, scores):
                        top = {docid: float(v) for (docid, _), v in zip(ranking[:depth], s.tolist())}
                        held.append((qid, merge_tail(top, [docid for docid, _ in ranking[depth:]]),
                                     min(depth, len(ranking))))
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
            f"({report.pairs_per_second:,.1f} pairs/s; {session.summary()}); wrote {lines:,} lines to {output}")
    return report


__all__ = ["RerankProgress", "RerankReport", "count_run_pairs", "default_chunk_pairs", "merge_tail", "rerank_run",
           "run_sample", "score_lists", "session_of"]
