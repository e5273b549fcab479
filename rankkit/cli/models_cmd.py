"""``rankkit models``: every registered model (built-in and plug-ins) with its family, paper and options."""

from __future__ import annotations

import re
from typing import Optional

import typer

from rankkit.cli.app import app


def _short_citation(paper: str) -> str:
    """``Luo, Yang, Guo, ... and Xu, 2022, "Title"`` -> ``Luo et al., 2022``."""
    match = re.match(r"^(.*?), ((?:19|20)\d\d)\b", paper)
    if not match:
        return paper or "-"
    authors, year = match.groups()
    first = authors.split(",")[0].split(" and ")[0].removesuffix(" et al.")
    shown = authors if "," not in authors and " et al." not in authors else f"{first} et al."
    return f"{shown}, {year}"


@app.command("models")
def models_command(
    name: Optional[str] = typer.Argument(None, help="A model: print its own options, their defaults and sources."),
) -> None:
    """List every model there is to train and use (the registry, plug-ins included), or one model's options."""
    from rankkit.cli.model_options import print_model_help
    from rankkit.models import PROVIDERS, get_spec, specs

    if name is not None:
        get_spec(name)  # an unknown name is one line listing the known ones
        print_model_help(name)
        return
    rows = []
    for model, spec in sorted(specs().items()):
        options = ", ".join(option.flag.split("/")[0] for option in spec.config_class.model_options()) or "-"
        paper = _short_citation(spec.paper)
        rows.append((model, spec.family_words, spec.training_defaults.loss, PROVIDERS.get(model, "rankkit"), paper,
                     options))
    headers = ("model", "family", "default loss", "provided by", "paper", "options")
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(5)]
    for row in [headers, *rows]:
        typer.echo("  ".join(str(cell).ljust(width) for cell, width in zip(row[:5], widths)) + "  " + row[5])
    typer.echo("\n`rankkit models NAME` shows NAME's options with their defaults and the paper each comes from.")
