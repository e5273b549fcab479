"""``rankkit doctor``: report Python, torch (and its device), Java, pyserini/Anserini, faiss and weights."""

from __future__ import annotations

import typer

from rankkit.cli.app import app
from rankkit.doctor import format_checks, run_checks


@app.command("doctor")
def doctor_command() -> None:
    """Print what rankkit needs and what is installed, with a hint for anything missing.

    Exits 1 when a required component is missing or does not work.
    """
    results = run_checks()
    for line in format_checks(results):
        typer.echo(line)
    bad = [c.name for c in results if not c.ok and c.required]
    if bad:
        typer.echo(f"\n{len(bad)} problem(s): {', '.join(bad)}", err=True)
        raise typer.Exit(1)
    typer.echo("\nall good", err=True)
