"""TREC run files: ``qid Q0 docid rank score tag``, whitespace separated, optionally gzipped.

A run in memory is ``dict[qid, dict[docid, score]]`` (the ir_measures / pytrec_eval shape), with
queries in the order they first appear. Every run rankkit writes goes through :func:`write_run`,
which sorts the trec_eval way (score descending, ties by docid descending) and numbers ranks 1..n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

from rankkit.errors import InputError
from rankkit.formats._files import PathLike, atomic_write, iter_lines

Run = dict[str, dict[str, float]]


@dataclass(frozen=True)
class RunLine:
    """One parsed line of a run file, with its line number for error messages."""

    qid: str
    docid: str
    rank: int
    score: float
    tag: str
    line: int


def parse_run_line(path: PathLike, number: int, text: str) -> RunLine:
    """Parse one run line or raise ``InputError`` naming file, line and problem."""
    fields = text.split()
    if len(fields) != 6:
        raise InputError(path, number, f"expected 6 columns 'qid Q0 docid rank score tag', found {len(fields)}")
    qid, _, docid, rank_text, score_text, tag = fields
    try:
        rank = int(rank_text)
    except ValueError:
        raise InputError(path, number, f"rank {rank_text!r} is not an integer") from None
    try:
        score = float(score_text)
    except ValueError:
        raise InputError(path, number, f"score {score_text!r} is not a number") from None
    return RunLine(qid, docid, rank, score, tag, number)


def iter_run_lines(path: PathLike) -> Iterator[RunLine]:
    """Stream the lines of a run file as :class:`RunLine` (no duplicate or finiteness checks)."""
    for number, text in iter_lines(path, skip_comments=True):
        yield parse_run_line(path, number, text)


def read_run(path: PathLike, *, depth: int | None = None) -> Run:
    """Read a whole run; duplicate (qid, docid) pairs and non-finite scores are errors.

    ``depth`` keeps each query's top ``depth`` documents in trec_eval order.
    """
    run: Run = {}
    isfinite = math.isfinite
    # The hot loop parses inline (no RunLine objects): runs can hold millions of lines.
    for number, text in iter_lines(path, skip_comments=True):
        fields = text.split()
        try:
            qid, _, docid, rank_text, score_text, _tag = fields
            int(rank_text)
            score = float(score_text)
        except ValueError:
            row = parse_run_line(path, number, text)  # raises the precise error
            raise AssertionError(f"unreachable: {row}") from None
        if not isfinite(score):
            raise InputError(path, number, f"score {score} is not finite")
        docs = run.get(qid)
        if docs is None:
            docs = run[qid] = {}
        if docid in docs:
            raise InputError(path, number, f"duplicate document {docid!r} for query {qid!r}")
        docs[docid] = score
    if depth is not None:
        run = {qid: dict(sort_ranking(docs)[:depth]) for qid, docs in run.items()}
    return run


def read_run_tag(path: PathLike) -> str:
    """The tag (last column) of a run's first line."""
    return next(iter_run_lines(path)).tag


def iter_run_queries(path: PathLike) -> Iterator[tuple[str, list[tuple[str, float]]]]:
    """Stream a run query by query, each ranking in trec_eval order.

    Memory holds one query at a time when the file groups each query's lines together (as every
    run writer does); a query whose lines reappear later is an error rather than a silent split.
    """
    finished: set[str] = set()
    current: str | None = None
    docs: dict[str, float] = {}
    for row in iter_run_lines(path):
        if row.qid != current:
            if current is not None:
                finished.add(current)
                yield current, sort_ranking(docs)
            if row.qid in finished:
                raise InputError(path, row.line, f"lines of query {row.qid!r} are not contiguous; sort the run by qid")
            current, docs = row.qid, {}
        if not math.isfinite(row.score):
            raise InputError(path, row.line, f"score {row.score} is not finite")
        if row.docid in docs:
            raise InputError(path, row.line, f"duplicate document {row.docid!r} for query {row.qid!r}")
        docs[row.docid] = row.score
    if current is not None:
        yield current, sort_ranking(docs)


def sort_ranking(docs: Mapping[str, float] | Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """Order ``(docid, score)`` pairs as trec_eval does: score descending, ties by docid descending."""
    items = docs.items() if isinstance(docs, Mapping) else docs
    return sorted(items, key=lambda item: (item[1], item[0]), reverse=True)


def format_score(score: float) -> str:
    """Scores are written with enough digits to round-trip exactly (repr of the float)."""
    return repr(float(score))


def write_run(
    path: PathLike,
    run: Mapping[str, Mapping[str, float]] | Iterable[tuple[str, Mapping[str, float]]],
    tag: str = "rankkit",
    *,
    k: int | None = None,
) -> int:
    """Write a run atomically, each query sorted the trec_eval way with ranks 1..n; returns lines written.

    ``run`` may be a mapping or a stream of ``(qid, docs)`` pairs (so callers can write as they go).
    ``k`` truncates each query to its top ``k``.
    """
    if any(ch.isspace() for ch in tag) or not tag:
        raise ValueError(f"run tag must be one non-empty word, got {tag!r}")
    items = run.items() if isinstance(run, Mapping) else run
    written = 0
    with atomic_write(path) as out:
        for qid, docs in items:
            ranking = sort_ranking(docs)
            if k is not None:
                ranking = ranking[:k]
            for rank, (docid, score) in enumerate(ranking, start=1):
                out.write(f"{qid} Q0 {docid} {rank} {format_score(score)} {tag}\n")
            written += len(ranking)
    return written
