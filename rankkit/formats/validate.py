"""Checks of TREC run files, lenient so that one pass reports every problem (``rankkit validate``).

:func:`validate_run` reads a run line by line with :func:`rankkit.formats.runs.parse_run_line`,
records each problem with its line number instead of stopping at the first, and can write a
cleaned copy in the same pass (malformed and non-finite lines dropped, duplicates keeping their
best score, sorted and ranked 1..n as :func:`rankkit.formats.write_run` writes). It holds one
query's lines at a time (runs of 50M lines validate in flat memory).

Severities: ``error`` (the strict readers of rankkit reject it: malformed line, duplicate pair,
non-finite score, bytes that are not UTF-8, empty file), ``warning`` (accepted, but evaluation would not measure what the file
seems to say: rank column contradicting the score order, a query split over several blocks,
a query without judgments) and ``info`` (worth knowing, never a failure: judged queries without
results, several run tags). A report is clean when it has no error and no warning.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

from rankkit.errors import InputError, RankkitError
from rankkit.files import PathLike, atomic_write, decode_line, iter_raw_lines, open_binary
from rankkit.formats.sources import load_qrels
from rankkit.formats.runs import format_ranking, parse_run_line, sort_ranking

SEVERITIES: tuple[str, ...] = ("error", "warning", "info")


@dataclass(frozen=True)
class Problem:
    """One finding: ``kind`` is a stable key (e.g. ``duplicate``), ``line`` is None for file-wide ones."""

    path: str
    line: int | None
    severity: str
    kind: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.severity}: {self.message} [{self.kind}]"


@dataclass
class ValidationReport:
    """What :func:`validate_run` found, the size of the cleaned run, and what ``--fix`` wrote."""

    path: str
    problems: list[Problem] = field(default_factory=list)
    lines: int = 0
    tag: str | None = None
    #: Queries and (qid, docid) pairs of the cleaned run.
    queries: int = 0
    pairs: int = 0
    #: Lines of the fixed copy (``fix``), or None when none was written (none asked for, or no valid line).
    fixed_lines: int | None = None

    @property
    def ok(self) -> bool:
        """True when there is nothing but ``info`` findings."""
        return not any(p.severity != "info" for p in self.problems)

    def count(self, severity: str) -> int:
        """Number of findings of one severity."""
        return sum(1 for p in self.problems if p.severity == severity)

    @property
    def kinds(self) -> set[str]:
        """The distinct kinds of problem found."""
        return {p.kind for p in self.problems}

    def summary(self) -> str:
        """One line: verdict, counts of findings, size of the run."""
        verdict = "ok" if self.ok else ("INVALID" if self.count("error") else "WARNINGS")
        return (
            f"{self.path}: {verdict}: {self.count('error')} errors, {self.count('warning')} warnings, "
            f"{self.count('info')} info; {self.lines} lines, {self.queries} queries, "
            f"{self.pairs} valid (qid, docid) pairs"
        )


@dataclass
class _Entry:
    score: float
    rank: int
    line: int


class _SplitQuery(Exception):
    """A query's lines come back after another query's: the streaming pass starts over, holding every query."""


class _NothingToFix(Exception):
    """No valid line: the fixed copy is abandoned (never an empty run)."""


def _ids(qids: list[str], limit: int = 10) -> str:
    shown = ", ".join(qids[:limit])
    return shown + (f", ... ({len(qids) - limit} more)" if len(qids) > limit else "")


def validate_run(
    path: PathLike,
    qrels: Mapping[str, Mapping[str, int]] | PathLike | None = None,
    *,
    on_lines: Callable[[int], None] | None = None,
    fix: PathLike | None = None,
) -> ValidationReport:
    """Check a run file and return every problem found, with line numbers.

    ``qrels`` (a mapping or a qrels file) adds the checks "query has no judgments" (warning) and
    "judged query has no results" (info). A missing or unreadable run or qrels file raises
    :class:`InputError` (exit 2 in the CLI); an empty run is a reported problem, not an exception.
    ``on_lines(n)`` is called every 10,000 lines read and at the end (for progress bars).

    ``fix`` writes the cleaned copy in the same pass (atomically; it may be ``path`` itself):
    malformed and non-finite lines dropped, duplicates keeping their best score, each query sorted
    the trec_eval way and ranked 1..n, the first run tag kept. No valid line: nothing is written
    (``fixed_lines`` stays None).

    Memory holds one query's lines at a time when each query's lines are contiguous (as every run
    writer makes them), plus a line number per query; a file with a query split over several blocks
    is read again holding every query (the split is reported as a warning).
    """
    open_binary(path).close()  # a missing file is an exception, not a finding
    judged = qrels if qrels is None or isinstance(qrels, Mapping) else load_qrels(qrels)
    try:
        return _validate(path, judged, on_lines, fix, stream=True)
    except _SplitQuery:
        return _validate(path, judged, on_lines, fix, stream=False)


def _validate(path: PathLike, judged: Mapping[str, Mapping[str, int]] | None, on_lines: Callable[[int], None] | None,
              fix: PathLike | None, *, stream: bool) -> ValidationReport:
    label = str(path)
    report = ValidationReport(label)

    def add(line: int | None, severity: str, kind: str, message: str) -> None:
        report.problems.append(Problem(label, line, severity, kind, message))

    blocks: dict[str, dict[str, _Entry]] = {}  # queries still open (streaming: the current one only)
    first_line: dict[str, int] = {}
    tags: dict[str, int] = {}
    empty = False
    try:
        with atomic_write(fix) if fix is not None else contextlib.nullcontext() as out:

            def finish(qid: str) -> None:
                docs = blocks.pop(qid)
                _check_rank_order(qid, docs, add)
                report.queries += 1
                report.pairs += len(docs)
                if out is not None:
                    text, count = format_ranking(qid, {docid: e.score for docid, e in docs.items()},
                                                 next(iter(tags)))
                    out.write(text)
                    report.fixed_lines = (report.fixed_lines or 0) + count

            previous_qid: str | None = None
            split_reported: set[str] = set()
            columns: int | None = None
            try:
                for number, text in _lenient_lines(path, add):
                    report.lines += 1
                    if on_lines is not None and report.lines % 10_000 == 0:
                        on_lines(10_000)
                    try:
                        row = parse_run_line(path, number, text, columns)
                    except InputError as err:
                        add(number, "error", "malformed", err.problem)
                        continue
                    columns = columns or len(text.split())  # the first good line fixes the shape (TREC or MS MARCO)
                    tags.setdefault(row.tag, number)
                    if row.qid != previous_qid:
                        if stream and previous_qid is not None and previous_qid in blocks:
                            finish(previous_qid)
                        if row.qid in first_line and row.qid not in split_reported:
                            if stream:
                                raise _SplitQuery
                            split_reported.add(row.qid)
                            add(number, "warning", "split-query",
                                f"lines of query {row.qid!r} are not contiguous (its first block starts at line "
                                f"{first_line[row.qid]}); rankkit's streaming readers reject this")
                    previous_qid = row.qid
                    if not math.isfinite(row.score):
                        add(number, "error", "non-finite",
                            f"score {row.score} of document {row.docid!r} is not finite")
                        continue
                    docs = blocks.setdefault(row.qid, {})
                    first_line.setdefault(row.qid, number)
                    if row.docid in docs:
                        kept = docs[row.docid]
                        add(number, "error", "duplicate",
                            f"duplicate document {row.docid!r} for query {row.qid!r} (first at line {kept.line})")
                        if row.score > kept.score:
                            docs[row.docid] = _Entry(row.score, row.rank, number)
                        continue
                    docs[row.docid] = _Entry(row.score, row.rank, number)
            except InputError as err:
                if err.problem != "file is empty" or report.lines:
                    raise
                add(None, "error", "empty", "file is empty (no run lines)")
                empty = True
                raise _NothingToFix from None
            if on_lines is not None:
                on_lines(report.lines % 10_000)
            if len(tags) > 1:
                add(None, "info", "multiple-tags",
                    f"{len(tags)} different run tags: {_ids(list(tags))}; "
                    f"--fix keeps the first, {next(iter(tags))!r}")
            report.tag = next(iter(tags), None)
            for qid in list(blocks):
                finish(qid)
            if not report.queries:
                add(None, "error", "empty", "no valid run lines")
                raise _NothingToFix  # leaves the atomic write: its temporary file is removed
    except _NothingToFix:
        report.fixed_lines = None
        if empty:
            return report

    if judged is not None:
        for qid in first_line:
            if qid not in judged:
                add(first_line[qid], "warning", "unjudged-query",
                    f"query {qid!r} has no judgments in the qrels (trec_eval skips it)")
        missing = [qid for qid in judged if qid not in first_line]
        if missing:
            add(None, "info", "no-results",
                f"{len(missing)} judged queries have no results in the run: {_ids(missing)}")
    return report


def _lenient_lines(path: PathLike, add: Callable[[int | None, str, str, str], None]) -> Iterator[tuple[int, str]]:
    """Non-blank, non-comment lines; a line that is not UTF-8 is a finding (kind ``encoding``), not the end.

    A damaged gzip stream still raises: nothing after it can be read. An empty file raises the
    ``file is empty`` :class:`InputError` that :func:`validate_run` reports as a finding.
    """
    seen = False
    with open_binary(path) as handle:
        for number, raw in iter_raw_lines(path, handle):
            try:
                text = decode_line(path, number, raw)
            except InputError as err:
                seen = True
                add(number, "error", "encoding", err.problem)
                continue
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            seen = True
            yield number, text
    if not seen:
        raise InputError(path, None, "file is empty")


def _check_rank_order(
    qid: str, docs: Mapping[str, _Entry], add: Callable[[int | None, str, str, str], None]
) -> None:
    """Warn once per query when the rank column orders documents differently from trec_eval.

    trec_eval ignores the rank column and sorts by score descending, ties by docid descending;
    a file whose ranks say otherwise (often a tie broken another way) is evaluated in an order
    its author did not intend.
    """
    by_rank = sorted(docs.items(), key=lambda item: (item[1].rank, item[1].line))
    by_score = sort_ranking({docid: e.score for docid, e in docs.items()})
    for position, ((docid, entry), (expected, score)) in enumerate(zip(by_rank, by_score), start=1):
        if docid == expected:
            continue
        other = docs[expected]
        # trec_eval's document at this position has the highest remaining score, so ours is <= it.
        why = (
            f"tied scores {score!r} are ordered by docid descending in trec_eval"
            if entry.score == score
            else f"its score {entry.score!r} is lower than {score!r}"
        )
        kind = "rank-tie" if entry.score == score else "rank-order"
        add(entry.line, "warning", kind,
            f"query {qid!r}: rank column puts {docid!r} at position {position} but trec_eval puts "
            f"{expected!r} (line {other.line}) there ({why}); --fix re-ranks by score")
        return


def write_fixed_run(report: ValidationReport, output: PathLike) -> int:
    """Write the cleaned copy of the run a report describes (read again: see ``validate_run(fix=)``,
    which writes it in the same pass); returns lines written.

    A run without one valid line is refused (:class:`RankkitError`): an empty "fixed" run would
    evaluate as a run that retrieved nothing.
    """
    lines = validate_run(report.path, fix=output).fixed_lines
    if lines is None:
        raise RankkitError(f"{report.path}: no valid run line to keep; --fix writes no empty run")
    return lines


__all__ = ["Problem", "SEVERITIES", "ValidationReport", "validate_run", "write_fixed_run"]
