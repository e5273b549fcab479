"""``rankkit validate``: report every problem of a run file, optionally write a fixed copy."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rankkit.cli.app import app
from rankkit.cli.inputs import from_stdin
from rankkit.console import log, progress_bar
from rankkit.files import check_outputs
from rankkit.errors import RankkitError
from rankkit.formats.validate import validate_run


@app.command("validate")
def validate_command(
    run: Path = typer.Argument(..., metavar="RUN", help="Run file to check (TREC format, .gz ok; - reads standard "
                                                        "input)."),
    qrels: Optional[Path] = typer.Option(
        None, "--qrels", help="Also check the run's queries against these judgments."),
    fix: Optional[Path] = typer.Option(
        None, "--fix", metavar="OUT", help="Write a cleaned, re-sorted, re-ranked copy."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the summary line."),
) -> None:
    """Check a run file and report every problem with its line; --fix writes a clean copy.

    Checks malformed lines, duplicate (qid, docid), non-finite scores, rank column vs trec_eval order,
    split queries, empty file, and with --qrels queries without judgments.
    Prints one line per problem (file:line: severity: message [kind]) and a summary on stdout.
    Exit 0 when clean (info allowed), 1 when anything is wrong (also with --fix: it describes RUN),
    2 when RUN or QRELS cannot be read, or when --fix would write an empty run (it refuses).
    --fix drops malformed and non-finite lines, keeps the best score of duplicates, re-sorts and
    re-ranks 1..n, keeping the run tag.
    """
    # --fix RUN rewrites the run in place (an atomic write, renamed over it at the end); never the qrels.
    check_outputs([("--fix", fix)], [("--qrels", qrels)])
    with progress_bar("line", transient=True) as bar:
        task = bar.add_task("validating", total=None)
        report = validate_run(from_stdin(run), qrels, on_lines=lambda n: bar.advance(task, n), fix=fix)
    if not quiet:
        for problem in report.problems:
            typer.echo(str(problem))
    typer.echo(report.summary())
    if fix is not None:
        if report.fixed_lines is None:
            raise RankkitError(f"{report.path}: no valid run line to keep; --fix writes no empty run")
        log(f"validate: wrote fixed copy {fix} ({report.queries} queries, {report.fixed_lines} lines)")
    if not report.ok:
        raise typer.Exit(1)
