"""RepBERT's consistency factor C_{f,n} (Eq. 5) and `rankkit consistency`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from rankkit.errors import RankkitError
from rankkit.evaluation.consistency import consistency, consistency_factor
from rankkit.formats import write_run

Cli = Callable[..., object]

# F ranks q1: a b c d, q2: e f g. The reference ranks q1: z a c (so its top-1 is {z}), q2: f e.
RUN_F = {"q1": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}, "q2": {"e": 3.0, "f": 2.0, "g": 1.0}}
REF = {"q1": {"z": 9.0, "a": 8.0, "c": 7.0}, "q2": {"f": 2.0, "e": 1.0}}


def test_hand_computed_example() -> None:
    report = consistency(RUN_F, REF, [1, 2, 4])
    values = {r.depth: r.value for r in report.results}
    # n=1: q1 {a} -> 1, q2 {e} -> 1.            mean 1
    # n=2: q1 {a,b} -> 1/2, q2 {e,f} -> 1.       mean 3/4
    # n=4: q1 {a,b,c,d} -> 2/4, q2 {e,f,g} -> 2/3 (only 3 documents).  mean 7/12
    assert values == pytest.approx({1: 1.0, 2: 0.75, 4: 7 / 12})
    assert report.results[2].per_query == pytest.approx({"q1": 0.5, "q2": 2 / 3})
    assert all(r.queries == 2 for r in report.results)
    # Reference cut at depth 1 keeps only its best document: q1 {z}, q2 {f}.
    assert consistency_factor(RUN_F, REF, 2, ref_depth=1) == pytest.approx((0.0 + 0.5) / 2)


def test_identical_runs_are_fully_consistent_and_disjoint_runs_not() -> None:
    assert consistency_factor(RUN_F, RUN_F, 3) == 1.0
    disjoint = {"q1": {"x": 1.0}, "q2": {"y": 1.0}}
    assert consistency_factor(RUN_F, disjoint, 3) == 0.0


def test_queries_in_only_one_run() -> None:
    run = {**RUN_F, "q3": {"a": 1.0}}
    ref = {**REF, "q4": {"a": 1.0}}
    report = consistency(run, ref, [1])
    assert report.run_only == ["q3"] and report.reference_only == ["q4"]
    # q3 (no reference results) counts 0; q4 (no run results) is skipped.
    assert report.results[0].value == pytest.approx(2 / 3) and report.results[0].queries == 3
    common = consistency(run, ref, [1], common_only=True)
    assert common.results[0].value == 1.0 and common.results[0].queries == 2
    with pytest.raises(RankkitError, match="no query in common"):
        consistency({"q3": {"a": 1.0}}, REF, [1], common_only=True)


def test_top_n_cut_uses_trec_eval_tie_order() -> None:
    # a and b tie: trec_eval order is b, a, so the top-1 is b, which the reference lacks.
    assert consistency_factor({"q": {"a": 1.0, "b": 1.0}}, {"q": {"a": 5.0}}, 1) == 0.0


def test_bad_depths() -> None:
    with pytest.raises(RankkitError, match="at least 1"):
        consistency(RUN_F, REF, [0])
    with pytest.raises(RankkitError, match="at least one"):
        consistency(RUN_F, REF, [])


@pytest.fixture
def run_files(tmp_path: Path) -> tuple[Path, Path]:
    f, ref = tmp_path / "f.txt", tmp_path / "ref.txt"
    write_run(f, RUN_F, "f")
    write_run(ref, REF, "bm25")
    return f, ref


def test_cli_json_tsv_and_table(cli: Cli, run_files: tuple[Path, Path]) -> None:
    f, ref = run_files
    result = cli("consistency", f, ref, "--depth", 2, "--depth", 4, "--format", "json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert [(r["depth"], r["queries"]) for r in data["results"]] == [(2, 2), (4, 2)]
    assert data["results"][1]["consistency"] == pytest.approx(7 / 12)
    assert data["ref_depth"] == 1000 and data["run_only_queries"] == []
    tsv = cli("consistency", f, ref, "-n", 2, "--ref-depth", 1, "--format", "tsv")
    assert tsv.code == 0 and tsv.stdout.splitlines() == ["depth\tconsistency\tqueries", "2\t0.250000\t2"]
    table = cli("consistency", f, ref, "-n", 4)
    assert table.code == 0 and "0.5833" in table.stdout and "Eq. 5" in table.stdout


def test_cli_errors_exit_2(cli: Cli, run_files: tuple[Path, Path], tmp_path: Path) -> None:
    f, ref = run_files
    missing = cli("consistency", f, tmp_path / "nope.txt", "-n", 1)
    assert missing.code == 2
    assert missing.stderr.strip() == f"rankkit: error: {tmp_path / 'nope.txt'}: no such file"
    bad = cli("consistency", f, ref, "--format", "xml")
    assert bad.code == 2 and "unknown --format 'xml'" in bad.stderr
    zero = cli("consistency", f, ref, "-n", 0)
    assert zero.code == 2 and "at least 1" in zero.stderr
