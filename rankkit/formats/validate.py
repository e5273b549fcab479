"""Checks of TREC run files, lenient so that one pass reports every problem (``rankkit validate``).

:func:`validate_run` reads a run line by line with :func:`rankkit.formats.runs.parse_run_line`,
records each problem with its line number instead of stopping at the first, and keeps a cleaned
copy of the run (malformed and non-finite lines dropped, duplicates keeping their best score) that
:func:`write_fixed_run` writes through :func:`rankkit.formats.write_run` (sorted, ranks 1..n).

Severities: ``error`` (the strict readers of rankkit reject it: malformed line, duplicate pair,
non-finite score, bytes that are not UTF-8, empty file), ``warning`` (accepted, but evaluation would not measure what the file
seems to say: rank column contradicting the score order, a query split over several blocks,
a query without judgments) and ``info`` (worth knowing, never a failure: judged queries without
results, several run tags). A report is clean when it has no error and no warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

from rankkit.errors import InputError, RankkitError
from rankkit.files import PathLike, decode_line, iter_raw_lines, open_binary
from rankkit.formats.sources import load_qrels
from rankkit.formats.runs import Run, parse_run_line, sort_ranking, write_run

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
    """What :func:`validate_run` found, plus the cleaned run used by ``--fix``."""

    path: str
    problems: list[Problem] = field(default_factory=list)
    lines: int = 0
    tag: str | None = None
    clean_run: Run = field(default_factory=dict)

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
        queries = len(self.clean_run)
        docs = sum(len(d) for d in self.clean_run.values())
        verdict = "ok" if self.ok else ("INVALID" if self.count("error") else "WARNINGS")
        return (
            f"{self.path}: {verdict}: {self.count('error')} errors, {self.count('warning')} warnings, "
            f"{self.count('info')} info; {self.lines} lines, {queries} queries, "
            f"{docs} valid (qid, docid) pairs"
        )


@dataclass
class _Entry:
    score: float
    rank: int
    line: int


def _ids(qids: list[str], limit: int = 10) -> str:
    shown = ", ".join(qids[:limit])
    return shown + (f", ... ({len(qids) - limit} more)" if len(qids) > limit else "")


def validate_run(
    path: PathLike,
    qrels: Mapping[str, Mapping[str, int]] | PathLike | None = None,
    *,
    on_lines: Callable[[int], None] | None = None,
) -> ValidationReport:
    """Check a run file and return every problem found, with line numbers.

    ``qrels`` (a mapping or a qrels file) adds the checks "query has no judgments" (warning) and
    "judged query has no results" (info). A missing or unreadable run or qrels file raises
    :class:`InputError` (exit 2 in the CLI); an empty run is a reported problem, not an exception.
    ``on_lines(n)`` is called every 10,000 lines read and at the end (for progress bars).
    """
    label = str(path)
    report = ValidationReport(label)
    # Open first so that a missing file is an exception, not a finding.
    open_binary(path).close()
    judged = qrels if qrels is None or isinstance(qrels, Mapping) else load_qrels(qrels)

    def add(line: int | None, severity: str, kind: str, message: str) -> None:
        report.problems.append(Problem(label, line, severity, kind, message))

    entries: dict[str, dict[str, _Entry]] = {}
    first_line: dict[str, int] = {}
    tags: dict[str, int] = {}
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
            if row.qid != previous_qid and row.qid in entries and row.qid not in split_reported:
                split_reported.add(row.qid)
                add(number, "warning", "split-query",
                    f"lines of query {row.qid!r} are not contiguous (its first block starts at line "
                    f"{first_line[row.qid]}); rankkit's streaming readers reject this")
            previous_qid = row.qid
            if not math.isfinite(row.score):
                add(number, "error", "non-finite",
                    f"score {row.score} of document {row.docid!r} is not finite")
                continue
            docs = entries.setdefault(row.qid, {})
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
        return report
    if on_lines is not None:
        on_lines(report.lines % 10_000)

    if len(tags) > 1:
        add(None, "info", "multiple-tags",
            f"{len(tags)} different run tags: {_ids(list(tags))}; "
            f"--fix keeps the first, {next(iter(tags))!r}")
    report.tag = next(iter(tags), None)

    for qid, docs in entries.items():
        _check_rank_order(qid, docs, add)
    report.clean_run = {qid: {docid: e.score for docid, e in docs.items()} for qid, docs in entries.items()}
    if not report.clean_run and not any(p.kind == "empty" for p in report.problems):
        add(None, "error", "empty", "no valid run lines")

    if judged is not None:
        for qid in entries:
            if qid not in judged:
                add(first_line[qid], "warning", "unjudged-query",
                    f"query {qid!r} has no judgments in the qrels (trec_eval skips it)")
        missing = [qid for qid in judged if qid not in entries]
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
    """Write the cleaned run of a report through :func:`write_run`, keeping its tag; returns lines written.

    A report without one valid line is refused (:class:`RankkitError`): an empty "fixed" run would
    evaluate as a run that retrieved nothing.
    """
    if not any(report.clean_run.values()):
        raise RankkitError(f"{report.path}: no valid run line to keep; --fix writes no empty run")
    return write_run(output, report.clean_run, tag=report.tag or "rankkit")


__all__ = ["Problem", "SEVERITIES", "ValidationReport", "validate_run", "write_fixed_run"]
