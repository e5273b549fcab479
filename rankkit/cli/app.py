"""The typer application every ``rankkit/cli/*_cmd.py`` module adds its subcommand to."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="rankkit",
    help="Multi-stage neural text ranking: index, retrieve, mine, train, re-rank, fuse, evaluate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
