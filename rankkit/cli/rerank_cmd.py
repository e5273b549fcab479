"""``rankkit rerank``: re-rank a run's top candidates with a trained (or zero-shot) model."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from rankkit.cli.app import app
from rankkit.cli.model_options import RERANK_PANEL, model_options_of, rerank_options, rerank_settings
from rankkit.errors import RankkitError


@app.command("rerank")
@model_options_of("rerank", rerank_options, RERANK_PANEL)
def rerank_command(
    model: str = typer.Option(..., "--model", help="Any model of rankkit train (rankkit models lists them)."),
    checkpoint: Optional[Path] = typer.Option(
        None, "--checkpoint", help="Folder written by rankkit train (repbert without one: the zero-shot packaged MiniLM)."
    ),
    run: Path = typer.Option(..., "--run", "--candidates", help="First-stage run to re-rank (--candidates: the same, for torchrun, whose own parser takes --run as its --run-path)."),
    topics: Path = typer.Option(..., "--topics", help="Query texts (TSV or JSONL)."),
    output: Path = typer.Option(..., "--output", "-o", help="Re-ranked run to write."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Passage texts from this corpus file..."),
    index: Optional[Path] = typer.Option(None, "--index", help="...or from this BM25 index's stored raw text."),
    cache_dir: Optional[Path] = typer.Option(
        None, "--cache-dir", help="Where the corpus's docid table is cached [default: beside the corpus]."
    ),
    depth: int = typer.Option(100, "--depth", help="Re-rank each query's top DEPTH; the rest follow unchanged."),
    batch_size: int = typer.Option(32, "--batch-size", help="Pairs per encoder forward pass."),
    max_length: Optional[int] = typer.Option(
        None, "--max-length", help="Tokens per input: the whole pair (cross-encoders) or the passage (bi-encoders)."
    ),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    tag: Optional[str] = typer.Option(None, "--tag", help="Run tag [rankkit-MODEL]."),
    **model_options: Any,
) -> None:
    """Re-rank each query's top --depth candidates by query and passage text; the rest keep their order below.

    The output keeps the input's depth. Queries stream a few at a time; the re-ranker never sees
    first-stage scores.
    """
    from rankkit.docstore import open_docstore
    from rankkit.rerank import rerank_run
    from rankkit.models.checkpoint import load_for_inference
    from rankkit.distributed import init_distributed

    if (corpus is None) == (index is None):
        raise RankkitError("give passage texts with --corpus CORPUS or --index DIR (exactly one)")
    if index is not None and cache_dir is not None:
        raise RankkitError("--cache-dir applies to --corpus only")
    if depth < 1:
        raise RankkitError(f"--depth must be at least 1, got {depth}")
    from rankkit.formats._files import check_outputs

    # Before any work: never overwrite an input, never find a bad output only at the rename.
    check_outputs([("--output", output)], [("--run", run), ("--topics", topics), ("--corpus", corpus)])
    from rankkit.models import get_model_class

    overrides = rerank_settings(get_model_class(model), model_options)
    ranker = load_for_inference(model, checkpoint)
    for name, value in overrides.items():
        ranker.override(name, value)
    dist = init_distributed(device)  # under torchrun the processes split the queries; rank 0 writes
    with open_docstore(corpus=corpus, index=index, cache_dir=cache_dir) as store:
        rerank_run(ranker, run, topics, store, output, depth=depth, batch_size=batch_size,
                   max_length=max_length, device=dist.device, tag=tag, dist=dist)
    dist.close()
