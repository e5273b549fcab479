"""``rankkit mine``: hard-negative training groups from a first-stage run (DenseTrans §4.1, §4.4.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rankkit.cli.app import app, int_range
from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.formats._files import check_outputs, open_binary

# Importing rankkit.training.mine runs rankkit/training/__init__.py, which loads torch: done inside
# the command, so that every other subcommand (and --help) starts in a fraction of a second.
STRATEGIES: tuple[str, ...] = ("random", "top")


@app.command("mine")
def mine_command(
    run: Path = typer.Option(..., "--run", help="First-stage run to draw negatives from (e.g. BM25)."),
    qrels: Path = typer.Option(..., "--qrels", help="Judgments: positives are rel >= --min-rel."),
    topics: Path = typer.Option(..., "--topics", help="Query texts (TSV or JSONL)."),
    output: Path = typer.Option(
        ..., "--output", "-o", help="Training groups to write (JSONL; .gz compresses)."
    ),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Passage texts from this corpus file..."),
    index: Optional[Path] = typer.Option(
        None, "--index", help="...or from this BM25 index's stored raw text."
    ),
    cache_dir: Optional[Path] = typer.Option(
        None, "--cache-dir",
        help="Where the corpus's docid table is cached (default: $RANKKIT_CACHE_DIR or ~/.cache/rankkit/docstore; "
        "never beside the corpus)."
    ),
    depth: int = typer.Option(100, "--depth", help="Negatives come from the run's top DEPTH.", callback=int_range(1)),
    negatives: int = typer.Option(8, "--negatives", help="Negatives per query.", callback=int_range(1)),
    strategy: str = typer.Option(
        "random", "--strategy", help=f"How negatives are drawn: {', '.join(STRATEGIES)}."
    ),
    skip_top: int = typer.Option(
        0, "--skip-top", help="Ignore the run's first N ranks (unjudged false negatives).", callback=int_range(0)
    ),
    min_rel: int = typer.Option(
        1, "--min-rel", help="Lowest relevance grade that counts as positive.", callback=int_range(1)),
    seed: int = typer.Option(0, "--seed", help="Seed of --strategy random (mixed with each qid)."),
    teacher_list: Optional[int] = typer.Option(
        None, "--teacher-list", help="Instead of sampled negatives: RUN's whole top K per query with its scores, "
        "judged ones as graded positives (teacher lists for rankkit train --whole-lists).", callback=int_range(1)),
) -> None:
    """Write one training group per query: its judged positives and hard negatives from RUN.

    Negatives are never judged relevant at any grade (rel > 0). Output is the JSONL `rankkit train` reads.
    When no group can be built (no query with a positive, topics and text), nothing is written and
    the exit code is 2.
    """
    from rankkit.docstore import open_docstore
    from rankkit.training.mine import MineConfig, mine

    config = MineConfig(
        depth=depth,
        negatives=negatives,
        strategy=strategy,  # type: ignore[arg-type]
        skip_top=skip_top,
        min_rel=min_rel,
        seed=seed,
        teacher_list=teacher_list,
    )
    config.check()
    if (corpus is None) == (index is None):
        raise RankkitError("give passage texts with --corpus CORPUS or --index DIR (exactly one)")
    if index is not None and cache_dir is not None:
        raise RankkitError("--cache-dir applies to --corpus only")
    check_outputs(
        [("--output", output)],
        [("--run", run), ("--qrels", qrels), ("--topics", topics), ("--corpus", corpus), ("--index", index)],
    )
    for path in (run, qrels, topics):  # before building a (possibly slow) docid table
        open_binary(path).close()
    with open_docstore(corpus=corpus, index=index, cache_dir=cache_dir) as store:
        report = mine(run, qrels, topics, store, output, config)
    for line in report.lines(teacher_list or negatives):
        log(line)
    log(f"wrote {output}")
