"""``rankkit index --kind KIND``: build an index of a corpus (``bm25``, ``dense``); ``--merge`` joins dense shards.

Each kind registers a build function and the kind-specific options it accepts in
:data:`INDEX_KINDS`; an option of another kind is a one-line error, not silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import typer

from rankkit.cli.app import app, int_range
from rankkit.cli.model_options import dense_index_options, model_options_of, rerank_settings
from rankkit.cli.registry import OptionRegistry
from rankkit.cli.runtime_options import (
    backend_option,
    device_for,
    max_tokens_option,
    precision_option,
    quantize_option,
    runtime_of,
)
from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.files import check_output_dir


@dataclass(frozen=True)
class IndexRequest:
    """Options every kind shares, plus the kind-specific ones that were given (by option name)."""

    corpus: Path
    index: Path
    threads: Optional[int]
    force: bool
    options: dict[str, Any] = field(default_factory=dict)


INDEX_KINDS: OptionRegistry[IndexRequest] = OptionRegistry("--kind", "index kind", "kinds")
register_index_kind = INDEX_KINDS.register


@register_index_kind(
    "bm25", "Lucene inverted index built by Anserini (raw text stored)", options=("docvectors",)
)
def _build_bm25(request: IndexRequest) -> None:
    from rankkit.lexical.index import build_bm25_index

    report = build_bm25_index(
        request.corpus,
        request.index,
        threads=request.threads,
        docvectors=bool(request.options.get("docvectors")),
        force=request.force,
    )
    log(
        f"indexed {report.indexed:,} of {report.documents:,} documents (empty {report.empty:,}, "
        f"skipped {report.skipped:,}, errors {report.errors:,}) into {report.index} "
        f"in {report.seconds:.1f} s (reading {report.convert_seconds:.1f} s, "
        f"Anserini {report.index_seconds:.1f} s)"
    )


DENSE_OPTIONS = ("model", "checkpoint", "faiss", "nlist", "pq_m", "pq_bits", "batch_size", "chunk_size", "shard",
                 "device", "max_query_length", "max_doc_length", "settings", "backend", "quantize", "precision",
                 "max_tokens")
DENSE_MODEL_PANEL = "Dense: model settings (recorded in the index; its searches use them)"


@register_index_kind(
    "dense",
    "faiss index of bi-encoder vectors (--model repbert|densetrans, --checkpoint; without one, --model repbert is the packaged all-MiniLM-L6-v2 zero-shot)",
    options=DENSE_OPTIONS,
)
def _build_dense(request: IndexRequest) -> None:
    options = dict(request.options)
    model = options.pop("model", None)
    if model is None:
        raise RankkitError("--kind dense needs --model (repbert or densetrans)")
    # A bad --backend/--quantize/--precision is one line before torch loads.
    runtime = runtime_of(options.get("backend"), options.get("quantize"), request.threads, options.get("precision"))
    # torch/faiss are imported here, not at CLI start-up, so `rankkit --help` and `eval` stay fast.
    from rankkit.dense import build_dense_index
    from rankkit.dense.encode import DEFAULT_CHUNK_SIZE
    from rankkit.distributed import init_distributed

    # Under torchrun the processes split the chunks and rank 0 writes the index (docs/DENSE.md).
    dist = init_distributed(device_for(options.get("device"), runtime))
    if dist.main:
        _prepare_dense_folder(request.index, request.force)
    dist.barrier()
    build_dense_index(
        model,
        options.get("checkpoint"),
        request.corpus,
        request.index,
        faiss_kind=options.get("faiss", "flat"),
        nlist=options.get("nlist", 2000),
        pq_m=options.get("pq_m", 16),
        pq_bits=options.get("pq_bits", 8),
        batch_size=options.get("batch_size"),
        max_tokens=options.get("max_tokens"),
        shard=options.get("shard"),
        chunk_size=options.get("chunk_size", DEFAULT_CHUNK_SIZE),
        device=options.get("device", "auto"),
        max_query_length=options.get("max_query_length"),
        max_doc_length=options.get("max_doc_length"),
        settings=options.get("settings"),
        runtime=runtime,
        dist=dist,
    )
    dist.close()


def _prepare_dense_folder(index: Path, force: bool) -> None:
    """Refuse a non-empty folder that is not a dense index or encoding; ``--force`` starts it afresh.

    Without ``--force`` a folder holding this build's finished chunks is reused (resume).
    """
    import shutil

    from rankkit.indexes import MANIFEST_NAME, is_empty_dir

    if not index.exists():
        return
    if not index.is_dir():
        raise RankkitError(f"index {index}: not a directory")
    ours = (index / MANIFEST_NAME).is_file() or (index / "embeddings").is_dir()
    if not is_empty_dir(index) and not ours:
        raise RankkitError(f"{index} is not empty and not a rankkit index; refusing to write into it")
    if force and ours:
        shutil.rmtree(index)


@app.command("index")
@model_options_of("index", dense_index_options, DENSE_MODEL_PANEL)
def index_command(
    kind: str = typer.Option("bm25", "--kind", help=f"Index kind: {', '.join(INDEX_KINDS.names())}."),
    corpus: Optional[Path] = typer.Option(
        None,
        "--corpus",
        help="Corpus: JSONL (id/contents, BEIR _id/title/text) or TSV (id, tab, text), .gz ok; a BEIR folder; irds:ID.",
        show_default=False,
    ),
    index: Path = typer.Option(..., "--index", help="Index directory to create (with --merge: the joined index)."),
    merge: Optional[list[Path]] = typer.Option(
        None,
        "--merge",
        help="Join the dense shard folders built with --shard I/N into --index (repeat, or list them after it).",
        show_default=False,
    ),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Indexing threads (default: CPU cores); dense: torch's and ONNX Runtime's.",
        callback=int_range(1)),
    force: bool = typer.Option(False, "--force", help="Replace an existing non-empty index directory."),
    docvectors: bool = typer.Option(
        False, "--docvectors", help="bm25: store document vectors (needed by --rm3).", rich_help_panel="BM25"
    ),
    model: Optional[str] = typer.Option(
        None, "--model", help="dense: bi-encoder, repbert or densetrans.", rich_help_panel="Dense"
    ),
    checkpoint: Optional[str] = typer.Option(
        None,
        "--checkpoint",
        help="dense: `rankkit train` output, a Hugging Face / sentence-transformers model used zero-shot, as a folder or hub id ORG/NAME[@REVISION] (repbert default: packaged MiniLM, zero-shot).",
        rich_help_panel="Dense",
    ),
    faiss: Optional[str] = typer.Option(
        None, "--faiss", help="dense: flat (exact) or ivfpq (default: flat).", rich_help_panel="Dense"
    ),
    nlist: Optional[int] = typer.Option(
        None, "--nlist", help="dense --faiss ivfpq: inverted lists (default: 2000).", callback=int_range(1), rich_help_panel="Dense"
    ),
    pq_m: Optional[int] = typer.Option(
        None, "--pq-m", help="dense --faiss ivfpq: PQ sub-vectors (default: 16).", callback=int_range(1), rich_help_panel="Dense"
    ),
    pq_bits: Optional[int] = typer.Option(
        None, "--pq-bits", help="dense --faiss ivfpq: bits per sub-vector (default: 8).", callback=int_range(1, 16), rich_help_panel="Dense"
    ),
    batch_size: Optional[int] = typer.Option(
        None, "--batch-size", help="dense: passages per forward pass at most (default: 64 on the CPU; on CUDA as many as --max-tokens allows).", callback=int_range(1), rich_help_panel="Dense"
    ),
    chunk_size: Optional[int] = typer.Option(
        None,
        "--chunk-size",
        help="dense: documents per encoded chunk: the unit of memory, resume and sharding (default: 8192).",
        callback=int_range(1), rich_help_panel="Dense",
    ),
    shard: Optional[str] = typer.Option(
        None,
        "--shard",
        help="dense: encode only shard I of N (I/N, 0 <= I < N) into --index; join with --merge.",
        rich_help_panel="Dense",
    ),
    device: Optional[str] = typer.Option(
        None, "--device", help="dense: auto, cpu or cuda (default: auto).", rich_help_panel="Dense"
    ),
    max_query_length: Optional[int] = typer.Option(
        None,
        "--max-query-length",
        help="dense: query token limit used by retrieve (default: the model's; repbert 20, densetrans 30).",
        callback=int_range(1), rich_help_panel="Dense",
    ),
    max_doc_length: Optional[int] = typer.Option(
        None,
        "--max-doc-length",
        help="dense: document token limit (default: the model's; repbert 256, densetrans 30).",
        callback=int_range(1), rich_help_panel="Dense",
    ),
    backend: Optional[str] = backend_option(None),
    quantize: Optional[str] = quantize_option(None),
    precision: Optional[str] = precision_option(None),
    max_tokens: Optional[int] = max_tokens_option(),
    more: Optional[list[str]] = typer.Argument(None, metavar="[SHARD]...", show_default=False,
                                               help="More shard folders after --merge."),
    **model_options: Any,
) -> None:
    """Index CORPUS into an index directory that records how it was built (rankkit-index.json).

    The corpus is streamed (never loaded whole). bm25: built in a temporary folder and renamed
    into place. dense: chunks are encoded into memory-mapped files, and a re-run resumes after an
    interruption; `--shard I/N` encodes one slice per machine, then
    `rankkit index --merge SHARD0 SHARD1 ... --index OUT` builds the index (identical to one pass).
    """
    dense: dict[str, Any] = {"model": model, "checkpoint": checkpoint, "faiss": faiss, "nlist": nlist, "pq_m": pq_m,
                             "pq_bits": pq_bits, "batch_size": batch_size, "chunk_size": chunk_size, "shard": shard,
                             "device": device, "max_query_length": max_query_length, "max_doc_length": max_doc_length,
                             "backend": backend, "quantize": quantize, "precision": precision, "max_tokens": max_tokens}
    given = {name: value for name, value in model_options.items() if value is not None}
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        if merge or kind != "dense" or model is None:
            raise RankkitError(f"{flags}: model settings of a dense index, given with --kind dense --model NAME")
        from rankkit.models import get_spec

        dense["settings"] = rerank_settings(get_spec(model), model_options)
    if more and not merge:
        raise RankkitError(f"unexpected argument {more[0]!r} (shard folders follow --merge)")
    if merge:
        _merge(list(merge or []) + [Path(m) for m in more or []], index, kind, corpus, docvectors, dense)
        return
    if corpus is None:
        raise RankkitError("--corpus is required (or --merge SHARD... to join dense shards)")
    if kind == "dense" and model is not None:
        _check_bi_encoder(model)
    # Before any work (a dense encoding can take hours): the index folder must be creatable.
    check_output_dir(index, "--index")
    chosen = INDEX_KINDS.get(kind)
    options = INDEX_KINDS.given_options(chosen, {"docvectors": docvectors, **dense})
    from rankkit.formats.sources import resolve_corpus

    corpus = resolve_corpus(corpus)
    with _one_writer(index):
        chosen.run(IndexRequest(corpus, index, threads, force, options))


def _check_bi_encoder(model: str) -> None:
    """A dense index's ``--model`` is a registered bi-encoder (from the declarations: before torch is imported)."""
    from rankkit.models import get_spec, specs

    if get_spec(model).family != "bi-encoder":
        known = ", ".join(name for name, spec in sorted(specs().items()) if spec.family == "bi-encoder")
        raise RankkitError(f"model {model!r} is not a bi-encoder: dense indexes need one ({known})")


def _one_writer(index: Path) -> Any:
    """One ``rankkit index`` at a time into a folder: a second is refused in one line (under torchrun
    only rank 0 holds the lock; the other ranks write nothing but their chunks)."""
    import contextlib
    import os

    from rankkit.files import exclusive

    return exclusive(index, "--index", wait=False) if os.environ.get("RANK", "0") == "0" else contextlib.nullcontext()


def _merge(shards: list[Path], index: Path, kind: str, corpus: Optional[Path], docvectors: bool,
           dense: dict[str, Any]) -> None:
    """``--merge``: only faiss settings may accompany it (to re-index with other ones)."""
    allowed = {"faiss", "nlist", "pq_m", "pq_bits"}
    extra = [name for name, value in dense.items() if value is not None and name not in allowed]
    if corpus is not None or docvectors or kind not in ("bm25", "dense") or extra:
        bad = ["--corpus"] * (corpus is not None) + ["--docvectors"] * docvectors
        bad += [f"--{name.replace('_', '-')}" for name in extra] + ["--kind"] * (kind not in ("bm25", "dense"))
        raise RankkitError(f"--merge takes shard folders, --index and faiss options only, not {', '.join(bad)}")
    if not shards:
        raise RankkitError("--merge needs the shard folders to join")
    from rankkit.dense import merge_dense_shards

    check_output_dir(index, "--index")
    with _one_writer(index):
        _prepare_dense_folder(index, force=False)
        merge_dense_shards(shards, index, faiss_kind=dense["faiss"], nlist=dense["nlist"], pq_m=dense["pq_m"],
                           pq_bits=dense["pq_bits"])
