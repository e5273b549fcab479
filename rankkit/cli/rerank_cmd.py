"""``rankkit rerank``: re-rank a run's top candidates with a trained (or zero-shot) model."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from rankkit.cli.app import MAX_COUNT, MAX_TOKENS, app, int_range
from rankkit.cli.model_options import RERANK_PANEL, model_options_of, rerank_options, rerank_settings
from rankkit.cli.runtime_options import (
    backend_option,
    device_for,
    precision_option,
    quantize_option,
    runtime_of,
    threads_option,
)
from rankkit.errors import RankkitError


@app.command("rerank")
@model_options_of("rerank", rerank_options, RERANK_PANEL)
def rerank_command(
    model: str = typer.Option(..., "--model", help="Any model of rankkit train (rankkit models lists them)."),
    checkpoint: Optional[Path] = typer.Option(
        None, "--checkpoint", help="Folder written by rankkit train (repbert without one: the zero-shot packaged MiniLM)."
    ),
    run: Path = typer.Option(..., "--run", "--candidates", help="First-stage run to re-rank (--candidates: the same, for torchrun, whose own parser takes --run as its --run-path)."),
    topics: Path = typer.Option(..., "--topics", help="Query texts (TSV, JSONL, TREC SGML, BEIR folder or irds:ID)."),
    topic_field: Optional[str] = typer.Option(None, "--topic-field", help="TREC topics: title (default), description or narrative."),
    output: Path = typer.Option(..., "--output", "-o", help="Re-ranked run to write."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Passage texts from this corpus (file, BEIR folder or irds:ID)..."),
    index: Optional[Path] = typer.Option(None, "--index", help="...or from this BM25 index's stored raw text."),
    cache_dir: Optional[Path] = typer.Option(
        None, "--cache-dir", help="Where the corpus's docid table is cached [default: beside the corpus]."
    ),
    depth: int = typer.Option(100, "--depth", help="Re-rank each query's top DEPTH; the rest follow unchanged.",
                              callback=int_range(1, MAX_COUNT)),
    batch_size: int = typer.Option(32, "--batch-size", help="Pairs per encoder forward pass.",
                                   callback=int_range(1, MAX_COUNT)),
    max_length: Optional[int] = typer.Option(
        None, "--max-length", help="Tokens per input: the whole pair (cross-encoders) or the passage (bi-encoders).",
        callback=int_range(1, MAX_TOKENS),
    ),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    runtag: Optional[str] = typer.Option(None, "--runtag", help="Run tag (last column) [rankkit-MODEL]."),
    tag: Optional[str] = typer.Option(None, "--tag", hidden=True, help="Old name of --runtag."),
    backend: str = backend_option(),
    quantize: str = quantize_option(),
    threads: Optional[int] = threads_option(),
    precision: str = precision_option(),
    **model_options: Any,
) -> None:
    """Re-rank each query's top --depth candidates by query and passage text; the rest keep their order below.

    The output keeps the input's depth. Queries stream a few at a time; the re-ranker never sees
    first-stage scores.
    """
    from rankkit.docstore import open_docstore
    from rankkit.reranking import rerank_run
    from rankkit.models.checkpoint import load_for_inference
    from rankkit.distributed import init_distributed

    if (corpus is None) == (index is None):
        raise RankkitError("give passage texts with --corpus CORPUS or --index DIR (exactly one)")
    if index is not None and cache_dir is not None:
        raise RankkitError("--cache-dir applies to --corpus only")
    if depth < 1:
        raise RankkitError(f"--depth must be at least 1, got {depth}")
    if tag is not None and runtag is not None and tag != runtag:
        raise RankkitError("--tag is the old name of --runtag: give one of them")
    runtag = runtag if runtag is not None else tag
    from rankkit.files import check_outputs
    from rankkit.formats.sources import load_topics, resolve_corpus

    # Before any work: never overwrite an input, never find a bad output only at the rename.
    check_outputs([("--output", output)], [("--run", run), ("--topics", topics), ("--corpus", corpus)])
    from rankkit.models import get_model_class
    from rankkit.models.runtime import use_runtime

    overrides = rerank_settings(get_model_class(model), model_options)
    runtime = runtime_of(backend, quantize, threads, precision)
    # Under torchrun the processes split the queries (each on its local device); rank 0 writes.
    dist = init_distributed(device_for(device, runtime))
    chosen = dist.device
    runtime.check(chosen)
    ranker = load_for_inference(model, checkpoint)
    for name, value in overrides.items():
        ranker.override(name, value)
    use_runtime(ranker, runtime, checkpoint=checkpoint, device=chosen)
    queries = load_topics(topics, topic_field)
    corpus = resolve_corpus(corpus) if corpus is not None else None
    with open_docstore(corpus=corpus, index=index, cache_dir=cache_dir) as store:
        rerank_run(ranker, run, queries, store, output, depth=depth, batch_size=batch_size,
                   max_length=max_length, device=chosen, tag=runtag, precision=runtime.torch_precision, dist=dist)
    dist.close()
