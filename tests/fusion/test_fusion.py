"""Run fusion: RepBERT's alternating merge (Eq. 6), RRF, CombSUM/CombMNZ, interpolation, `rankkit fuse`."""

from __future__ import annotations

import gzip
import math
from pathlib import Path
from typing import Callable

import pytest

from rankkit.errors import RankkitError
from rankkit.formats import read_run, sort_ranking
from rankkit.formats.validate import validate_run
from rankkit.fusion import FUSION_METHODS, alternate_merge, fuse
from rankkit.fusion.normalize import missing_score, normalize_scores

Cli = Callable[..., object]


def ranking(run: dict[str, dict[str, float]], qid: str) -> list[str]:
    return [docid for docid, _ in sort_ranking(run[qid])]


def write_run_text(path: Path, rows: list[tuple[str, str, float]], tag: str = "t") -> Path:
    """Write ``(qid, docid, score)`` rows with ranks in file order (not through write_run on purpose)."""
    lines, ranks = [], {}
    for qid, docid, score in rows:
        ranks[qid] = ranks.get(qid, 0) + 1
        lines.append(f"{qid} Q0 {docid} {ranks[qid]} {score!r} {tag}")
    path.write_text("\n".join(lines) + "\n")
    return path


# The paper's example (Sec. 4.5.1): D_a = [a, c, d], D_b = [b, a, c] -> [a, b, c, d].
PAPER_A = {"q": {"a": 3.0, "c": 2.0, "d": 1.0}}
PAPER_B = {"q": {"b": 3.0, "a": 2.0, "c": 1.0}}


def test_registry_lists_every_method() -> None:
    assert set(FUSION_METHODS) == {"alternate", "rrf", "combsum", "combmnz", "interpolate"}


# --- alternate (RepBERT Eq. 6) ---------------------------------------------------------------

def test_alternate_paper_example_and_its_reverse() -> None:
    assert alternate_merge([["a", "c", "d"], ["b", "a", "c"]]) == ["a", "b", "c", "d"]
    assert alternate_merge([["b", "a", "c"], ["a", "c", "d"]]) == ["b", "a", "c", "d"]
    ab = fuse([PAPER_A, PAPER_B], "alternate")
    ba = fuse([PAPER_B, PAPER_A], "alternate")
    assert ranking(ab, "q") == ["a", "b", "c", "d"]
    assert ranking(ba, "q") == ["b", "a", "c", "d"]
    # Scores n - position: strictly decreasing, so write_run's sort keeps the interleaving.
    assert ab["q"] == {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}


def test_alternate_truncates_after_filtering() -> None:
    assert alternate_merge([["a", "c", "d"], ["b", "a", "c"]], k=3) == ["a", "b", "c"]
    fused = fuse([PAPER_A, PAPER_B], "alternate", k=2)
    assert fused["q"] == {"a": 2.0, "b": 1.0}


def test_alternate_round_robin_over_three_runs_of_different_lengths() -> None:
    lists = [["a1", "x", "a3"], ["b1"], ["c1", "x", "c3", "c4"]]
    # a1 b1 c1 | x (from A; C's x filtered) | a3 c3 | c4
    assert alternate_merge(lists) == ["a1", "b1", "c1", "x", "a3", "c3", "c4"]
    runs = [{"q": {d: float(10 - i) for i, d in enumerate(docs)}} for docs in lists]
    assert ranking(fuse(runs, "alternate"), "q") == ["a1", "b1", "c1", "x", "a3", "c3", "c4"]


def test_alternate_query_in_only_one_run_keeps_that_runs_list() -> None:
    a = {"q1": {"a": 2.0, "b": 1.0}, "only_a": {"z": 0.1, "y": 0.5, "x": 0.3}}
    b = {"q1": {"c": 9.0}, "only_b": {"m": 1.0, "n": 2.0}}
    fused = fuse([a, b], "alternate")
    assert list(fused) == ["q1", "only_a", "only_b"]
    assert ranking(fused, "only_a") == ["y", "x", "z"]
    assert ranking(fused, "only_b") == ["n", "m"]
    assert ranking(fused, "q1") == ["a", "c", "b"]


def test_alternate_reads_inputs_in_trec_eval_order_with_ties() -> None:
    # Tied scores: trec_eval order is docid descending, so A's list is [b, a].
    a = {"q": {"a": 1.0, "b": 1.0}}
    b = {"q": {"c": 5.0}}
    assert ranking(fuse([a, b], "alternate"), "q") == ["b", "c", "a"]


def test_alternate_file_order_survives_write_run_sorting(cli: Cli, tmp_path: Path) -> None:
    # Docids chosen so that any docid-based ordering would differ from the interleaving.
    run_a = write_run_text(tmp_path / "a.txt", [("7", "aaa", 0.9), ("7", "zzz", 0.8), ("7", "mmm", 0.1)])
    run_b = write_run_text(tmp_path / "b.txt", [("7", "bbb", 50.0), ("7", "aaa", 40.0), ("7", "yyy", 30.0)])
    out = tmp_path / "fused.txt"
    result = cli("fuse", "--method", "alternate", run_a, run_b, "--output", out)
    assert result.code == 0, result.stderr
    assert [line.split()[2] for line in out.read_text().splitlines()] == ["aaa", "bbb", "zzz", "mmm", "yyy"]


# --- RRF -------------------------------------------------------------------------------------

def test_rrf_hand_computed() -> None:
    a = {"q": {"x": 3.0, "y": 2.0}}
    b = {"q": {"y": 9.0, "z": 1.0}}
    fused = fuse([a, b], "rrf")["q"]
    assert fused["x"] == pytest.approx(1 / 61)
    assert fused["y"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["z"] == pytest.approx(1 / 62)
    assert ranking({"q": fused}, "q") == ["y", "x", "z"]
    fused_k1 = fuse([a, b], "rrf", rrf_k=1.0)["q"]
    assert fused_k1["y"] == pytest.approx(1 / 3 + 1 / 2)
    weighted = fuse([a, b], "rrf", weights=[2.0, 0.5])["q"]
    assert weighted["x"] == pytest.approx(2 / 61)
    assert weighted["y"] == pytest.approx(2 / 62 + 0.5 / 61)
    assert weighted["z"] == pytest.approx(0.5 / 62)


def test_rrf_ranks_ties_in_trec_eval_order() -> None:
    # A ties a and b: trec_eval puts b (docid descending) at rank 1.
    fused = fuse([{"q": {"a": 1.0, "b": 1.0}}, {"q": {"c": 1.0}}], "rrf")["q"]
    assert fused["b"] == pytest.approx(1 / 61)
    assert fused["a"] == pytest.approx(1 / 62)


def test_depth_limits_what_each_input_contributes() -> None:
    a = {"q": {"x": 3.0, "y": 2.0, "w": 1.0}}
    b = {"q": {"y": 9.0, "z": 1.0}}
    fused = fuse([a, b], "rrf", depth=1)["q"]
    assert fused == pytest.approx({"x": 1 / 61, "y": 1 / 61})


# --- CombSUM / CombMNZ / interpolation / normalisation ---------------------------------------

COMB_A = {"q": {"x": 10.0, "y": 5.0, "z": 0.0}}  # minmax -> x 1, y 0.5, z 0
COMB_B = {"q": {"y": 4.0, "w": 2.0}}  # minmax -> y 1, w 0


def test_combsum_by_hand() -> None:
    assert fuse([COMB_A, COMB_B], "combsum")["q"] == {"y": 1.5, "x": 1.0, "z": 0.0, "w": 0.0}
    weighted = fuse([COMB_A, COMB_B], "combsum", weights=[2.0, 1.0])["q"]
    assert weighted == {"x": 2.0, "y": 2.0, "z": 0.0, "w": 0.0}


def test_combmnz_by_hand() -> None:
    # CombSUM times the number of runs that returned the document (z and w were returned once).
    assert fuse([COMB_A, COMB_B], "combmnz")["q"] == {"y": 3.0, "x": 1.0, "z": 0.0, "w": 0.0}


def test_combsum_norm_none_gives_missing_documents_the_runs_lowest_score() -> None:
    a = {"q": {"x": -1.0, "y": -3.0}}
    b = {"q": {"x": -2.0, "z": -0.5}}
    fused = fuse([a, b], "combsum", norm="none")["q"]
    # y is missing from b -> b's lowest (-2.0); z is missing from a -> a's lowest (-3.0).
    assert fused == {"x": -3.0, "y": -5.0, "z": -3.5}


def test_combsum_zscore_by_hand() -> None:
    a = {"q": {"x": 3.0, "y": 2.0, "z": 1.0}}  # mean 2, population std sqrt(2/3)
    b = {"q": {"x": 1.0, "y": 1.0}}  # all tied -> 0
    fused = fuse([a, b], "combsum", norm="zscore")["q"]
    s = math.sqrt(2 / 3)
    # z is missing from b: b's lowest normalised score, 0.
    assert fused == pytest.approx({"x": 1 / s, "y": 0.0, "z": -1 / s})


def test_interpolate_by_hand() -> None:
    a = {"q": {"x": 4.0, "y": 2.0, "z": 0.0}}  # -> 1, 0.5, 0
    b = {"q": {"y": 10.0, "w": 0.0}}  # -> 1, 0
    fused = fuse([a, b], "interpolate", alpha=0.25)["q"]
    assert fused == pytest.approx({"x": 0.25, "y": 0.25 * 0.5 + 0.75, "z": 0.0, "w": 0.0})
    assert ranking({"q": fused}, "q") == ["y", "x", "z", "w"]
    only_a = fuse([a, b], "interpolate", alpha=1.0)["q"]
    assert only_a == pytest.approx({"x": 1.0, "y": 0.5, "z": 0.0, "w": 0.0})


def test_interpolate_needs_exactly_two_runs_and_alpha_in_range() -> None:
    with pytest.raises(RankkitError, match="exactly 2 runs"):
        fuse([COMB_A, COMB_B, COMB_A], "interpolate")
    with pytest.raises(RankkitError, match="--alpha"):
        fuse([COMB_A, COMB_B], "interpolate", alpha=1.5)


def test_normalize_scores() -> None:
    assert normalize_scores({"a": 2.0, "b": 4.0, "c": 3.0}, "minmax") == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert normalize_scores({"a": 7.0, "b": 7.0}, "minmax") == {"a": 1.0, "b": 1.0}
    z = normalize_scores({"a": 1.0, "b": 2.0, "c": 3.0}, "zscore")
    assert z == pytest.approx({"a": -1.224744871, "b": 0.0, "c": 1.224744871})
    assert normalize_scores({"a": 7.0, "b": 7.0}, "zscore") == {"a": 0.0, "b": 0.0}
    assert normalize_scores({"a": -2.5}, "none") == {"a": -2.5}
    assert missing_score({"a": 0.3, "b": 1.0}, "minmax") == 0.0
    assert missing_score(z, "zscore") == pytest.approx(-1.224744871)
    with pytest.raises(RankkitError, match="unknown normalisation"):
        normalize_scores({"a": 1.0}, "l2")


def test_option_checks() -> None:
    with pytest.raises(RankkitError, match="unknown fusion method"):
        fuse([COMB_A, COMB_B], "borda")
    with pytest.raises(RankkitError, match="--alpha does not apply to method 'rrf'"):
        fuse([COMB_A, COMB_B], "rrf", alpha=0.5)
    with pytest.raises(RankkitError, match="--weights has 3 values for 2 runs"):
        fuse([COMB_A, COMB_B], "combsum", weights=[1.0, 1.0, 1.0])
    with pytest.raises(RankkitError, match="at least 2 runs"):
        fuse([COMB_A], "rrf")


# --- agreement with ranx on real DL19 runs ---------------------------------------------------

DL19_A = "dl19/BM25.trec_results_dl19.txt"
DL19_B = "dl19/OPEN_AI_ADA2.trec_results_dl19.txt"


@pytest.mark.parametrize(
    ("method", "ranx_method", "ranx_norm"),
    [("rrf", "rrf", None), ("combsum", "sum", "min-max"), ("combmnz", "mnz", "min-max")],
)
def test_agrees_with_ranx_on_real_dl19_runs(
    cli: Cli, data_dir: Path, tmp_path: Path, method: str, ranx_method: str, ranx_norm: str | None
) -> None:
    ranx = pytest.importorskip("ranx", reason="ranx (the bench extra) is not installed")
    a, b = data_dir / DL19_A, data_dir / DL19_B
    out = tmp_path / f"{method}.txt"
    result = cli("fuse", "--method", method, a, b, "--output", out, "--k", 1000)
    assert result.code == 0, result.stderr
    ours = read_run(out)
    theirs = ranx.fuse([ranx.Run.from_file(str(a)), ranx.Run.from_file(str(b))], norm=ranx_norm,
                       method=ranx_method).to_dict()
    assert set(ours) == set(theirs) and len(ours) == 43
    for qid in ours:
        # Same fused score for every document (repr round-trips floats exactly), hence same ranking.
        assert ours[qid] == dict(theirs[qid]), qid
        assert ranking(ours, qid) == [d for d, _ in sort_ranking(dict(theirs[qid]))]
    # Not vacuous: the two systems disagree, so the fusion really mixes them.
    first_a = {qid: ranking(read_run(a), qid)[:10] for qid in ours}
    assert any(ranking(ours, qid)[:10] != first_a[qid] for qid in ours)


# --- `rankkit fuse` output, determinism and errors -------------------------------------------

@pytest.mark.parametrize("method", sorted(FUSION_METHODS))
def test_cli_output_sorted_ranked_and_deterministic(
    cli: Cli, data_dir: Path, tmp_path: Path, method: str
) -> None:
    a, b = data_dir / DL19_A, data_dir / DL19_B
    out1, out2 = tmp_path / "one.txt", tmp_path / "two.txt"
    for out in (out1, out2):
        result = cli("fuse", "--method", method, a, b, "--output", out, "--k", 150, "--depth", 80)
        assert result.code == 0, result.stderr
    assert out1.read_bytes() == out2.read_bytes()
    rows = [line.split() for line in out1.read_text().splitlines()]
    assert {row[5] for row in rows} == {f"fuse-{method}"}
    by_query: dict[str, list[tuple[int, float, str]]] = {}
    for qid, _, docid, rank, score, _ in rows:
        by_query.setdefault(qid, []).append((int(rank), float(score), docid))
    assert len(by_query) == 43
    for entries in by_query.values():
        assert [r for r, _, _ in entries] == list(range(1, len(entries) + 1))
        assert len(entries) <= 150 and len(entries) > 80  # the union of two top-80s, cut at 150
        keys = [(s, d) for _, s, d in entries]
        assert keys == sorted(keys, reverse=True)  # score desc, ties docid desc
    assert validate_run(out1).ok


def test_cli_runtag_weights_and_gz(cli: Cli, tmp_path: Path) -> None:
    a = write_run_text(tmp_path / "a.txt", [("q", "x", 10.0), ("q", "y", 5.0), ("q", "z", 0.0)])
    b = write_run_text(tmp_path / "b.txt", [("q", "y", 4.0), ("q", "w", 2.0)])
    out = tmp_path / "out.txt.gz"
    result = cli("fuse", "-m", "combsum", a, b, "-o", out, "--weights", "2,1", "--runtag", "mine")
    assert result.code == 0, result.stderr
    assert read_run(out) == {"q": {"x": 2.0, "y": 2.0, "z": 0.0, "w": 0.0}}
    assert gzip.decompress(out.read_bytes()).decode().splitlines()[0] == "q Q0 y 1 2.0 mine"


BAD_INPUTS = {
    "columns": ("q Q0 a 1 2.0 t\nq Q0 b 2 1.0\n", ":2:", "expected 6 columns"),
    "score": ("q Q0 a 1 2.0 t\nq Q0 b 2 high t\n", ":2:", "is not a number"),
    "duplicate": ("q Q0 a 1 2.0 t\nq Q0 b 2 1.0 t\nq Q0 a 3 0.5 t\n", ":3:", "duplicate document 'a'"),
    "empty": ("", "bad.txt: file is empty", "file is empty"),
}


@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
def test_cli_malformed_input_exits_2_without_output(cli: Cli, tmp_path: Path, kind: str) -> None:
    text, where, problem = BAD_INPUTS[kind]
    good = write_run_text(tmp_path / "good.txt", [("q", "a", 1.0)])
    bad = tmp_path / "bad.txt"
    bad.write_text(text)
    out = tmp_path / "out.txt"
    result = cli("fuse", "--method", "rrf", good, bad, "--output", out)
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rankkit: error: ")
    assert str(bad) in lines[0] and where in lines[0] and problem in lines[0]
    assert not out.exists()
    assert set(tmp_path.iterdir()) == {good, bad}  # no temporary file left behind either


def test_cli_missing_file_and_bad_options_exit_2(cli: Cli, tmp_path: Path) -> None:
    good = write_run_text(tmp_path / "good.txt", [("q", "a", 1.0)])
    out = tmp_path / "out.txt"
    cases = [
        (("--method", "rrf", good, tmp_path / "nope.txt"), "nope.txt: no such file"),
        (("--method", "borda", good, good), "unknown fusion method 'borda'"),
        (("--method", "rrf", good), "at least 2 runs"),
        (("--method", "rrf", good, good, "--alpha", "0.3"), "--alpha does not apply"),
        (("--method", "interpolate", good, good, good), "exactly 2 runs"),
        (("--method", "combsum", good, good, "--weights", "1,x"), "--weights must be comma-separated"),
        (("--method", "combsum", good, good, "--norm", "l2"), "unknown normalisation"),
        (("--method", "rrf", good, good, "--k", "0"), "--k must be at least 1"),
    ]
    for args, message in cases:
        result = cli("fuse", *args, "--output", out)
        assert result.code == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert not out.exists()


def test_fusing_files_streams_query_by_query_and_writes_what_fuse_writes(data_dir: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Runs in the same query order (or all sorted by qid) are fused one query at a time; runs in
    their own orders, or with a query split over blocks, are read whole. The lines are the same."""
    from rankkit.formats import write_run
    from rankkit.fusion import fuse_files, iter_aligned_queries

    dl19 = data_dir / "dl19"
    a, b = dl19 / "BM25.trec_results_dl19.txt", dl19 / "OPEN_AI_ADA2.trec_results_dl19.txt"
    for method, options in (("rrf", {}), ("combsum", {"norm": "zscore"}), ("alternate", {}),
                            ("interpolate", {"alpha": 0.3})):
        expected = tmp_path / f"{method}.whole"
        write_run(expected, fuse([read_run(a, depth=50), read_run(b, depth=50)], method, k=20, depth=50, **options),
                  "fused", k=20)
        streamed = tmp_path / f"{method}.run"
        assert fuse_files([a, b], streamed, method, k=20, depth=50, tag="fused", **options) == (43, 43 * 20)
        assert streamed.read_bytes() == expected.read_bytes()
    assert "reading the runs whole" not in capsys.readouterr().err
    # Sorted by qid, with a query missing from one run: merged in qid order, the missing side None.
    x = write_run_text(tmp_path / "x", [("1", "a", 2.0), ("2", "b", 1.0), ("4", "c", 1.0)])
    y = write_run_text(tmp_path / "y", [("2", "a", 1.0), ("3", "d", 1.0), ("4", "c", 3.0)])
    assert [(q, [bool(r) for r in rs]) for q, rs in iter_aligned_queries([x, y])] == [
        ("1", [True, False]), ("2", [True, True]), ("3", [False, True]), ("4", [True, True])]
    # Own orders (not sorted), a query split over two blocks: read whole, fused as fuse() does.
    p = write_run_text(tmp_path / "p", [("q2", "a", 1.0), ("q1", "b", 2.0), ("q3", "c", 1.0)])
    q = write_run_text(tmp_path / "q", [("q1", "a", 1.0), ("q2", "b", 1.0), ("q1", "c", 0.5)])
    for pair in ((p, q), (x, p)):
        expected = tmp_path / "pq.whole"
        write_run(expected, fuse([read_run(r) for r in pair], "rrf", k=10), "f", k=10)
        assert fuse_files(list(pair), tmp_path / "pq.run", "rrf", k=10, tag="f")[1] > 0
        assert (tmp_path / "pq.run").read_bytes() == expected.read_bytes()
        assert "reading the runs whole" in capsys.readouterr().err
