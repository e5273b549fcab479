"""``rankkit rerank``: re-rank a run's top candidates with a trained (or zero-shot) model."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from rankkit.cli.app import MAX_COUNT, MAX_TOKENS, app, int_range
from rankkit.cli.model_options import RERANK_PANEL, declaration_of, model_options_of, rerank_options, rerank_settings
from rankkit.cli.runtime_options import (
    backend_option,
    device_for,
    max_tokens_option,
    precision_option,
    quantize_option,
    runtime_of,
    threads_option,
)
from rankkit.errors import RankkitError


@app.command("rerank")
@model_options_of("rerank", rerank_options, RERANK_PANEL)
def rerank_command(
    model: str = typer.Option(..., "--model", help="Any model of rankkit train: {models} (rankkit models NAME shows NAME's options)."),
    checkpoint: Optional[str] = typer.Option(
        None, "--checkpoint", help="A folder or a hub id ORG/NAME[@REVISION]: a rankkit train output (its rankkit.json names the model; OUTPUT/best and step checkpoints OUTPUT/checkpoints/step-N load the same way), a lightning-ir set-encoder/mono, or a Hugging Face model used zero-shot: an encoder for repbert (a sentence-transformers folder keeps its pooling), a *ForSequenceClassification cross-encoder for mono. Without one, repbert is the packaged all-MiniLM-L6-v2, zero-shot; the other models need one."
    ),
    run: Path = typer.Option(..., "--run", "--candidates", help="First-stage run to re-rank (--candidates: the same, for torchrun, whose own parser takes --run as its --run-path)."),
    topics: Path = typer.Option(..., "--topics", help="Query texts (TSV, JSONL, TREC SGML, BEIR folder or irds:ID)."),
    topic_field: Optional[str] = typer.Option(None, "--topic-field", help="TREC topics: title (default), description or narrative."),
    output: Path = typer.Option(..., "--output", "-o", help="Re-ranked run to write."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Passage texts from this corpus (file, BEIR folder or irds:ID)..."),
    index: Optional[Path] = typer.Option(None, "--index", help="...or from this BM25 index's stored raw text."),
    cache_dir: Optional[Path] = typer.Option(
        None, "--cache-dir", help="Where the corpus's docid table is cached [default: $RANKKIT_CACHE_DIR/docstore, else ${XDG_CACHE_HOME:-~/.cache}/rankkit/docstore; never beside the corpus]."
    ),
    depth: int = typer.Option(100, "--depth", help="Re-rank each query's top DEPTH; the rest follow unchanged.",
                              callback=int_range(1, MAX_COUNT)),
    batch_size: Optional[int] = typer.Option(
        None, "--batch-size", help="Pairs per encoder forward pass at most [default: 32 on the CPU; on CUDA as many "
                                   "as --max-tokens allows].", callback=int_range(1, MAX_COUNT)),
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
    max_tokens: Optional[int] = max_tokens_option(),
    **model_options: Any,
) -> None:
    """Re-rank each query's top --depth candidates by query and passage text; the rest keep their order below.

    The output keeps the input's depth. Queries stream a few at a time; the re-ranker never sees
    first-stage scores.
    """
    if (corpus is None) == (index is None):
        raise RankkitError("give passage texts with --corpus CORPUS or --index DIR (exactly one)")
    if index is not None and cache_dir is not None:
        raise RankkitError("--cache-dir applies to --corpus only")
    if depth < 1:
        raise RankkitError(f"--depth must be at least 1, got {depth}")
    if tag is not None and runtag is not None and tag != runtag:
        raise RankkitError("--tag is the old name of --runtag: give one of them")
    runtag = runtag if runtag is not None else tag
    from rankkit.cli.inputs import check_inputs
    from rankkit.files import check_outputs
    from rankkit.formats.sources import load_topics, resolve_corpus

    # Before any work: never overwrite an input, never find a bad output only at the rename.
    check_outputs([("--output", output)], [("--run", run), ("--topics", topics), ("--corpus", corpus)])
    check_inputs([("--run", run), ("--topics", topics), ("--corpus", corpus), ("--index", index)])
    # The model's declaration checks its overrides, and the runtime its values, before torch is imported (an
    # unknown model or backend is one line too).
    overrides = rerank_settings(declaration_of(model, checkpoint), model_options)
    runtime = runtime_of(backend, quantize, threads, precision)
    device = device_for(device, runtime)
    from rankkit.docstore import open_docstore
    from rankkit.reranking import rerank_run, run_sample
    from rankkit.runtime.scorer_build import scorer_for

    queries = load_topics(topics, topic_field)
    corpus = resolve_corpus(corpus) if corpus is not None else None
    # A one-label cross-encoder on the CPU: its cached ONNX export, without torch (rankkit.runtime.scorer).
    scorer = scorer_for(model, checkpoint, runtime, device, settings=overrides, max_length=max_length,
                        batch_size=batch_size, max_tokens=max_tokens)
    if scorer is not None:
        with open_docstore(corpus=corpus, index=index, cache_dir=cache_dir) as store:
            rerank_run(scorer, run, queries, store, output, depth=depth, tag=runtag)
        return
    from rankkit.distributed import init_distributed
    from rankkit.runtime import InferenceSession, load_for_inference

    # Under torchrun the processes split the queries (each on its local device); rank 0 writes.
    dist = init_distributed(device)

    def sample() -> object:
        """This run's own first pairs, read only if auto makes a lossy choice (issue 41)."""
        with open_docstore(corpus=corpus, index=index, cache_dir=cache_dir) as store:
            return run_sample(run, queries, store, depth)

    # auto's lossy choice is checked on the run's own first pairs; the user's explicit one is not.
    session = InferenceSession.of(load_for_inference(model, checkpoint, runtime, dist.device, settings=overrides,
                                                     sample=None if runtime.resolved else sample),
                                  batch_size=batch_size, max_tokens=max_tokens)
    with open_docstore(corpus=corpus, index=index, cache_dir=cache_dir) as store:
        rerank_run(session, run, queries, store, output, depth=depth, max_length=max_length, tag=runtag, dist=dist)
    dist.close()
