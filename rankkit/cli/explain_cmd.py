"""``rankkit explain``: a preference-matrix model's matrix for one query as a heat map (Luo et al., 2022, "MatRank:
Text Re-ranking by Latent Preference Matrix", Figure 2; MatRank-Split's piece matrix, Figure 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rankkit.cli.app import app
from rankkit.cli.runtime_options import (
    backend_option,
    precision_option,
    quantize_option,
    runtime_of,
    threads_option,
)
from rankkit.errors import RankkitError


@app.command("explain")
def explain_command(
    model: str = typer.Option("matrank", "--model", help="A model with a preference matrix: matrank, matrank-row, matrank-col, matrank-split (its piece matrix), or a registered plug-in whose output is a PreferenceOutput."),
    checkpoint: str = typer.Option(..., "--checkpoint", help="A rankkit checkpoint: a folder written by rankkit train or a hub id ORG/NAME[@REVISION]."),
    run: Path = typer.Option(..., "--run", help="Run holding the query's candidates."),
    topics: Path = typer.Option(..., "--topics", help="Query texts (TSV, JSONL, TREC SGML, BEIR folder or irds:ID)."),
    topic_field: Optional[str] = typer.Option(None, "--topic-field", help="TREC topics: title (default), description or narrative."),
    qid: str = typer.Option(..., "--qid", help="The query to explain."),
    output: Path = typer.Option(..., "--output", "-o", help="Figure to write (.png, .pdf or .svg)."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Passage texts from this corpus file..."),
    index: Optional[Path] = typer.Option(None, "--index", help="...or from this BM25 index's stored raw text."),
    depth: int = typer.Option(20, "--depth", help="Candidates in the matrix (the run's top DEPTH; matrank-split: documents, each drawn as its pieces)."),
    top: int = typer.Option(5, "--top", help="Passages printed to the terminal."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    backend: str = backend_option(),
    quantize: str = quantize_option(),
    threads: Optional[int] = threads_option(),
    precision: str = precision_option(),
) -> None:
    """Draw the preference matrix (MatRank's S, Eq. 3; MatRank-Split's piece matrix, Eq. 9) with the candidates
    labelled and the row/column means beside it; print the top candidates."""
    from rich.console import Console
    from rich.table import Table

    runtime = runtime_of(backend, quantize, threads, precision)  # a bad value: one line, before torch loads
    from rankkit.docstore import open_docstore
    from rankkit.reranking.explain import check_explainable, explain_query, plot_explanation

    check_explainable(model)
    if (corpus is None) == (index is None):
        raise RankkitError("give passage texts with --corpus CORPUS or --index DIR (exactly one)")
    from rankkit.files import check_outputs

    check_outputs([("--output", output)], [("--run", run), ("--topics", topics), ("--corpus", corpus)])
    from rankkit.runtime import InferenceSession, load_for_inference

    session = InferenceSession.of(load_for_inference(model, checkpoint, runtime, device))
    from rankkit.formats.sources import load_topics, resolve_corpus

    queries = load_topics(topics, topic_field)
    corpus = resolve_corpus(corpus) if corpus is not None else None
    with open_docstore(corpus=corpus, index=index) as store:
        expl = explain_query(session, run, queries, store, qid, depth=depth)
    plot_explanation(expl, output)
    table = Table(title=f"query {expl.qid}: {expl.query}", show_lines=False)
    for name in ("rank", "was", "docid", "vote", "beta", "omega", "passage"):
        table.add_column(name, overflow="fold")
    for c in expl.candidates[:top]:
        text = c.text if len(c.text) <= 200 else c.text[:197] + "..."
        table.add_row(str(c.rank), str(c.input_rank), c.docid, f"{c.vote:.3f}", f"{c.beta:.4f}", f"{c.omega:.4f}", text)
    Console(soft_wrap=True).print(table)
    Console(stderr=True).print(f"wrote {output}", highlight=False)
