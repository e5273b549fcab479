"""Fusion of several runs into one: RepBERT's alternating merge, RRF, CombSUM/CombMNZ, interpolation.

``fuse(runs, method, **options)`` is the entry point; :data:`FUSION_METHODS` lists the methods and the
options each accepts. Every method works query by query on rankings in trec_eval order (score
descending, ties by docid descending), over the union of the runs' queries in first-seen order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.files import PathLike
from rankkit.formats.runs import Run, ScatteredQueryError, iter_run_queries, read_run, sort_ranking, write_run
from rankkit.fusion.alternate import alternate_merge, fuse_alternate
from rankkit.fusion.comb import fuse_combmnz, fuse_combsum
from rankkit.fusion.interpolate import fuse_interpolate
from rankkit.fusion.normalize import NORMALIZATIONS, check_norm, missing_score, normalize_scores
from rankkit.fusion.rrf import fuse_rrf

Ranking = Sequence[tuple[str, float]]
QueryFusion = Callable[..., dict[str, float]]


@dataclass(frozen=True)
class FusionMethod:
    """A fusion method: its per-query function, the options it accepts and how many runs it takes."""

    name: str
    summary: str
    fuse_query: QueryFusion
    options: tuple[str, ...]
    min_runs: int = 2
    max_runs: int | None = None


FUSION_METHODS: dict[str, FusionMethod] = {
    "alternate": FusionMethod(
        "alternate", "RepBERT's alternating merge (Eq. 6): A1, B1, A2, B2, ..., first occurrence kept",
        fuse_alternate, ()),
    "rrf": FusionMethod(
        "rrf", "reciprocal rank fusion: sum of w / (rrf_k + rank)", fuse_rrf, ("rrf_k", "weights")),
    "combsum": FusionMethod(
        "combsum", "sum of normalised scores", fuse_combsum, ("norm", "weights")),
    "combmnz": FusionMethod(
        "combmnz", "sum of normalised scores times the number of runs returning the document",
        fuse_combmnz, ("norm", "weights")),
    "interpolate": FusionMethod(
        "interpolate", "alpha * A + (1 - alpha) * B after normalisation (PARADE's ensemble)",
        fuse_interpolate, ("alpha", "norm"), min_runs=2, max_runs=2),
}


def _option_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_fusion_options(
    method: str, n_runs: int, *, k: int | None = 1000, depth: int | None = None, **options: object
) -> FusionMethod:
    """Validate a method name, run count and options before any work; returns the method.

    Raises :class:`RankkitError` for an unknown method, an option the method does not take,
    the wrong number of runs, or a value out of range.
    """
    if method not in FUSION_METHODS:
        raise RankkitError(f"unknown fusion method {method!r}; choose one of: {', '.join(FUSION_METHODS)}")
    spec = FUSION_METHODS[method]
    for name in options:
        if name not in spec.options:
            takes = ", ".join(_option_flag(o) for o in spec.options) or "no options"
            raise RankkitError(
                f"{_option_flag(name)} does not apply to method {method!r} (it takes: {takes})")
    if n_runs < spec.min_runs:
        raise RankkitError(f"method {method!r} needs at least {spec.min_runs} runs, got {n_runs}")
    if spec.max_runs is not None and n_runs > spec.max_runs:
        raise RankkitError(f"method {method!r} fuses exactly {spec.max_runs} runs, got {n_runs}")
    if k is not None and k < 1:
        raise RankkitError(f"--k must be at least 1, got {k}")
    if depth is not None and depth < 1:
        raise RankkitError(f"--depth must be at least 1, got {depth}")
    if "norm" in options:
        check_norm(str(options["norm"]))
    weights = options.get("weights")
    if weights is not None:
        values = [float(w) for w in weights]  # type: ignore[attr-defined]
        if len(values) != n_runs:
            raise RankkitError(f"--weights has {len(values)} values for {n_runs} runs")
        if any(not math.isfinite(w) or w < 0 for w in values):
            raise RankkitError(f"--weights must be finite and non-negative, got {values}")
    if "rrf_k" in options:
        rrf_k = float(options["rrf_k"])  # type: ignore[arg-type]
        if not math.isfinite(rrf_k) or rrf_k < 0:
            raise RankkitError(f"--rrf-k must be a non-negative number, got {rrf_k}")
    if "alpha" in options:
        alpha = float(options["alpha"])  # type: ignore[arg-type]
        if not 0.0 <= alpha <= 1.0:
            raise RankkitError(f"--alpha must be between 0 and 1, got {alpha}")
    return spec


def fuse(
    runs: Sequence[Mapping[str, Mapping[str, float]]],
    method: str,
    *,
    k: int | None = 1000,
    depth: int | None = None,
    on_query: Callable[[str], None] | None = None,
    **options: object,
) -> Run:
    """Fuse ``runs`` with ``method`` (a key of :data:`FUSION_METHODS`) into a new run.

    ``depth`` cuts each input to its top ``depth`` (trec_eval order) first; ``k`` keeps the fused
    top ``k`` per query (``None``: all). Output queries are the union of the inputs' queries in
    the order they are first seen (run by run); a query present in only some runs is fused from
    those. ``options`` are the method's own (``rrf_k``, ``weights``, ``norm``, ``alpha``).
    ``on_query`` is called after each fused query (for progress bars).
    """
    spec = check_fusion_options(method, len(runs), k=k, depth=depth, **options)
    qids: dict[str, None] = {}
    for run in runs:
        qids.update(dict.fromkeys(run))
    fused: Run = {}
    for qid in qids:
        fused[qid] = fuse_query(spec, [run.get(qid) for run in runs], k=k, depth=depth, **options)
        if on_query is not None:
            on_query(qid)
    return fused


def fuse_query(spec: FusionMethod, docs: Sequence[Mapping[str, float] | Sequence[tuple[str, float]] | None], *,
               k: int | None, depth: int | None, **options: object) -> dict[str, float]:
    """One query's fused top ``k`` from each run's documents (``None``: the run lacks the query)."""
    rankings = [sort_ranking(d)[:depth] if d else None for d in docs]
    ranking = sort_ranking(spec.fuse_query(rankings, k=k, **options))
    return dict(ranking if k is None else ranking[:k])


def fuse_files(paths: Sequence[PathLike], output: PathLike, method: str, *, k: int | None = 1000,
               depth: int | None = None, tag: str = "fuse", on_query: Callable[[str], None] | None = None,
               **options: object) -> tuple[int, int]:
    """Fuse run files into ``output`` query by query; returns ``(queries, lines)`` written.

    Memory holds one query of each run when the runs list their queries in the same order, or
    when every run is sorted by qid (the union is then written in qid order); otherwise (a run
    with its own order) the runs are read whole and fused as :func:`fuse` does, queries in the
    order first seen.
    """
    spec = check_fusion_options(method, len(paths), k=k, depth=depth, **options)
    counted = [0]

    def fused(aligned: Iterable[tuple[str, list[list[tuple[str, float]] | None]]]) -> Iterator[tuple[str, dict[str, float]]]:
        for qid, docs in aligned:
            counted[0] += 1
            yield qid, fuse_query(spec, docs, k=k, depth=depth, **options)
            if on_query is not None:
                on_query(qid)

    try:
        lines = write_run(output, fused(iter_aligned_queries(paths)), tag, k=k)
    except (NotAligned, ScatteredQueryError) as why:
        log(f"fuse: {why}: reading the runs whole")
        counted[0] = 0
        runs = [read_run(path, depth=depth) for path in paths]
        lines = write_run(output, fused(_union(runs)), tag, k=k)
    return counted[0], lines


class NotAligned(Exception):
    """Runs whose queries cannot be matched one at a time (neither the same order nor sorted by qid)."""


def _union(runs: Sequence[Run]) -> Iterator[tuple[str, list[list[tuple[str, float]] | None]]]:
    qids: dict[str, None] = {}
    for run in runs:
        qids.update(dict.fromkeys(run))
    for qid in qids:
        yield qid, [list(run[qid].items()) if qid in run else None for run in runs]


def iter_aligned_queries(paths: Sequence[PathLike]) -> Iterator[tuple[str, list[list[tuple[str, float]] | None]]]:
    """``(qid, [ranking of each run or None])``, reading every run one query at a time.

    Runs that list the same queries in the same order are read in step; runs sorted by qid
    (string order) are merged, a run lacking a query giving ``None``. Anything else raises
    :class:`NotAligned` (before a query could be matched wrongly).
    """
    streams = [iter_run_queries(path) for path in paths]
    heads: list[tuple[str, list[tuple[str, float]]] | None] = [next(s, None) for s in streams]
    ordered = [True] * len(streams)  # each run's qids strictly increasing so far
    merged = False  # a query was matched by qid order (some run lacked it)
    while any(h is not None for h in heads):
        present = [h[0] for h in heads if h is not None]  # a finished run cannot hold any later query
        if len(set(present)) == 1:
            qid = present[0]
        else:
            if not all(ordered):
                raise NotAligned("the runs list their queries in different orders and are not all sorted by qid")
            qid = min(present)
            merged = True
        out: list[list[tuple[str, float]] | None] = []
        for i, head in enumerate(heads):
            if head is not None and head[0] == qid:
                out.append(head[1])
                nxt = next(streams[i], None)
                if nxt is not None and nxt[0] <= qid:
                    ordered[i] = False
                    if merged:
                        raise NotAligned(f"{paths[i]} is not sorted by qid ({nxt[0]!r} after {qid!r})")
                heads[i] = nxt
            else:
                out.append(None)
        yield qid, out


__all__ = [
    "FUSION_METHODS", "NORMALIZATIONS", "FusionMethod", "NotAligned", "alternate_merge", "check_fusion_options", "fuse",
    "fuse_files", "fuse_query", "iter_aligned_queries",
    "fuse_alternate",
    "fuse_combmnz", "fuse_combsum", "fuse_interpolate", "fuse_rrf", "missing_score", "normalize_scores",
]
