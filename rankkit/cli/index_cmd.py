"""``rankkit index --kind KIND``: build an index of a corpus (``bm25`` now; ``dense`` registers later).

Each kind registers a build function and the kind-specific options it accepts in
:data:`INDEX_KINDS`; an option of another kind is a one-line error, not silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from rankkit.cli.app import app
from rankkit.console import log
from rankkit.errors import RankkitError


@dataclass(frozen=True)
class IndexRequest:
    """Options every kind shares, plus the kind-specific ones that were given (by option name)."""

    corpus: Path
    index: Path
    threads: Optional[int]
    force: bool
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class IndexKind:
    """A registered ``--kind``: its help line, build function and the kind-specific options it takes."""

    name: str
    help: str
    build: Callable[[IndexRequest], None]
    options: frozenset[str] = frozenset()


INDEX_KINDS: dict[str, IndexKind] = {}


def register_index_kind(
    name: str, help: str, options: tuple[str, ...] = ()
) -> Callable[[Callable[[IndexRequest], None]], Callable[[IndexRequest], None]]:
    """Decorator adding a ``--kind NAME`` builder to ``rankkit index``."""

    def add(build: Callable[[IndexRequest], None]) -> Callable[[IndexRequest], None]:
        INDEX_KINDS[name] = IndexKind(name, help, build, frozenset(options))
        return build

    return add


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


def kind_of(name: str) -> IndexKind:
    """The registered kind ``name``, or a one-line error listing the known ones."""
    if name not in INDEX_KINDS:
        raise RankkitError(f"unknown index kind {name!r}; known kinds: {', '.join(sorted(INDEX_KINDS))}")
    return INDEX_KINDS[name]


def given_options(kind: IndexKind, options: dict[str, Any]) -> dict[str, Any]:
    """Kind-specific options that were given (not None/False), checked against what ``kind`` accepts."""
    given = {name: value for name, value in options.items() if value not in (None, False)}
    for name in given:
        if name not in kind.options:
            owners = sorted(k.name for k in INDEX_KINDS.values() if name in k.options)
            raise RankkitError(
                f"--{name.replace('_', '-')} applies to --kind {' or '.join(owners)}, not {kind.name}"
            )
    return given


@app.command("index")
def index_command(
    kind: str = typer.Option("bm25", "--kind", help=f"Index kind: {', '.join(sorted(INDEX_KINDS))}."),
    corpus: Path = typer.Option(
        ...,
        "--corpus",
        help="Corpus: JSONL (id/contents, BEIR _id/title/text) or TSV (id, tab, text); .gz ok.",
    ),
    index: Path = typer.Option(..., "--index", help="Index directory to create."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Indexing threads [default: CPU cores]."),
    force: bool = typer.Option(False, "--force", help="Replace an existing non-empty index directory."),
    docvectors: bool = typer.Option(
        False, "--docvectors", help="bm25: store document vectors (needed by --rm3)."
    ),
) -> None:
    """Index CORPUS into an index directory that records how it was built (rankkit-index.json).

    The corpus is streamed (never loaded whole); the index is built in a temporary folder and
    renamed into place, so an interrupted build leaves nothing half-built.
    """
    chosen = kind_of(kind)
    options = given_options(chosen, {"docvectors": docvectors})
    chosen.build(IndexRequest(corpus, index, threads, force, options))
