"""``rankkit mine``: hard-negative training groups from a first-stage run (DenseTrans §4.1, §4.4.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rankkit.cli.app import app, int_range
from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.files import check_outputs, open_binary

# Importing rankkit.training.mine runs rankkit/training/__init__.py, which loads torch: done inside
# the command, so that every other subcommand (and --help) starts in a fraction of a second.
STRATEGIES: tuple[str, ...] = ("random", "top")


@app.command("mine")
def mine_command(
    run: Optional[Path] = typer.Option(None, "--run", help="First-stage run to draw negatives from (e.g. BM25)."),
    qrels: Optional[Path] = typer.Option(
        None, "--qrels", help="Judgments: positives are rel >= --min-rel (TREC or BEIR qrels, BEIR folder, irds:ID)."),
    topics: Optional[Path] = typer.Option(
        None, "--topics", "--queries", help="Query texts (TSV, JSONL, TREC SGML, BEIR folder or irds:ID)."),
    topic_field: Optional[str] = typer.Option(
        None, "--topic-field", help="TREC topics: title (default), description or narrative."),
    triples: Optional[Path] = typer.Option(
        None, "--triples",
        help="Instead of --run/--qrels: MS MARCO triples to turn into groups, as text (query, positive, negative) "
        "or qidpidtriples (qid, pid, pid; texts from --corpus/--collection and --topics/--queries)."),
    output: Path = typer.Option(
        ..., "--output", "-o", help="Training groups to write (JSONL; .gz compresses)."
    ),
    corpus: Optional[Path] = typer.Option(
        None, "--corpus", "--collection", help="Passage texts from this corpus (file, BEIR folder or irds:ID)..."),
    index: Optional[Path] = typer.Option(
        None, "--index", help="...or from this BM25 index's stored raw text."
    ),
    cache_dir: Optional[Path] = typer.Option(
        None, "--cache-dir",
        help="Where the corpus's docid table is cached (default: $RANKKIT_CACHE_DIR/docstore, else "
        "${XDG_CACHE_HOME:-~/.cache}/rankkit/docstore; never beside the corpus)."
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
    ids_only: bool = typer.Option(
        False, "--ids-only", help="Write the groups without texts (qid, docids, labels, scores): a few hundred MB for "
        "MS MARCO instead of ~12 GB; rankkit train --collection --queries looks the texts up."),
) -> None:
    """Write one training group per query: its judged positives and hard negatives from RUN.

    Negatives are never judged relevant at any grade (rel > 0). Output is the JSONL `rankkit train` reads.
    When no group can be built (no query with a positive, topics and text), nothing is written and
    the exit code is 2.

    With --triples, MS MARCO triples become groups instead (one per line): text triples as they are,
    qidpidtriples with their texts from --collection/--corpus and --queries/--topics.
    """
    from rankkit.docstore import open_docstore
    from rankkit.formats.sources import load_qrels, load_topics, resolve_corpus
    from rankkit.training.mine import MineConfig, mine

    if triples is not None:
        if ids_only:
            raise RankkitError("--ids-only does not apply to --triples: rankkit train reads qidpidtriples as they are "
                               "(--train TRIPLES --collection --queries), and text triples hold no ids")
        _mine_triples(triples, run, qrels, topics, topic_field, corpus, index, cache_dir, output)
        return
    if run is None or qrels is None or topics is None:
        raise RankkitError("give --run RUN, --qrels QRELS and --topics TOPICS (or --triples TRIPLES)")

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
    open_binary(run).close()  # before building a (possibly slow) docid table
    judged = load_qrels(qrels)
    queries = load_topics(topics, topic_field)
    corpus = resolve_corpus(corpus) if corpus is not None else None
    with open_docstore(corpus=corpus, index=index, cache_dir=cache_dir) as store:
        report = mine(run, judged, queries, store, output, config, ids_only=ids_only)
    for line in report.lines(teacher_list or negatives):
        log(line)
    log(f"wrote {output}")


def _mine_triples(triples: Path, run: Optional[Path], qrels: Optional[Path], topics: Optional[Path], topic_field: Optional[str],
                  corpus: Optional[Path], index: Optional[Path], cache_dir: Optional[Path], output: Path) -> None:
    """``--triples``: MS MARCO triples (text or qidpidtriples) written as rankkit training groups."""
    from rankkit.docstore import open_docstore
    from rankkit.formats.groups import is_id_triples_file, iter_groups, write_groups
    from rankkit.formats.sources import load_topics, resolve_corpus
    from rankkit.training.triples import groups_from_id_triples

    if run is not None or qrels is not None:
        raise RankkitError("--triples replaces --run and --qrels (the triples name the positive and the negative)")
    check_outputs([("--output", output)], [("--triples", triples), ("--topics", topics), ("--corpus", corpus)])
    if not is_id_triples_file(triples):
        written = write_groups(output, iter_groups(triples))
        log(f"wrote {written:,} groups (one per text triple) to {output}")
        return
    if (corpus is None) == (index is None) or topics is None:
        raise RankkitError("qidpidtriples hold ids: give the query texts with --topics/--queries and the passage texts "
                           "with --corpus/--collection CORPUS or --index DIR")
    queries = load_topics(topics, topic_field)
    corpus = resolve_corpus(corpus) if corpus is not None else None
    with open_docstore(corpus=corpus, index=index, cache_dir=cache_dir) as store:
        written = write_groups(output, groups_from_id_triples(triples, store, queries))
    log(f"wrote {written:,} groups (one per qidpidtriple) to {output}")
