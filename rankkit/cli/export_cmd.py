"""``rankkit export``: write a rankkit checkpoint in another library's layout (lightning-ir)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from rankkit.cli.app import app
from rankkit.errors import RankkitError

FORMATS = ("lightning-ir",)


@app.command("export")
def export_command(
    checkpoint: str = typer.Argument(..., help="A rankkit checkpoint: a folder or a hub id ORG/NAME[@REVISION]."),
    output: Path = typer.Argument(..., help="Folder to write (must not exist, or be empty)."),
    format: str = typer.Option("lightning-ir", "--format", help="lightning-ir: a set-encoder, or a mono with a linear "
                                                                "head on [CLS] (--rankkit-head --hidden 0), on BERT or "
                                                                "ELECTRA, as lightning_ir.CrossEncoderModule loads it."),
) -> None:
    """Write CHECKPOINT in another library's layout, so that library loads it and gives rankkit's scores.

    lightning-ir then scores a short candidate list as it is (sample_missing_docs is written off).
    A model trained with --truncation pair keeps its lengths; lightning-ir cuts query and passage
    separately, so scores agree where no passage is cut (train with --truncation lightning-ir for
    agreement everywhere).
    """
    if format not in FORMATS:
        raise RankkitError(f"--format {format!r}: rankkit exports {', '.join(FORMATS)}")
    from rankkit.files import check_output_dir, staging_dir
    from rankkit.hub import resolve_model

    source = resolve_model(checkpoint)  # before torch: a wrong path or id fails at once
    check_output_dir(output, "OUTPUT")
    if output.is_dir() and any(output.iterdir()):
        raise RankkitError(f"OUTPUT {output}: exists and is not empty; give a new folder")
    from rankkit.console import log, warn
    from rankkit.models import lightning_ir
    from rankkit.models.checkpoint import load_model

    model = load_model(source)
    with staging_dir(output) as tmp:
        lightning_ir.save(model, tmp / "model")
        if output.is_dir():
            output.rmdir()  # empty, checked above
        os.replace(tmp / "model", output)
    if getattr(model.config, "truncation", "lightning-ir") != "lightning-ir":
        warn("the model was trained with --truncation pair: lightning-ir cuts query and passage separately, so its "
             "scores equal rankkit's only where no passage is cut")
    log(f"wrote {output}: a lightning-ir {model.name} "
        f"(lightning_ir.CrossEncoderModule(model_name_or_path={str(output)!r}))")
