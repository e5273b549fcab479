"""``rankkit retrieve --model MODEL``: first-stage retrieval into a TREC run (``bm25``, or any bi-encoder).

``bm25`` is an entry of :data:`RETRIEVERS` with its own options; every bi-encoder the model registry
knows (``repbert``, ``densetrans``, a plug-in) searches its dense indexes through one entry built by
:func:`dense_retriever`, so a new bi-encoder needs no change here. Without ``--model`` the index says
which model it was built for (:func:`model_of_index`). The shared options (index, topics, output, k,
threads, runtag, remove-query) stay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Union

import typer

from rankkit.cli.app import app, float_range, int_range
from rankkit.cli.registry import Entry, OptionRegistry
from rankkit.cli.runtime_options import backend_option, precision_option, quantize_option, runtime_of
from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.files import check_outputs


@dataclass(frozen=True)
class RetrieveRequest:
    """Options every model shares, plus the model-specific ones that were given (by option name)."""

    index: Path
    topics: Union[Path, Mapping[str, str]]  # the CLI passes the loaded {qid: text}
    output: Path
    k: int
    threads: Optional[int]
    runtag: Optional[str]
    remove_query: bool
    options: dict[str, Any] = field(default_factory=dict)


def _bi_encoders() -> list[str]:
    """Every registered bi-encoder (from the declarations: no torch)."""
    from rankkit.models import specs

    return sorted(name for name, spec in specs().items() if spec.family == "bi-encoder")


RETRIEVERS: OptionRegistry[RetrieveRequest] = OptionRegistry("--model", "model", "models", others=_bi_encoders)
register_retriever = RETRIEVERS.register


BM25_OPTIONS = ("k1", "b", "rm3", "fb_terms", "fb_docs", "original_weight")


@register_retriever(
    "bm25", "Anserini BM25 (optionally + RM3) over a `rankkit index --kind bm25` index", options=BM25_OPTIONS
)
def _retrieve_bm25(request: RetrieveRequest) -> None:
    from rankkit.lexical.search import Bm25Params, retrieve_bm25

    params = Bm25Params(**request.options)
    if not params.rm3 and any(name in request.options for name in ("fb_terms", "fb_docs", "original_weight")):
        raise RankkitError("--fb-terms, --fb-docs and --original-weight need --rm3")
    report = retrieve_bm25(
        request.index,
        request.topics,
        request.output,
        k=request.k,
        params=params,
        threads=request.threads,
        runtag=request.runtag,
        remove_query=request.remove_query,
    )
    removed = f", removed {report.removed_self:,} self-hits" if request.remove_query else ""
    log(
        f"wrote {report.lines:,} lines for {report.queries - len(report.no_hits):,} of "
        f"{report.queries:,} queries "
        f"to {request.output} in {report.seconds:.1f} s ({report.queries_per_second:,.1f} q/s{removed})"
    )


DENSE_OPTIONS = ("nprobe", "batch_size", "device", "max_query_length", "checkpoint", "backend", "quantize", "precision")


def _retrieve_dense(request: RetrieveRequest, model: str) -> None:
    # torch/faiss are imported here, not at CLI start-up, so `rankkit --help` and `eval` stay fast.
    import time

    options = request.options
    # A bad --backend/--quantize/--precision is one line before torch loads.
    runtime = runtime_of(options.get("backend"), options.get("quantize"), request.threads, options.get("precision"))
    from rankkit.dense import iter_dense_search
    from rankkit.formats import write_run

    if request.threads is not None:
        import faiss

        faiss.omp_set_num_threads(request.threads)
    started = time.perf_counter()
    searched = iter_dense_search(
        request.index,
        request.topics,
        k=request.k,
        nprobe=request.options.get("nprobe"),
        remove_query=request.remove_query,
        batch_size=request.options.get("batch_size", 64),
        device=request.options.get("device", "auto"),
        model_name=model,
        max_query_length=request.options.get("max_query_length"),
        checkpoint=request.options.get("checkpoint"),
        runtime=runtime,
    )
    counts = {"queries": 0, "empty": 0}

    def counted() -> Iterator[tuple[str, dict[str, float]]]:  # written as searched: never the whole run in memory
        for qid, docs in searched:
            counts["queries"] += 1
            counts["empty"] += not docs
            yield qid, docs

    lines = write_run(request.output, counted(), request.runtag or model)
    queries = counts["queries"]
    seconds = time.perf_counter() - started
    log(f"wrote {lines:,} lines for {queries - counts['empty']:,} of {queries:,} queries to {request.output} "
        f"in {seconds:.1f} s ({queries / max(seconds, 1e-9):,.1f} q/s)")


def dense_retriever(model: str) -> Entry[RetrieveRequest]:
    """The retrieval entry of a registered bi-encoder ``model`` (repbert, densetrans, a plug-in): any model
    the registry knows as a :class:`~rankkit.models.base.BiEncoder` searches its dense indexes."""
    from rankkit.models import specs

    spec = specs().get(model)
    if spec is None:
        raise RankkitError(f"unknown model {model!r}; known models: {', '.join(['bm25', *_bi_encoders()])}")
    if spec.family != "bi-encoder":
        bi = ", ".join(_bi_encoders())
        raise RankkitError(f"--model {model} is not a first-stage model: retrieve takes bm25 or a bi-encoder ({bi}); "
                           f"re-rank a run with `rankkit rerank --model {model}`")
    return Entry(model, f"{model} bi-encoder over a `rankkit index --kind dense --model {model}` index",
                 lambda request: _retrieve_dense(request, model), frozenset(DENSE_OPTIONS))


def model_of_index(index: Path) -> str:
    """The model an index was built for, when ``--model`` is not given: bm25 for Lucene indexes (rankkit's or
    Pyserini's), the encoder recorded in a dense index's manifest."""
    from rankkit.indexes import MANIFEST_NAME, foreign_manifest, read_manifest

    if not Path(index).exists():
        return "bm25"  # bm25 reports the missing index in its own words, after the topics are read
    if not (Path(index) / MANIFEST_NAME).is_file() and Path(index).is_dir():
        found = foreign_manifest(Path(index), None)
        if found is not None and found["kind"] == "bm25":
            return "bm25"
        if found is not None:
            raise RankkitError(f"{index} is a Pyserini faiss index, which records no encoder: give --model repbert "
                               "--checkpoint ENCODER")
    manifest = read_manifest(index)
    if manifest.get("kind") == "bm25":
        return "bm25"
    if manifest.get("model"):
        return str(manifest["model"])
    raise RankkitError(f"{index}: a {manifest.get('kind')!r} index; give --model")


@app.command("retrieve")
def retrieve_command(
    model: Optional[str] = typer.Option(None, "--model", help="bm25, or a bi-encoder (repbert, densetrans, plug-ins: `rankkit models`) [default: the index's own: bm25 for Lucene indexes, the encoder a dense index records]."),
    index: Path = typer.Option(..., "--index", help="Index directory built by `rankkit index`."),
    topics: Path = typer.Option(
        ..., "--topics", help="Queries: TSV (qid, tab, text), JSONL, TREC SGML topics, a BEIR folder or irds:ID."),
    topic_field: Optional[str] = typer.Option(
        None, "--topic-field", help="TREC topics: title (default), description or narrative."),
    output: Path = typer.Option(..., "--output", "-o", help="Run file to write (.gz compresses)."),
    k: int = typer.Option(1000, "--k", "--hits", help="Documents retrieved per query (--hits: Pyserini's name).", callback=int_range(1)),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Search threads (default: CPU cores); dense: also query encoding's.",
        callback=int_range(1)),
    runtag: Optional[str] = typer.Option(
        None, "--runtag", help="Run tag (last column) (default: the model name)."
    ),
    remove_query: bool = typer.Option(
        False,
        "--remove-query",
        help="Drop a hit whose docid equals its qid (queries that are in the corpus).",
    ),
    k1: Optional[float] = typer.Option(
        None, "--k1", help="bm25: term saturation k1 (default 0.9).", callback=float_range(0), rich_help_panel="BM25"
    ),
    b: Optional[float] = typer.Option(
        None, "--b", help="bm25: length normalisation b (default 0.4).", callback=float_range(0, 1), rich_help_panel="BM25"
    ),
    rm3: bool = typer.Option(
        False,
        "--rm3",
        help="bm25: RM3 pseudo-relevance feedback (index built with --docvectors).",
        rich_help_panel="BM25",
    ),
    fb_terms: Optional[int] = typer.Option(
        None, "--fb-terms", help="bm25 --rm3: expansion terms (default 10).", callback=int_range(1), rich_help_panel="BM25"
    ),
    fb_docs: Optional[int] = typer.Option(
        None, "--fb-docs", help="bm25 --rm3: feedback documents (default 10).", callback=int_range(1), rich_help_panel="BM25"
    ),
    original_weight: Optional[float] = typer.Option(
        None,
        "--original-weight",
        help="bm25 --rm3: weight of the original query (default 0.5).",
        callback=float_range(0, 1), rich_help_panel="BM25",
    ),
    nprobe: Optional[int] = typer.Option(
        None,
        "--nprobe",
        help="repbert/densetrans on an ivfpq index: lists searched (default: as built, 10).",
        callback=int_range(1), rich_help_panel="Dense",
    ),
    batch_size: Optional[int] = typer.Option(
        None, "--batch-size", help="repbert/densetrans: queries per batch (default 64).", callback=int_range(1), rich_help_panel="Dense"
    ),
    device: Optional[str] = typer.Option(
        None, "--device", help="repbert/densetrans: auto, cpu or cuda (default auto).", rich_help_panel="Dense"
    ),
    max_query_length: Optional[int] = typer.Option(
        None,
        "--max-query-length",
        help="repbert/densetrans: query token limit (default: as recorded in the index).",
        callback=int_range(1), rich_help_panel="Dense",
    ),
    checkpoint: Optional[str] = typer.Option(
        None, "--checkpoint",
        help="repbert on a Pyserini faiss index (no rankkit-index.json): the query encoder it was built with (a folder or hub id ORG/NAME[@REVISION]).",
        rich_help_panel="Dense",
    ),
    backend: Optional[str] = backend_option(None),
    quantize: Optional[str] = quantize_option(None),
    precision: Optional[str] = precision_option(None),
) -> None:
    """Retrieve the top K documents for every query in TOPICS and write a TREC run.

    A query with no hits is reported (warning with a count), not silently dropped.
    """
    if model is None:  # BM25's own options say bm25; otherwise the index says what it was built for
        bm25_given = any(value not in (None, False) for value in (k1, b, rm3, fb_terms, fb_docs, original_weight))
        model = "bm25" if bm25_given else model_of_index(index)
    chosen = RETRIEVERS.get(model) if model == "bm25" else dense_retriever(model)
    options = RETRIEVERS.given_options(
        chosen,
        {
            "k1": k1,
            "b": b,
            "rm3": rm3,
            "fb_terms": fb_terms,
            "fb_docs": fb_docs,
            "original_weight": original_weight,
            "nprobe": nprobe,
            "batch_size": batch_size,
            "device": device,
            "max_query_length": max_query_length,
            "checkpoint": checkpoint,
            "backend": backend,
            "quantize": quantize,
            "precision": precision,
        },
    )
    # Before searching: the run must be writable and must not replace the topics.
    check_outputs([("--output", output)], [("--topics", topics), ("--index", index)])
    from rankkit.formats.sources import load_topics

    queries = load_topics(topics, topic_field)
    chosen.run(RetrieveRequest(index, queries, output, k, threads, runtag, remove_query, options))
