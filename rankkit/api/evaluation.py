"""The Python API's evaluation: :func:`evaluate`, :func:`experiment` (``rankkit eval``'s table as a DataFrame)
and :func:`write_run`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from rankkit.api.inputs import (
    Measures, PathLike, QrelsLike, RunLike, check_count, is_path, kind_error, measure_list, pandas_module, qrels_of,
    run_of,
)
from rankkit.errors import RankkitError
from rankkit.formats import write_run as write_run_file
from rankkit.formats.frames import is_frame
from rankkit.formats.runs import Run


def evaluate(run: RunLike, qrels: QrelsLike, measures: Measures = None, *, per_query: bool = False,
             complete: bool = False, max_docs: int | None = None, rel_level: int | None = None) -> Any:
    """trec_eval-compatible scores of one run: ``{measure: mean}``, or each query's with ``per_query``.

    ``measures`` in ir_measures (``nDCG@10``, ``RR@10``) or trec_eval syntax (``ndcg_cut.10``,
    ``official``); default nDCG@10, RR@10, AP, R@1000. Means are over the queries in both the run
    and the qrels (trec_eval), or over every qrels query with ``complete`` (``-c``); ``max_docs`` is
    ``-M``, ``rel_level`` ``-l``. ``per_query`` gives ``{qid: {measure: value}}``, or a DataFrame
    ``qid, measure, value`` when the run or qrels was a DataFrame. For several runs, significance
    tests and a table, see :func:`experiment`.
    """
    from rankkit.evaluation.evaluate import evaluate as evaluate_runs
    from rankkit.evaluation.evaluate import warn_left_out

    scores_in, run_frame_given = run_of(run)
    judged, qrels_frame_given = qrels_of(qrels)
    result = evaluate_runs({"run": scores_in}, judged, measure_list(measures), complete=complete, max_docs=max_docs,
                           rel_level=rel_level)
    warn_left_out(result)  # as rankkit eval: queries the averages leave out are said, on stderr
    scores = result.runs["run"]
    if not per_query:
        return {label: float(scores.aggregates[label]) for label in result.labels}
    values = scores.per_query(result.labels)
    if not (run_frame_given or qrels_frame_given):
        return values
    pandas = pandas_module("evaluate(per_query=True) of DataFrames")
    rows = [(qid, label, value) for qid, row in values.items() for label, value in row.items()]
    return pandas.DataFrame(rows, columns=["qid", "measure", "value"])


def _named_runs(runs: object, names: Sequence[str] | None) -> dict[str, Run]:
    """``{name: run}`` of the runs given to :func:`experiment`, named as ``rankkit eval`` names files."""
    if isinstance(runs, Mapping) and runs and all(is_path(r) or is_frame(r) or isinstance(r, Mapping) and (
            not r or all(isinstance(d, Mapping) for d in r.values())) for r in runs.values()):
        items: list[tuple[str | None, object]] = [(str(name), run) for name, run in runs.items()]
        if names is not None:
            raise RankkitError("experiment: runs given as {name: run} are named already; leave out names=")
    elif is_path(runs) or is_frame(runs) or isinstance(runs, Mapping):
        items = [(None, runs)]  # one run
    elif isinstance(runs, Sequence):
        items = [(None, run) for run in runs]
    else:
        raise kind_error("experiment: runs", "a list of runs, or {name: run}", runs)
    if not items:
        raise RankkitError("experiment: no run to evaluate")
    if names is not None:
        if isinstance(names, str) or not isinstance(names, Sequence) or len(names) != len(items):
            raise RankkitError(f"experiment: names= must give one name per run ({len(items)})")
        items = [(str(name), run) for name, (_, run) in zip(names, items)]
    named: dict[str, Run] = {}
    for i, (name, run) in enumerate(items):
        label = name if name is not None else str(run) if is_path(run) else f"run{i + 1}"
        if label in named:
            raise RankkitError(f"experiment: two runs are named {label!r}; give names=")
        named[label] = run_of(run, f"run {label!r}")[0]
    return named


def experiment(runs: Sequence[RunLike] | Mapping[str, RunLike], qrels: QrelsLike, measures: Measures = None, *,
               names: Sequence[str] | None = None, baseline: int | str | None = None, test: str = "randomization",
               correction: str = "holm", alpha: float = 0.05, permutations: int = 10000, seed: int = 0,
               per_query: bool = False, complete: bool = False, max_docs: int | None = None,
               rel_level: int | None = None, as_frame: bool = True) -> Any:
    """``rankkit eval``'s table of several runs as a DataFrame: one row per run (the baseline first), a
    column per measure, and with a ``baseline`` (an index into ``runs`` or a name) the paired tests.

    ``runs`` is a list (names: ``names=``, else a file's path, else ``run1``, ``run2``, ...) or
    ``{name: run}``, each run in any form (path, dict, DataFrame). With a baseline every other run
    gets, per measure ``M``, the columns ``M delta``, ``M p_t``, ``M p_t_adjusted``,
    ``M p_randomization``, ``M p_randomization_adjusted`` and ``M significant`` (marked by ``test``:
    ``randomization``, ``t`` or ``both``; ``correction``: ``holm``, ``bonferroni`` or ``none`` over all
    runs x measures), exactly the numbers of ``rankkit eval --format json`` (the same code computes
    them). ``per_query`` returns the per-query frame instead (``name, qid, measure, value``), as
    PyTerrier's ``perquery``; ``as_frame=False`` returns the JSON structure itself (no pandas needed).
    """
    from rankkit.evaluation.evaluate import evaluate as evaluate_runs
    from rankkit.evaluation.evaluate import warn_left_out
    from rankkit.evaluation.measures import parse_measures
    from rankkit.evaluation.report import to_json

    check_count(permutations, "permutations")
    check_count(seed, "seed", minimum=0)
    if as_frame:
        pandas_module("rankkit.experiment (as_frame=False returns plain dicts)")
    specs = parse_measures(measure_list(measures), rel_level=rel_level)
    named = _named_runs(_with_baseline_file(runs, baseline, names), names)
    judged, _ = qrels_of(qrels)
    result = evaluate_runs(named, judged, specs, complete=complete, max_docs=max_docs, rel_level=rel_level)
    warn_left_out(result)  # as rankkit eval: queries the averages leave out are said, on stderr
    significance = None
    if baseline is not None:
        from rankkit.evaluation.significance import compare

        significance = compare(result, _baseline_name(baseline, list(named)), test=test, permutations=permutations,
                               seed=seed, correction=correction, alpha=alpha)
    data = to_json(result, per_query=per_query, significance=significance)
    if not as_frame:
        return data
    pandas = pandas_module("rankkit.experiment")
    if per_query:
        rows = [(name, qid, label, value) for name, entry in data.items()
                for qid, values in entry["per_query"].items() for label, value in values.items()]
        return pandas.DataFrame(rows, columns=["name", "qid", "measure", "value"])
    table: dict[str, list[Any]] = {"name": list(data)}
    for label in result.labels:
        table[label] = [entry[label] for entry in data.values()]
    if significance is not None:
        for label in result.labels:
            tests = [entry.get("significance", {}).get(label) for entry in data.values()]
            if not any(tests):
                continue  # a counter (num_ret, ...): not tested
            for field in ("delta", "p_t", "p_t_adjusted", "p_randomization", "p_randomization_adjusted"):
                table[f"{label} {field}"] = [None if t is None else t[field] for t in tests]
            table[f"{label} significant"] = [None if t is None else t["significant"] for t in tests]
    frame = pandas.DataFrame(table)
    for column in frame.columns:
        if column.endswith(" significant"):
            frame[column] = frame[column].astype("boolean")  # True/False, <NA> for the baseline
        elif column != "name" and frame[column].dtype == object:
            frame[column] = frame[column].astype(float)  # a measure without any value (all None)
    return frame


def _with_baseline_file(runs: object, baseline: object, names: Sequence[str] | None) -> object:
    """As ``rankkit eval -b FILE``: a baseline file that is not among the (unnamed) runs is added to them, first."""
    if names is not None or isinstance(runs, Mapping) or not isinstance(baseline, (str, os.PathLike)) \
            or not Path(baseline).is_file():
        return runs
    listed = [runs] if is_path(runs) or is_frame(runs) else list(runs) if isinstance(runs, Sequence) else None
    if listed is None or str(baseline) in [str(r) for r in listed if is_path(r)]:
        return runs
    return [baseline, *listed]


def _baseline_name(baseline: int | str, names: list[str]) -> str:
    if isinstance(baseline, bool) or not isinstance(baseline, (int, str, os.PathLike)):
        raise kind_error("experiment: baseline", "a run's index or name", baseline)
    if isinstance(baseline, int):
        if not -len(names) <= baseline < len(names):
            raise RankkitError(f"experiment: baseline={baseline} is not the index of one of the {len(names)} runs")
        return names[baseline]
    if str(baseline) not in names:
        raise RankkitError(f"experiment: baseline {str(baseline)!r} is not among the runs ({', '.join(names)})")
    return str(baseline)


def write_run(path: PathLike, run: RunLike, tag: str = "rankkit", *, k: int | None = None) -> int:
    """Write a run (dict or DataFrame) as a TREC run file, sorted the trec_eval way; returns the lines written."""
    scores_in, _ = run_of(run)
    if not isinstance(tag, str) or not tag or any(ch.isspace() for ch in tag):
        raise RankkitError(f"run tag must be one non-empty word, got {tag!r}")
    check_count(k, "k", optional=True)
    return write_run_file(path, scores_in, tag, k=k)
