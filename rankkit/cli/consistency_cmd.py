"""``rankkit consistency``: RepBERT's consistency factor C_{f,n} (Eq. 5) of a run against a reference run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.console import Console
from rich.table import Table

from rankkit.cli.app import app, int_range
from rankkit.console import progress_bar
from rankkit.errors import RankkitError
from rankkit.formats.runs import read_run

if TYPE_CHECKING:  # the evaluation package loads numpy: keep it off every other command's start-up
    from rankkit.evaluation.consistency import ConsistencyReport

FORMATS = ("table", "json", "tsv")
DEFAULT_DEPTHS = [10, 100, 1000]


def _preview(qids: list[str], limit: int = 5) -> str:
    return ", ".join(qids[:limit]) + (", ..." if len(qids) > limit else "")


def render(report: ConsistencyReport, run: Path, reference: Path, fmt: str) -> str | Table:
    """The report as JSON text, TSV text, or a rich table."""
    if fmt == "json":
        return json.dumps({
            "run": str(run), "reference": str(reference), "ref_depth": report.ref_depth,
            "common_only": report.common_only,
            "run_only_queries": report.run_only, "reference_only_queries": report.reference_only,
            "results": [
                {"depth": r.depth, "consistency": r.value, "queries": r.queries} for r in report.results
            ],
        }, indent=2)
    if fmt == "tsv":
        rows = ["depth\tconsistency\tqueries"]
        rows += [f"{r.depth}\t{r.value:.6f}\t{r.queries}" for r in report.results]
        return "\n".join(rows)
    table = Table(title=f"C_f,n of {run} vs top-{report.ref_depth} of {reference} (RepBERT Eq. 5)")
    table.add_column("depth n", justify="right")
    table.add_column("C_f,n", justify="right")
    table.add_column("queries", justify="right")
    for result in report.results:
        table.add_row(str(result.depth), f"{result.value:.4f}", str(result.queries))
    notes = []
    if report.run_only:
        counted = "skipped" if report.common_only else "counted as 0"
        notes.append(
            f"{len(report.run_only)} queries not in the reference ({counted}): {_preview(report.run_only)}")
    if report.reference_only:
        notes.append(f"{len(report.reference_only)} reference queries not in the run (skipped): "
                     f"{_preview(report.reference_only)}")
    if notes:
        table.caption = "\n".join(notes)
    return table


@app.command("consistency")
def consistency_command(
    run: Path = typer.Argument(..., metavar="RUN_F", help="Run whose top-n is checked."),
    reference: Path = typer.Argument(..., metavar="RUN_REF", help="Reference run (RepBERT: BM25 top-1000)."),
    depth: Optional[list[int]] = typer.Option(
        None, "--depth", "-n", help="Depth n; repeat for several (default 10, 100, 1000).", callback=int_range(1)),
    ref_depth: int = typer.Option(
        1000, "--ref-depth", help="Depth of the reference's candidate set.", callback=int_range(1)),
    common_only: bool = typer.Option(False, "--common-only", help="Average only over queries in both runs."),
    fmt: str = typer.Option("table", "--format", help="table, json or tsv."),
) -> None:
    """RepBERT's consistency factor C_f,n (Eq. 5) of RUN_F against RUN_REF.

    C_f,n is the mean over queries of the share of RUN_F's top-n that is in RUN_REF's top --ref-depth.
    A RUN_F query missing from RUN_REF counts as 0 (unless --common-only); a RUN_REF query missing
    from RUN_F is skipped. A query with fewer than n documents is divided by what it has.
    """
    if fmt not in FORMATS:
        raise RankkitError(f"unknown --format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    depths = list(depth) if depth else DEFAULT_DEPTHS
    for n in (*depths, ref_depth):
        if n < 1:
            raise RankkitError(f"depths must be at least 1, got {n}")
    with progress_bar("run", transient=True) as bar:
        task = bar.add_task("reading runs", total=2)
        run_data = read_run(run)
        bar.advance(task)
        reference_data = read_run(reference, depth=ref_depth)
        bar.advance(task)
    from rankkit.evaluation.consistency import consistency

    report = consistency(run_data, reference_data, depths, ref_depth=ref_depth, common_only=common_only)
    output = render(report, run, reference, fmt)
    if isinstance(output, str):
        typer.echo(output)
    else:
        Console(soft_wrap=True).print(output)
