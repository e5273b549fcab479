"""Run file checks (`rankkit validate`): every problem kind with its line, --fix, exit codes."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Callable

import pytest

from rankkit.errors import InputError
from rankkit.formats import read_run, write_run
from rankkit.formats.validate import validate_run, write_fixed_run

Cli = Callable[..., object]

# One problem of each kind; the comment column says which line (1-based) is at fault.
BROKEN = """\
q1 Q0 a 1 3.0 mytag
q1 Q0 b 2 2.0 mytag
q1 Q0 c 3 1.0
q1 Q0 d x 0.5 mytag
q1 Q0 e 4 high mytag
q1 Q0 b 5 2.5 mytag
q1 Q0 f 6 nan mytag
q2 Q0 g 1 1.0 mytag
q2 Q0 h 2 5.0 mytag
q3 Q0 i 1 1.0 mytag
q3 Q0 j 2 1.0 mytag
q1 Q0 k 7 -inf mytag
q1 Q0 l 8 0.25 mytag
"""
EXPECTED = {
    ("malformed", 3),  # 5 columns
    ("malformed", 4),  # rank not an integer
    ("malformed", 5),  # score not a number
    ("duplicate", 6),  # b again (better score 2.5 -> kept by --fix)
    ("non-finite", 7),  # nan
    ("rank-order", 8),  # q2: rank 1 has score 1.0 < 5.0
    ("rank-tie", 10),  # q3: tie 1.0/1.0 -> trec_eval puts j (docid desc) first
    ("split-query", 12),  # q1 again after q2, q3
    ("non-finite", 12),  # -inf
}


def write(tmp_path: Path, text: str, name: str = "run.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_each_problem_kind_is_found_at_its_line(tmp_path: Path) -> None:
    report = validate_run(write(tmp_path, BROKEN))
    assert {(p.kind, p.line) for p in report.problems} == EXPECTED
    assert not report.ok
    assert report.lines == 13
    assert report.tag == "mytag"
    messages = {(p.kind, p.line): p.message for p in report.problems}
    assert "expected 6 columns" in messages["malformed", 3]
    assert "rank 'x' is not an integer" in messages["malformed", 4]
    assert "score 'high' is not a number" in messages["malformed", 5]
    assert "duplicate document 'b' for query 'q1' (first at line 2)" in messages["duplicate", 6]
    assert "'h' (line 9)" in messages["rank-order", 8]
    assert "tied scores 1.0" in messages["rank-tie", 10]
    assert "first block starts at line 1" in messages["split-query", 12]
    hard = {p.severity for p in report.problems if p.kind in ("malformed", "duplicate", "non-finite")}
    assert hard == {"error"}


def test_clean_run_written_by_write_run_has_no_problems(tmp_path: Path) -> None:
    out = tmp_path / "clean.txt"
    write_run(out, {"2": {"x": 1.0, "y": 1.0, "z": 3.0}, "10": {"a": -1.0}}, "tag")
    report = validate_run(out)
    assert report.problems == [] and report.ok
    assert report.summary().endswith("4 lines, 2 queries, 4 valid (qid, docid) pairs")


def test_real_dl19_run_is_clean(data_dir: Path) -> None:
    report = validate_run(data_dir / "dl19/BM25.trec_results_dl19.txt")
    assert report.ok and report.problems == []
    assert report.queries == 43 and report.pairs == report.lines == 4300


def test_qrels_checks(tmp_path: Path) -> None:
    run = write(tmp_path, "q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq9 Q0 a 1 1.0 t\n")
    qrels = write(tmp_path, "q1 0 a 1\nq2 0 b 2\nq3 0 c 0\n", "qrels.txt")
    report = validate_run(run, qrels)
    assert {(p.kind, p.line, p.severity) for p in report.problems} == {
        ("unjudged-query", 3, "warning"),
        ("no-results", None, "info"),
    }
    info = next(p for p in report.problems if p.kind == "no-results")
    assert "2 judged queries" in info.message and "q2, q3" in info.message
    # Judged queries without results alone are only information: still ok.
    assert validate_run(run, {"q1": {"a": 1}, "q9": {}, "q5": {"x": 1}}).ok


def test_empty_and_comment_only_files_are_problems_not_exceptions(tmp_path: Path) -> None:
    for text in ("", "\n\n", "# only a comment\n"):
        report = validate_run(write(tmp_path, text))
        assert [(p.kind, p.line) for p in report.problems] == [("empty", None)]
        assert not report.ok
    only_bad = validate_run(write(tmp_path, "q1 Q0 a 1\n"))
    assert {p.kind for p in only_bad.problems} == {"malformed", "empty"}


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        validate_run(tmp_path / "nope.txt")


def test_fix_writes_a_clean_copy(tmp_path: Path) -> None:
    report = validate_run(write(tmp_path, BROKEN))
    out = tmp_path / "fixed.txt"
    assert write_fixed_run(report, out) == 7
    assert out.read_text().splitlines() == [
        "q1 Q0 a 1 3.0 mytag",
        "q1 Q0 b 2 2.5 mytag",  # duplicate kept its best score
        "q1 Q0 l 3 0.25 mytag",  # the split block is merged into q1; c-f and k dropped
        "q2 Q0 h 1 5.0 mytag",  # re-ranked by score
        "q2 Q0 g 2 1.0 mytag",
        "q3 Q0 j 1 1.0 mytag",  # tie in trec_eval order (docid descending)
        "q3 Q0 i 2 1.0 mytag",
    ]
    fixed = validate_run(out)
    assert fixed.ok and fixed.problems == []
    assert read_run(out) == {
        "q1": {"a": 3.0, "b": 2.5, "l": 0.25}, "q2": {"g": 1.0, "h": 5.0}, "q3": {"i": 1.0, "j": 1.0}}


def test_cli_reports_each_problem_with_file_and_line(cli: Cli, tmp_path: Path) -> None:
    run = write(tmp_path, BROKEN)
    result = cli("validate", run)
    assert result.code == 1
    lines = result.stdout.strip().splitlines()
    assert len(lines) == len(EXPECTED) + 1
    for kind, line in EXPECTED:
        found = any(text.startswith(f"{run}:{line}: ") and text.endswith(f"[{kind}]") for text in lines)
        assert found, (kind, line)
    assert lines[-1].startswith(f"{run}: INVALID: 6 errors, 3 warnings, 0 info")


def test_cli_fix_then_clean_exit_codes(cli: Cli, tmp_path: Path) -> None:
    run = write(tmp_path, BROKEN)
    out = tmp_path / "fixed.txt.gz"
    result = cli("validate", run, "--fix", out)
    assert result.code == 1  # the status describes the input
    assert gzip.decompress(out.read_bytes()).decode().startswith("q1 Q0 a 1 3.0 mytag\n")
    clean = cli("validate", out)
    assert clean.code == 0, clean.stdout
    assert clean.stdout.strip().splitlines() == [
        f"{out}: ok: 0 errors, 0 warnings, 0 info; 7 lines, 3 queries, 7 valid (qid, docid) pairs"]


def test_cli_qrels_and_exit_codes(cli: Cli, tmp_path: Path) -> None:
    run = write(tmp_path, "q1 Q0 a 1 2.0 t\n")
    qrels = write(tmp_path, "q1 0 a 1\nq2 0 b 1\n", "qrels.txt")
    ok = cli("validate", run, "--qrels", qrels)
    assert ok.code == 0 and "[no-results]" in ok.stdout
    unjudged = cli("validate", run, "--qrels", write(tmp_path, "q7 0 a 1\n", "other.txt"))
    assert unjudged.code == 1 and f"{run}:1: warning: query 'q1' has no judgments" in unjudged.stdout
    assert unjudged.stdout.strip().splitlines()[-1].startswith(f"{run}: WARNINGS: 0 errors, 1 warnings")
    quiet = cli("validate", "--quiet", run, "--qrels", write(tmp_path, "q7 0 a 1\n", "other.txt"))
    assert quiet.code == 1 and quiet.stdout.strip().splitlines() == [unjudged.stdout.strip().splitlines()[-1]]
    empty = cli("validate", write(tmp_path, "", "empty.txt"))
    assert empty.code == 1 and "file is empty" in empty.stdout
    for args in ((tmp_path / "nope.txt",), (run, "--qrels", tmp_path / "noqrels.txt")):
        missing = cli("validate", *args)
        assert missing.code == 2
        assert missing.stderr.strip().splitlines() == [f"rankkit: error: {args[-1]}: no such file"]
    bad_qrels = cli("validate", run, "--qrels", write(tmp_path, "q1 0 a\n", "bad_qrels.txt"))
    assert bad_qrels.code == 2 and "bad_qrels.txt:1: expected 4 columns" in bad_qrels.stderr


def test_the_streamed_pass_finds_what_the_whole_pass_finds(tmp_path: Path) -> None:
    """Contiguous queries are checked one at a time; a split query makes validate_run read the file
    again holding every query. Both passes report the same problems and write the same fixed copy."""
    from rankkit.formats.validate import _validate

    contiguous = "".join(line + "\n" for line in BROKEN.splitlines()[:11])  # without the split q1 block
    run = write(tmp_path, contiguous)
    streamed = _validate(run, None, None, tmp_path / "a.txt", stream=True)
    whole = _validate(run, None, None, tmp_path / "b.txt", stream=False)
    assert sorted(map(str, streamed.problems)) == sorted(map(str, whole.problems)) and streamed.problems
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    assert (streamed.queries, streamed.pairs, streamed.fixed_lines) == (3, 6, 6)
    in_place = validate_run(run, fix=run)  # --fix RUN rewrites the run it reads
    assert in_place.fixed_lines == 6 and run.read_bytes() == (tmp_path / "a.txt").read_bytes()
    nothing = write(tmp_path, "q1 Q0 a 1 nan t\n", "nan.txt")
    assert validate_run(nothing, fix=tmp_path / "c.txt").fixed_lines is None and not (tmp_path / "c.txt").exists()
