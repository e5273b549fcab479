"""TREC run files: ``qid Q0 docid rank score tag``, whitespace separated, optionally gzipped.

A run in memory is ``dict[qid, dict[docid, score]]`` (the ir_measures / pytrec_eval shape), with
queries in the order they first appear. Every run rankkit writes goes through :func:`write_run`,
which sorts the trec_eval way (score descending, ties by docid descending) and numbers ranks 1..n.

MS MARCO's 3-column runs (``qid<TAB>docid<TAB>rank``, the leaderboard format) are read too, told
apart by their column count on the first line: each line gets the score ``1/rank`` (so the trec_eval
order is the rank order) and the tag ``msmarco``. One file holds one shape; a line of the other
shape is an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from rankkit.errors import InputError, excerpt
from rankkit.files import PathLike, atomic_write, iter_lines
from rankkit.formats.ids import all_valid, check_id

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


#: The tag given to the lines of a 3-column MS MARCO run.
MSMARCO_TAG = "msmarco"
_SHAPES = {6: "6 columns 'qid Q0 docid rank score tag'", 3: "3 columns 'qid docid rank' (MS MARCO run)"}


def parse_run_line(path: PathLike, number: int, text: str, columns: int | None = None) -> RunLine:
    """Parse one run line or raise ``InputError`` naming file, line and problem.

    ``columns`` is the file's shape (6: TREC, 3: MS MARCO), fixed by its first line; None accepts either.
    """
    fields = text.split()
    if len(fields) not in _SHAPES or (columns is not None and len(fields) != columns):
        expected = _SHAPES[columns] if columns is not None else f"{_SHAPES[6]} (or {_SHAPES[3]})"
        where = " as on the first line" if columns is not None else ""
        raise InputError(path, number, f"expected {expected}{where}, found {len(fields)}")
    if len(fields) == 3:
        qid, docid, rank_text = fields
        try:
            rank = int(rank_text)
        except ValueError:
            raise InputError(path, number, f"rank {rank_text!r} of a 3-column MS MARCO run is not an integer") from None
        if rank < 1:
            raise InputError(path, number, f"rank {rank} of a 3-column MS MARCO run must be at least 1")
        return RunLine(qid, docid, rank, 1.0 / rank, MSMARCO_TAG, number)
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
    columns: int | None = None
    for number, text in iter_lines(path, skip_comments=True):
        row = parse_run_line(path, number, text, columns)
        columns = columns or len(text.split())
        yield row


def iter_run_scores(path: PathLike) -> Iterator[tuple[int, str, str, float]]:
    """Stream ``(line number, qid, docid, score)`` of a run file; a non-finite score is an error, a duplicate is not
    checked here (:func:`read_run` does)."""
    isfinite = math.isfinite
    # The hot loop parses inline (no RunLine objects): runs can hold millions of lines.
    columns = 0
    for number, text in iter_lines(path, skip_comments=True):
        fields = text.split()
        if not columns:
            columns = 3 if len(fields) == 3 else 6
        try:
            if columns == 3:
                row = parse_run_line(path, number, text, 3)
                qid, docid, score = row.qid, row.docid, row.score
            else:
                qid, _, docid, rank_text, score_text, _tag = fields
                int(rank_text)
                score = float(score_text)
        except ValueError:
            row = parse_run_line(path, number, text, columns)  # raises the precise error
            raise AssertionError(f"unreachable: {row}") from None
        if not isfinite(score):
            raise InputError(path, number, f"score {score} is not finite")
        yield number, qid, docid, score


def read_run(path: PathLike, *, depth: int | None = None) -> Run:
    """Read a whole run; duplicate (qid, docid) pairs and non-finite scores are errors.

    ``depth`` keeps each query's top ``depth`` documents in trec_eval order.
    """
    run: Run = {}
    for number, qid, docid, score in iter_run_scores(path):
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


class ScatteredQueryError(InputError):
    """A query's lines come back after another query's: a reader that streams query by query cannot go on."""


def iter_run_queries(path: PathLike) -> Iterator[tuple[str, list[tuple[str, float]]]]:
    """Stream a run query by query, each ranking in trec_eval order.

    Memory holds one query at a time when the file groups each query's lines together (as every
    run writer does); a query whose lines reappear later is an error rather than a silent split.
    """
    finished: set[str] = set()
    current: str | None = None
    docs: dict[str, float] = {}
    isfinite = math.isfinite
    columns = 0
    # The hot loop parses inline, as read_run does (no RunLine per line); a bad line is re-parsed
    # by parse_run_line for its precise error.
    for number, text in iter_lines(path, skip_comments=True):
        fields = text.split()
        if not columns:
            columns = 3 if len(fields) == 3 else 6
        try:
            if columns == 3 or len(fields) != 6:
                row = parse_run_line(path, number, text, columns)
                qid, docid, score = row.qid, row.docid, row.score
            else:
                qid, _, docid, rank_text, score_text, _tag = fields
                int(rank_text)
                score = float(score_text)
        except ValueError:
            parse_run_line(path, number, text, columns)  # raises the precise error
            raise AssertionError("unreachable") from None
        if qid != current:
            if current is not None:
                finished.add(current)
                yield current, sort_ranking(docs)
            if qid in finished:
                raise ScatteredQueryError(path, number, f"lines of query {qid!r} are not contiguous; sort the run by qid")
            current, docs = qid, {}
        if not isfinite(score):
            raise InputError(path, number, f"score {score} is not finite")
        if docid in docs:
            raise InputError(path, number, f"duplicate document {docid!r} for query {qid!r}")
        docs[docid] = score
    if current is not None:
        yield current, sort_ranking(docs)


def count_run_queries(path: PathLike) -> int | None:
    """How many query blocks a run holds (a fast pass reading only the first column; for progress totals).

    None for anything but a regular file: a pipe or FIFO (``--run <(zcat run.gz)``) can be read once only.
    """
    if not Path(path).is_file():
        return None
    count = 0
    previous: str | None = None
    for _, text in iter_lines(path, skip_comments=True):
        qid = text.split(None, 1)[0]
        if qid != previous:
            count += 1
            previous = qid
    return count


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
            text, count = format_ranking(qid, docs, tag, k=k)
            out.write(text)
            written += count
    return written


def format_ranking(qid: str, docs: Mapping[str, float], tag: str, *, k: int | None = None) -> tuple[str, int]:
    """One query's run lines, sorted the trec_eval way and ranked 1..n (top ``k``), and how many.

    Every id is checked (:mod:`rankkit.formats.ids`): a run rankkit writes always reads back as written,
    whatever path its ids came by (the readers check them too, with the file and line)."""
    ranking = sort_ranking(docs)
    if k is not None:
        ranking = ranking[:k]
    if not all_valid([qid, *(docid for docid, _ in ranking)]):
        check_id(qid, "query id")
        for docid, _ in ranking:
            check_id(docid, f"document id (query {excerpt(qid)})")
    # One string per query (format_score inlined: repr of the float): runs hold millions of lines.
    return "".join([f"{qid} Q0 {docid} {rank} {float(score)!r} {tag}\n"
                    for rank, (docid, score) in enumerate(ranking, start=1)]), len(ranking)
