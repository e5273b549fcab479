"""``rankkit fuse``: combine runs (RepBERT's alternating merge, RRF, CombSUM/MNZ, interpolation)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rankkit.cli.app import app, float_range, int_range
from rankkit.cli.inputs import from_stdin, one_stdin
from rankkit.console import log, progress_bar
from rankkit.errors import RankkitError
from rankkit.files import check_outputs
from rankkit.fusion import FUSION_METHODS, check_fusion_options, fuse_files


def parse_weights(text: str) -> list[float]:
    """``"0.7,0.3"`` -> ``[0.7, 0.3]`` with a one-line error for anything else."""
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise RankkitError(f"--weights must be comma-separated numbers like 0.7,0.3, got {text!r}") from None


@app.command("fuse")
def fuse_command(
    runs: list[Path] = typer.Argument(
        ..., metavar="RUN_A RUN_B [RUN ...]", help="Runs to fuse, in order (A first); - reads one from standard input."),
    output: Path = typer.Option(..., "--output", "-o", help="Fused run to write (.gz compresses; - writes standard "
                                                            "output)."),
    method: str = typer.Option(
        ..., "--method", "-m", help=f"Fusion method: {', '.join(FUSION_METHODS)}."),
    depth: Optional[int] = typer.Option(
        None, "--depth", help="Read each input's top DEPTH (trec_eval order); default all.", callback=int_range(1)),
    k: int = typer.Option(1000, "--k", "--hits", help="Documents kept per query in the output.", callback=int_range(1)),
    runtag: Optional[str] = typer.Option(
        None, "--runtag", help="Run tag of the output (default fuse-METHOD)."),
    rrf_k: Optional[float] = typer.Option(
        None, "--rrf-k", help="rrf: the constant k in 1/(k + rank) (default 60).", callback=float_range(0)),
    norm: Optional[str] = typer.Option(
        None, "--norm", help="combsum/combmnz/interpolate: minmax (ranx: min-max), zscore (ranx: zmuv) or none (default minmax)."),
    alpha: Optional[float] = typer.Option(
        None, "--alpha", help="interpolate: weight of run A (default 0.5).", callback=float_range(0, 1)),
    weights: Optional[str] = typer.Option(
        None, "--weights", help="rrf/combsum/combmnz: one weight per run, comma separated, e.g. 0.7,0.3."),
) -> None:
    """Fuse RUN_A RUN_B [RUN ...] into one run.

    - **alternate**: RepBERT's merge (Eq. 6), A1 B1 A2 B2 ..., first occurrence kept (A+B differs from B+A).
    - **rrf**: sum over runs of w / (rrf_k + rank).
    - **combsum** / **combmnz**: sum of per-query normalised scores (combmnz: times the number of
      runs returning the document).
    - **interpolate**: alpha x A + (1 - alpha) x B after normalisation (exactly 2 runs).

    A document missing from a run gets 0 under minmax, that run's lowest score for the query otherwise.
    """
    options: dict[str, object] = {}
    for name, value in (("rrf_k", rrf_k), ("norm", norm), ("alpha", alpha)):
        if value is not None:
            options[name] = value
    if weights is not None:
        options["weights"] = parse_weights(weights)
    tag = runtag or f"fuse-{method}"
    if not tag or any(ch.isspace() for ch in tag):
        raise RankkitError(f"--runtag must be one non-empty word, got {tag!r}")
    # Check method, run count and options before reading (possibly large) inputs.
    check_fusion_options(method, len(runs), k=k, depth=depth, **options)
    one_stdin(runs, "rankkit fuse")
    # The output is written through an atomic rename, so -o may name one of the runs (rewritten in place).
    check_outputs([("--output", output)])

    with progress_bar("q", transient=True) as bar:
        task = bar.add_task(f"fusing ({method})", total=None)
        queries, lines = fuse_files([from_stdin(run) for run in runs], output, method, k=k, depth=depth, tag=tag,
                                    on_query=lambda _: bar.advance(task), **options)
    log(f"fuse: {method} of {len(runs)} runs -> {output} ({queries} queries, {lines} lines)")
