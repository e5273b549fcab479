"""``rankkit plot-training``: the training curves of one or more ``rankkit train`` runs in one picture."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rankkit.cli.app import app
from rankkit.errors import RankkitError


@app.command("plot-training")
def plot_training_command(
    checkpoints: list[Path] = typer.Argument(..., metavar="CK", help="rankkit train output folders (their metrics.csv, or train.log for older runs), or metrics.csv files."),
    output: Path = typer.Option(..., "--output", "-o", help="PNG to write (atomically)."),
    metric: str = typer.Option("dev_mrr", "--metric", help="Dev metric of the lower panel: dev_mrr or dev_ndcg@10."),
    labels: Optional[list[str]] = typer.Option(None, "--label", help="Legend name of each CK, in order (default: the folder names)."),
    title: Optional[str] = typer.Option(None, "--title", help="Title of the picture."),
) -> None:
    """Compare training runs: smoothed training loss (top) and a dev metric (bottom) against the step,
    one colour per run, in one PNG."""
    from rankkit.console import log
    from rankkit.files import check_outputs
    from rankkit.training.curves import DEV_COLUMNS, plot_curves, read_curves, steps_table

    if metric not in DEV_COLUMNS:
        raise RankkitError(f"--metric must be one of {', '.join(DEV_COLUMNS)}, got {metric!r}")
    if labels and len(labels) != len(checkpoints):
        raise RankkitError(f"--label given {len(labels)} times for {len(checkpoints)} runs: give one per CK")
    check_outputs([("--output", str(output))], [("CK", str(ck)) for ck in checkpoints])
    runs = [read_curves(ck, labels[i] if labels else None) for i, ck in enumerate(checkpoints)]
    names = [run.label for run in runs]
    for name in names:
        if names.count(name) > 1:
            raise RankkitError(f"two runs are labelled {name!r}; name them with --label")
    plot_curves(runs, output, title=title, metric=metric)
    for line in steps_table(runs):
        log(line)
    log(f"plot-training: {len(runs)} runs -> {output}")
