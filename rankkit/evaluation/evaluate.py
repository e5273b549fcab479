"""Evaluate runs against qrels with ir_measures, averaging the trec_eval way.

:func:`evaluate` is the library entry point (runs and qrels, in that order, as in all of rankkit's
Python API); :func:`evaluate_files` reads the files, warns about queries it leaves out, and is what
``rankkit eval`` calls.

Averaging follows trec_eval: by default each run is averaged over the queries it shares with the
qrels (queries only in the run are ignored, qrels queries without results are skipped);
``complete=True`` is ``trec_eval -c``: every qrels query counts, those without results as an
empty ranking (zero for every measure except counters like num_rel). ``max_docs`` is
``trec_eval -M`` and ``rel_level`` is ``trec_eval -l``.

Runs are evaluated a chunk of queries at a time (every measure is per query): a run given as a
file path is read query by query (:func:`rankkit.formats.iter_run_queries`), so a 7M-line dev run
or a 50M-line training run is evaluated in flat memory; a run whose queries are split over several
blocks is read whole instead, as before.
"""

from __future__ import annotations

import heapq
import math
import os
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import ir_measures
import numpy as np

from rankkit.errors import RankkitError
from rankkit.evaluation.measures import MIN_GEO_MEAN, MeasureSpec, parse_measures
from rankkit.files import PathLike
from rankkit.formats.qrels import Qrels
from rankkit.formats.sources import load_qrels
from rankkit.formats.runs import Run, ScatteredQueryError, iter_run_queries, read_run, sort_ranking

#: A run to evaluate: in memory, a file (read query by query), or ``(qid, docs)`` pairs.
RunSource = Mapping[str, Mapping[str, float]] | str | os.PathLike[str] | Iterable[tuple[str, Mapping[str, float]]]
#: Documents evaluated per call of an evaluator (the memory a streamed run needs).
CHUNK_DOCS = 200_000


def qid_sort_key(qid: str) -> tuple[int, int, str]:
    """Numeric ids in numeric order, then the rest alphabetically (a stable, readable order)."""
    return (0, int(qid), qid) if qid.isdigit() else (1, 0, qid)


@dataclass
class RunEval:
    """One run's scores: per-query values (measures x queries) and their averages."""

    name: str
    qids: list[str]
    values: np.ndarray  # shape (len(measures), len(qids)), rows in EvalResult.measures order
    aggregates: dict[str, float]
    left_out: list[str] = field(default_factory=list)  # run queries that are not in the qrels
    run_queries: int = 0  # queries in the run file, judged or not
    no_results: list[str] = field(default_factory=list)  # qrels queries the run has no results for
    depth: int = 0  # the longest ranking of the run

    def per_query(self, labels: Sequence[str]) -> dict[str, dict[str, float]]:
        """``{qid: {label: value}}`` in query order."""
        return {
            qid: {label: float(self.values[row, col]) for row, label in enumerate(labels)}
            for col, qid in enumerate(self.qids)
        }


@dataclass
class EvalResult:
    """Scores of several runs on the same measures and qrels, with how they were averaged."""

    measures: list[MeasureSpec]
    runs: dict[str, RunEval]
    num_qrels_queries: int
    complete: bool = False
    max_docs: int | None = None
    rel_level: int | None = None

    @property
    def labels(self) -> list[str]:
        """Measure labels as the user wrote them, in report order."""
        return [spec.label for spec in self.measures]

    def spec(self, label: str) -> MeasureSpec:
        """The measure with this label."""
        for spec in self.measures:
            if spec.label == label:
                return spec
        raise KeyError(label)

    def row(self, label: str) -> int:
        """Row of ``label`` in every run's ``values``."""
        return self.labels.index(label)

    def caption(self) -> list[str]:
        """Lines saying how the averages were taken (printed under every table)."""
        counts = sorted({len(r.qids) for r in self.runs.values()})
        if self.complete:
            lines = [
                f"Averages over all {self.num_qrels_queries} qrels queries; queries without results count "
                "as an empty ranking (-c, as trec_eval -c)."
            ]
        else:
            n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
            lines = [
                f"Averages over the {n} queries in both the qrels ({self.num_qrels_queries} queries) and "
                "each run (trec_eval default; -c counts qrels queries without results as zero)."
            ]
        options = []
        if self.max_docs is not None:
            options.append(f"top {self.max_docs} documents per query (-M {self.max_docs})")
        if self.rel_level is not None:
            level = self.rel_level
            options.append(f"relevant means label >= {level} for binary measures (-l {level})")
        if options:
            lines.append("Evaluated on " + "; ".join(options) + ".")
        return lines


def _trec_key(item: tuple[str, float]) -> tuple[float, str]:
    return item[1], item[0]


def _prepare(
    run: Run, qids: Sequence[str], depth: int | None, trec_order: bool
) -> dict[str, dict[str, float]]:
    """The run restricted to ``qids``, cut to its top ``depth`` and, if asked, with ties resolved.

    ``trec_order`` replaces scores by strictly decreasing ones that keep trec_eval's order (score
    descending, docid descending): pytrec_eval orders rankings that way itself, but the other
    providers (msmarco for RR@k, judged, gdeval for ERR) break ties by docid ascending. Queries
    without tied scores are passed through untouched (every order agrees on them).
    """
    out: dict[str, dict[str, float]] = {}
    for qid in qids:
        docs = run.get(qid, {})
        cut = depth is not None and depth < len(docs)
        if not cut and (not trec_order or len(set(docs.values())) == len(docs)):
            out[qid] = docs
            continue
        # The same order as rankkit.formats.sort_ranking; a heap is cheaper when keeping few documents.
        ranking = heapq.nlargest(depth, docs.items(), key=_trec_key) if cut and depth is not None else sort_ranking(docs)
        if trec_order:
            n = len(ranking)
            out[qid] = {docid: float(n - i) for i, (docid, _) in enumerate(ranking)}
        else:
            out[qid] = dict(ranking)
    return out


@dataclass
class _Group:
    """Measures computed by one ir_measures evaluator, and their rows in the value matrix."""

    evaluator: ir_measures.providers.Evaluator
    rows: dict[object, list[int]]
    pytrec: bool
    depth: int | None = None  # every measure looks at most this deep (its largest cutoff)


def _deepest_cutoff(measures: Sequence[ir_measures.Measure]) -> int | None:
    """The largest ``@k`` of the measures when all have one (only the top k matter then), else None."""
    cutoffs = [m.params.get("cutoff") for m in measures]
    if all(isinstance(k, int) for k in cutoffs):
        return max(cutoffs)  # type: ignore[type-var]
    return None


def _evaluators(specs: Sequence[MeasureSpec], qrels: Qrels) -> list[_Group]:
    """One evaluator for the pytrec_eval measures and one (ir_measures' fallback) for the others."""
    split: dict[bool, dict[object, list[int]]] = {True: {}, False: {}}
    for row, spec in enumerate(specs):
        pytrec = ir_measures.pytrec_eval.supports(spec.measure)
        split[pytrec].setdefault(spec.measure, []).append(row)
    groups = []
    for pytrec, rows in split.items():
        if not rows:
            continue
        provider = ir_measures.pytrec_eval if pytrec else ir_measures.DefaultPipeline
        try:
            evaluator = provider.evaluator(list(rows), qrels)  # type: ignore[arg-type]  # Measure keys
        except ValueError as err:  # no provider can compute a measure (also checked when parsing)
            raise RankkitError(" ".join(str(err).split())) from None
        groups.append(_Group(evaluator, rows, pytrec, None if pytrec else _deepest_cutoff(list(rows))))  # type: ignore[arg-type]
    return groups


def aggregate(values: np.ndarray, how: str) -> float:
    """Average one measure's per-query values: arithmetic mean, sum (counters) or geometric mean.

    The geometric mean floors each value at 1e-5 before taking logs, as trec_eval's gm_map.
    """
    if values.size == 0:
        return math.nan
    if how == "sum":
        return float(values.sum())
    if how == "gmean":
        return float(np.exp(np.log(np.maximum(values, MIN_GEO_MEAN)).mean()))
    return float(values.mean())


def _depth(value: object) -> int:
    """How deeply the first entries of ``value`` nest mappings: qrels and one run are 2, ``{name: run}`` is 3."""
    depth = 0
    while isinstance(value, Mapping):
        depth += 1
        if not value:
            break
        value = next(iter(value.values()))
    return depth


def check_argument_order(runs: object, qrels: object) -> None:
    """Refuse the swapped order ``evaluate(qrels, runs)`` and a single run given as ``runs``.

    Only the first entries are looked at: ``runs`` is ``{name: run}`` with runs in memory (``{qid: {docid:
    score}}``, three levels in all), run files or streams (one level); qrels ``{qid: {docid: label}}`` (two).
    """
    if not isinstance(runs, Mapping) or not isinstance(qrels, Mapping):
        raise RankkitError("evaluate(runs, qrels, ...) takes runs as {name: {qid: {docid: score}}} and qrels as "
                           f"{{qid: {{docid: label}}}}, got {type(runs).__name__} and {type(qrels).__name__}")
    if _depth(qrels) == 3 and _depth(runs) <= 2:
        raise RankkitError("evaluate(runs, qrels, ...): the runs come first, then the qrels (the arguments look swapped)")
    if runs and _depth(runs) == 2:
        raise RankkitError("evaluate(runs, qrels, ...): runs is {name: {qid: {docid: score}}}; wrap a single run "
                           "as {'run': run}")


def evaluate(
    runs: Mapping[str, RunSource],
    qrels: Qrels,
    measures: Sequence[object] | None = None,
    *,
    complete: bool = False,
    max_docs: int | None = None,
    rel_level: int | None = None,
) -> EvalResult:
    """Score every run of ``runs`` against ``qrels`` on ``measures`` (default
    :data:`~rankkit.evaluation.measures.DEFAULT_MEASURES`).

    The order is runs, then qrels, as everywhere in rankkit's Python API (and ir_measures' ``calc(qrels,
    run)`` reversed, on purpose: the run is what is being evaluated). ``runs`` maps names to runs in
    memory, run files (read query by query) or ``(qid, docs)`` streams. ``measures`` are strings in
    ir_measures or trec_eval syntax, ir_measures measure objects (``ir_measures.nDCG@10``), or parsed
    :class:`MeasureSpec`. ``complete`` is ``trec_eval -c``,
    ``max_docs`` is ``-M``, ``rel_level`` is ``-l`` (applied to string measures; parsed specs already
    carry their ``rel``).
    """
    check_argument_order(runs, qrels)
    if not qrels:
        raise RankkitError("the qrels are empty")
    if max_docs is not None and max_docs < 1:
        raise RankkitError(f"--max-docs must be at least 1, got {max_docs}")
    specs: list[MeasureSpec] = []
    for m in list(measures) if measures else [None]:  # None: the default measures
        if isinstance(m, MeasureSpec):
            parsed = [m]
        else:
            parsed = parse_measures(None if m is None else [m], rel_level=rel_level)
        specs += [spec for spec in parsed if spec.label not in {s.label for s in specs}]

    qrels_qids = sorted(qrels, key=qid_sort_key)
    groups = _evaluators(specs, qrels)
    out: dict[str, RunEval] = {}
    for name, run in runs.items():
        if isinstance(run, (str, os.PathLike)):
            try:
                out[name] = _evaluate_run(name, iter_run_queries(run), qrels, qrels_qids, specs, groups, complete,
                                          max_docs)
                continue
            except ScatteredQueryError:  # a query split over blocks: read the run whole
                run = read_run(run)
        queries = run.items() if isinstance(run, Mapping) else run
        out[name] = _evaluate_run(name, queries, qrels, qrels_qids, specs, groups, complete, max_docs)
    return EvalResult(specs, out, len(qrels), complete, max_docs, rel_level)


def _evaluate_run(name: str, queries: Iterable[tuple[str, Mapping[str, float] | Sequence[tuple[str, float]]]],
                  qrels: Qrels, qrels_qids: Sequence[str], specs: Sequence[MeasureSpec], groups: Sequence[_Group],
                  complete: bool, max_docs: int | None) -> RunEval:
    """One run's per-query values and averages, evaluating about :data:`CHUNK_DOCS` documents at a time."""
    left_out: list[str] = []
    has_results: dict[str, bool] = {}  # judged queries of the run: whether their ranking holds a document
    values_of: dict[str, np.ndarray] = {}
    run_queries = depth = 0

    def score(chunk: dict[str, dict[str, float]], pytrec_only: bool = False) -> None:
        # Evaluators over the chunk's judgments only: ir_measures reports every qrels query of an
        # evaluator at each call (zeros for the absent), which over all the qrels would make a
        # chunked run quadratic.
        judged = {qid: qrels[qid] for qid in chunk}
        for group in _evaluators(specs, judged) if len(chunk) < len(qrels) else groups:
            if pytrec_only and not group.pytrec:
                continue
            cut = min((d for d in (max_docs, group.depth) if d is not None), default=None)
            prepared = _prepare(chunk, list(chunk), cut, trec_order=not group.pytrec)
            for metric in group.evaluator.iter_calc(prepared):
                if metric.query_id not in chunk:
                    continue  # pytrec_eval also reports the qrels queries absent from this chunk (as zeros)
                row_values = values_of.get(metric.query_id)
                if row_values is None:
                    row_values = values_of[metric.query_id] = np.full(len(specs), np.nan)
                for row in group.rows[metric.measure]:
                    row_values[row] = metric.value

    chunk: dict[str, dict[str, float]] = {}
    size = 0
    for qid, docs in queries:
        run_queries += 1
        docs = dict(docs)
        depth = max(depth, len(docs))
        if qid not in qrels:
            left_out.append(qid)
            continue
        has_results[qid] = bool(docs)
        chunk[qid] = docs
        size += len(docs) + 1
        if size >= CHUNK_DOCS:
            score(chunk)
            chunk, size = {}, 0
    if len(left_out) == run_queries:
        raise RankkitError(f"{name}: none of its {run_queries} queries is in the qrels (wrong qrels file?)")
    score(chunk)
    no_results = [qid for qid in qrels_qids if qid not in has_results]
    if complete:
        # pytrec_eval scores an empty ranking like trec_eval -c does (num_rel, num_q still count);
        # other providers get only queries with results and report their default for the rest.
        for start in range(0, len(no_results), 10_000):
            score({qid: {} for qid in no_results[start:start + 10_000]}, pytrec_only=True)
    qids = list(qrels_qids) if complete else [qid for qid in qrels_qids if qid in has_results]
    values = np.full((len(specs), len(qids)), np.nan)
    for col, qid in enumerate(qids):
        if qid in values_of:
            values[:, col] = values_of[qid]
    empty = [col for col, qid in enumerate(qids) if not has_results.get(qid)]
    if empty:
        # pytrec_eval's interpolated precision at recall 0 of an empty ranking is 0/0; trec_eval -c
        # counts it as zero like every other measure of a query without results.
        values[:, empty] = np.nan_to_num(values[:, empty], nan=0.0)
    # ir_measures reports every qrels query; a hole would be a provider bug, not user input.
    assert not np.isnan(values).any(), "ir_measures returned no value for some query"
    aggregates = {spec.label: aggregate(values[row], spec.aggregate) for row, spec in enumerate(specs)}
    return RunEval(name, qids, values, aggregates, left_out=left_out, no_results=no_results, run_queries=run_queries,
                   depth=depth)


def run_names(run_paths: Sequence[PathLike]) -> list[str]:
    """The runs' names (their paths as given), checked: at least one, none twice."""
    names = [str(p) for p in run_paths]
    if not names:
        raise RankkitError("no run to evaluate")
    for name in names:
        if names.count(name) > 1:
            raise RankkitError(f"run {name} is given twice")
    return names


def read_inputs(run_paths: Sequence[PathLike], qrels_path: PathLike) -> tuple[dict[str, Run], Qrels]:
    """Read every run whole and the qrels (strict readers); runs are keyed by their path as given.

    :func:`evaluate_files` reads the runs query by query instead; this is for callers that want them.
    """
    from rankkit.console import progress_bar

    names = run_names(run_paths)
    qrels = load_qrels(qrels_path)  # a file, a BEIR folder or irds:ID
    runs: dict[str, Run] = {}
    with progress_bar("run", transient=True) as bar:
        task = bar.add_task("reading runs", total=len(names))
        for name in names:
            runs[name] = read_run(name)
            bar.advance(task)
    return runs, qrels


def warn_left_out(result: EvalResult) -> None:
    """Warn (stderr) about run queries missing from the qrels and qrels queries without results."""
    from rankkit.console import warn

    for name, run_eval in result.runs.items():
        if run_eval.left_out:
            warn(
                f"{name}: {len(run_eval.left_out)} of {run_eval.run_queries} queries are not in the qrels "
                f"and were left out (e.g. {run_eval.left_out[0]!r})"
            )
        if run_eval.no_results and not result.complete:
            warn(
                f"{name}: {len(run_eval.no_results)} qrels queries have no results and are not averaged "
                "over (-c counts them as zero)"
            )


def evaluate_files(
    run_paths: Sequence[PathLike],
    qrels_path: PathLike,
    measures: Sequence[str] | None = None,
    *,
    complete: bool = False,
    max_docs: int | None = None,
    rel_level: int | None = None,
) -> EvalResult:
    """Read runs and qrels, evaluate, and warn about queries left out (what ``rankkit eval`` does).

    Measures are parsed before any file is read, so a typo in ``-m`` fails fast.
    """
    specs = parse_measures(measures, rel_level=rel_level)
    names = run_names(run_paths)
    qrels = load_qrels(qrels_path)  # a file, a BEIR folder or irds:ID
    result = evaluate({name: name for name in names}, qrels, specs, complete=complete, max_docs=max_docs,
                      rel_level=rel_level)
    warn_left_out(result)
    return result


#: Cutoffs for recall curves, kept up to the deepest ranking evaluated.
RECALL_CURVE_CUTOFFS: tuple[int, ...] = (
    1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 300, 500, 1000, 2000, 5000, 10000,
)


def curve_cutoffs(runs: Mapping[str, Run] | int, max_docs: int | None = None) -> list[int]:
    """The recall-curve cutoffs up to the longest ranking of ``runs`` (or that length; or ``max_docs``)."""
    depth = runs if isinstance(runs, int) else max((len(docs) for run in runs.values() for docs in run.values()),
                                                    default=1)
    depth = max(depth, 1)
    if max_docs is not None:
        depth = min(depth, max_docs)
    cutoffs = [k for k in RECALL_CURVE_CUTOFFS if k < depth]
    return cutoffs + [depth]


def recall_curves(
    runs: Mapping[str, RunSource],
    qrels: Qrels,
    cutoffs: Sequence[int],
    *,
    complete: bool = False,
    max_docs: int | None = None,
    rel_level: int | None = None,
) -> dict[str, list[tuple[int, float]]]:
    """Mean recall at each cutoff for every run: ``{run: [(k, R@k), ...]}`` (for recall plots)."""
    rel = {} if rel_level is None else {"rel": rel_level}
    specs = [MeasureSpec(f"R@{k}", ir_measures.R(cutoff=k, **rel)) for k in cutoffs]
    result = evaluate(runs, qrels, specs, complete=complete, max_docs=max_docs)
    return {
        name: [(k, run_eval.aggregates[f"R@{k}"]) for k in cutoffs] for name, run_eval in result.runs.items()
    }
