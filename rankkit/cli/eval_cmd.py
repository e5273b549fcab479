"""``rankkit eval``: trec_eval-compatible evaluation of runs, side by side, with significance tests.

Thin: options are checked here and everything else is :mod:`rankkit.evaluation`. The evaluation
modules are imported inside the command so other subcommands do not pay for ir_measures/numpy,
and scipy/matplotlib are imported only when a baseline or a plot is asked for.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from rankkit.cli.app import MAX_COUNT, app, float_range, int_range
from rankkit.errors import RankkitError

FORMATS = ("table", "tsv", "json", "markdown", "latex")
TESTS = ("t", "randomization", "both")
CORRECTIONS = ("holm", "bonferroni", "none")


def _choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise RankkitError(f"{option} must be one of {', '.join(choices)}, got {value!r}")
    return value


def default_format(output: Optional[str]) -> str:
    """The box table for a person at a terminal; plain TSV (one value a line, for cut, awk and pandas) when the
    report goes to a file or a pipe."""
    to_terminal = output is None or output == "-"
    return "table" if to_terminal and sys.stdout.isatty() else "tsv"


@app.command("eval")
def eval_command(
    runs: list[str] = typer.Argument(..., metavar="RUN", help="Run files (TREC format, .gz ok); - reads one from "
                                                                "standard input."),
    qrels: str = typer.Option(..., "--qrels", help="Qrels file (qid iter docid rel); - reads standard input."),
    measures: Optional[list[str]] = typer.Option(
        None, "--measure", "-m",
        help="Measure, repeatable: ir_measures syntax (nDCG@10, RR(rel=2)@10, AP, R@1000, P@20, ERR@20, "
        "Judged@10) or trec_eval names (ndcg_cut.10, recip_rank, map, P.20, recall.100, ndcg_cut.10,100), "
        "or trec_eval's groups official / all_trec. "
        "Default: nDCG@10, RR@10, AP, R@1000.",
    ),
    per_query: bool = typer.Option(
        False, "--per-query", "-q", help="Also report every query (trec_eval -q)."),
    fmt: Optional[str] = typer.Option(
        None, "--format", "-f", help=f"Output format: {', '.join(FORMATS)} [default: table on a terminal, tsv when "
                                     "the output is a file or a pipe]."),
    output: Optional[str] = typer.Option(
        None, "--output", "-o", help="Write the report here instead of stdout."),
    baseline: Optional[str] = typer.Option(
        None, "--baseline", "-b",
        help="Test every other run against this run (added to the runs if missing)."),
    test: str = typer.Option(
        "randomization", "--test",
        help="Test that marks significance: t (paired t-test), randomization (paired Fisher randomization, "
        "default: no normality assumption), or both (both must agree). Both p-values are always in json/tsv.",
    ),
    permutations: int = typer.Option(
        10000, "--permutations", help="Randomization test: random sign flips.", callback=int_range(1)),
    seed: int = typer.Option(
        0, "--seed", help="Randomization test: random seed (>= 0).", callback=int_range(0)),
    correction: str = typer.Option(
        "holm", "--correction",
        help="Multiple-comparison correction over all runs x measures: holm, bonferroni, none."),
    alpha: float = typer.Option(
        0.05, "--alpha", help="Significance level, in (0, 1).", callback=float_range(0, 1, min_open=True, max_open=True)),
    plot: Optional[str] = typer.Option(
        None, "--plot",
        help="PNG: per-query difference to the baseline (or the first run) on the first measure, one "
        "panel per run, plus recall@k curves when a recall measure is asked for.",
    ),
    complete: bool = typer.Option(
        False, "--complete", "-c",
        help="Average over all qrels queries, missing ones as zero (trec_eval -c)."),
    max_docs: Optional[int] = typer.Option(
        None, "--max-docs", "-M", help="Evaluate only the top N documents of each ranking (trec_eval -M).",
        callback=int_range(1)),
    rel_level: Optional[int] = typer.Option(
        None, "--rel-level", "-l", help="Minimum label counted relevant by binary measures (trec_eval -l).",
        callback=int_range(-MAX_COUNT, MAX_COUNT)),
) -> None:
    """Evaluate RUN [RUN ...] against --qrels, side by side (averages as trec_eval: over the queries in
    both the qrels and the run, unless -c)."""
    fmt = _choice("--format", fmt, FORMATS) if fmt is not None else default_format(output)
    _choice("--test", test, TESTS)
    _choice("--correction", correction, CORRECTIONS)

    from rankkit.cli.inputs import STDIN, STDIN_PATH, from_stdin, one_stdin
    from rankkit.console import log, warn
    from rankkit.formats import read_run
    from rankkit.evaluation.evaluate import curve_cutoffs, evaluate, recall_curves, run_names, warn_left_out
    from rankkit.formats.sources import load_qrels
    from rankkit.evaluation.measures import expand_groups, parse_measures
    from rankkit.evaluation.report import render
    from rankkit.formats import atomic_write
    from rankkit.files import check_outputs

    # Measures and plot preconditions are checked before any (possibly large) file is read.
    specs = parse_measures(measures, rel_level=rel_level)
    _, left_out = expand_groups(measures or [])
    if left_out:
        warn(f"-m official/all_trec: {len(left_out)} trec_eval measures have no ir_measures counterpart and are left out: "
             f"{', '.join(left_out)} (docs/EVALUATION.md)")
    caveats = [spec.caveat for spec in specs if spec.caveat]
    if caveats:
        warn(caveats[0] + (f" (and {len(caveats) - 1} more such measures)" if len(caveats) > 1 else ""))
    paths = list(runs)
    if baseline is not None and baseline not in paths:
        paths.insert(0, baseline)
    one_stdin([*paths, qrels], "rankkit eval")
    wants_recall = any(spec.is_recall for spec in specs)
    if plot is not None and len(paths) < 2 and not wants_recall:
        raise RankkitError("--plot needs a baseline and another run, or a recall measure (e.g. R@1000)")
    # Before reading anything: the table and the plot must be writable, distinct, and never an input.
    check_outputs([("--output", output), ("--plot", plot)],
                  [("--qrels", qrels), *(("RUN", path) for path in paths)])

    # Each run is read query by query (rankkit.evaluation.evaluate): memory does not grow with its length.
    names = run_names(paths)
    qrels_data = load_qrels(from_stdin(qrels))
    # Standard input is read once, whole: the recall curves of --plot read each run a second time.
    sources = {name: read_run(STDIN_PATH) if name == STDIN else name for name in names}
    result = evaluate(sources, qrels_data, specs, complete=complete, max_docs=max_docs, rel_level=rel_level)
    warn_left_out(result)
    significance = None
    if baseline is not None:
        from rankkit.evaluation.significance import compare

        significance = compare(
            result, baseline, test=test, permutations=permutations, seed=seed, correction=correction,
            alpha=alpha)

    text = render(result, fmt, per_query=per_query, significance=significance)
    if output is not None:
        with atomic_write(output) as handle:
            handle.write(text)
        log(f"eval: {len(paths)} runs x {len(specs)} measures -> {output}")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()

    if plot is not None:
        from rankkit.evaluation.plot import plot_evaluation

        curves = None
        if wants_recall:
            longest = max(run_eval.depth for run_eval in result.runs.values())
            curves = recall_curves(
                sources, qrels_data, curve_cutoffs(longest, max_docs),
                complete=complete, max_docs=max_docs, rel_level=rel_level)
        plot_evaluation(result, plot, baseline=baseline or paths[0], recall=curves)
        log(f"eval: plot -> {plot}")
