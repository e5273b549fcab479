"""CLI conventions users bring from other tools (issue 14, item 6): --version, one --runtag, --hits,
trec_eval's -m official / all_trec."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

import rankkit
from rankkit.evaluation.measures import TREC_UNSUPPORTED, expand_groups
from rankkit.formats import read_run

DATA = Path(__file__).parents[1] / "data"
TE = DATA / "trec_eval"
DL19 = DATA / "dl19"
BEIR = DATA / "interop" / "beir-squad-dev"


def test_version(cli: Callable[..., Any]) -> None:
    result = cli("--version")
    assert result.code == 0 and result.stdout == f"rankkit {rankkit.__version__}\n"


def test_rerank_runtag_and_its_old_name(cli: Callable[..., Any], tmp_path: Path) -> None:
    run = tmp_path / "in.run"
    run.write_text("5725b33f6a3fe71400b8952d Q0 dev-a000-p001 1 2.0 x\n5725b33f6a3fe71400b8952d Q0 dev-a000-p000 2 1.0 x\n")
    common = ["rerank", "--model", "repbert", "--run", run, "--topics", BEIR, "--corpus", BEIR, "--device", "cpu"]
    new = cli(*common, "-o", tmp_path / "a.run", "--runtag", "mine")
    old = cli(*common, "-o", tmp_path / "b.run", "--tag", "mine")
    assert new.code == old.code == 0, new.stderr + old.stderr
    assert (tmp_path / "a.run").read_text() == (tmp_path / "b.run").read_text()
    assert (tmp_path / "a.run").read_text().splitlines()[0].endswith(" mine")
    both = cli(*common, "-o", tmp_path / "c.run", "--tag", "x", "--runtag", "y")
    assert both.code == 2 and "--tag is the old name of --runtag" in both.stderr
    shown = cli("rerank", "--help").stdout
    assert "--runtag" in shown and "--tag " not in shown


def test_hits_is_k(cli: Callable[..., Any], tmp_path: Path) -> None:
    runs = [DL19 / "BM25.trec_results_dl19.txt", DL19 / "OPEN_AI_ADA2.trec_results_dl19.txt"]
    by_k = cli("fuse", "--method", "rrf", *runs, "--k", "7", "-o", tmp_path / "k.run")
    by_hits = cli("fuse", "--method", "rrf", *runs, "--hits", "7", "-o", tmp_path / "hits.run")
    assert by_k.code == by_hits.code == 0
    assert (tmp_path / "k.run").read_bytes() == (tmp_path / "hits.run").read_bytes()
    assert {len(d) for d in read_run(tmp_path / "k.run").values()} == {7}
    assert "--hits" in cli("retrieve", "--help").stdout


def trec_eval_output(path: Path) -> dict[str, str]:
    """``{measure: value}`` of the 'all' rows of a trec_eval output file (runid left out)."""
    rows = [line.split() for line in path.read_text().splitlines()]
    return {name: value for name, qid, value in rows if qid == "all" and name != "runid"}


@pytest.mark.parametrize(("group", "expected"), [("official", "out.test"), ("all_trec", "out.test.aq")])
def test_measure_groups_expand_as_trec_eval(cli: Callable[..., Any], group: str, expected: str) -> None:
    """The measures of -m official / all_trec are trec_eval's (less the ones rankkit cannot compute), same values."""
    reference = trec_eval_output(TE / expected)
    result = cli("eval", TE / "results.test", "--qrels", TE / "qrels.test", "-m", group, "-f", "tsv")
    assert result.code == 0, result.stderr
    ours = {}
    for line in result.stdout.splitlines()[1:]:
        _, _, label, value = line.split("\t")
        base, _, param = label.partition(".")
        ours[f"{base}_{param}" if param else base] = value
    supported = {name for name in reference
                 if not any(name == u or name.startswith(u + "_") for u in TREC_UNSUPPORTED)}
    assert set(ours) == supported
    for name in supported:
        if name.startswith("iprec_at_recall"):  # trec_eval 9 vs 10 interpolation, see docs/EVALUATION.md
            continue
        assert float(ours[name]) == pytest.approx(float(reference[name]), abs=1e-4), name
    if group == "all_trec":
        left_out = expand_groups(["all_trec"])[1]
        assert "Rprec_mult" in left_out and "runid" not in left_out
        assert f"trec_eval measures have no ir_measures counterpart and are left out: {', '.join(left_out)}" in result.stderr
