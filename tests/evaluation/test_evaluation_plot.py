"""The --plot figure: per-query differences sorted, recall curves, PNG written atomically."""

from __future__ import annotations

import os

import pytest

from rankkit.errors import RankkitError
from rankkit.evaluation import evaluate, plot_evaluation, recall_curves
from rankkit.evaluation.plot import query_differences

QRELS = {"1": {"a": 1}, "2": {"b": 1}, "3": {"c": 1}}
BASE = {"1": {"x": 2.0, "a": 1.0}, "2": {"b": 2.0, "x": 1.0}, "3": {"x": 2.0, "c": 1.0}}
OTHER = {"1": {"a": 2.0, "x": 1.0}, "2": {"x": 2.0, "b": 1.0}, "3": {"x": 2.0, "c": 1.0}}


def test_query_differences_are_sorted_largest_gain_first() -> None:
    result = evaluate({"base": BASE, "other": OTHER}, QRELS, ["RR"])
    qids, diffs = query_differences(result, "other", "base", "RR")
    assert qids == ["1", "3", "2"]
    assert list(diffs) == pytest.approx([0.5, 0.0, -0.5])


def test_plot_writes_a_deterministic_png(tmp_path) -> None:
    runs = {"base": BASE, "other": OTHER}
    result = evaluate(runs, QRELS, ["RR", "R@2"])
    curves = recall_curves(runs, QRELS, [1, 2])
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    plot_evaluation(result, first, baseline="base", recall=curves)
    plot_evaluation(result, second, baseline="base", recall=curves)
    data = first.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data == second.read_bytes()
    assert os.stat(first).st_mode & 0o044  # readable like any other output, not mkstemp's 0600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_plot_needs_something_to_compare(tmp_path) -> None:
    result = evaluate({"base": BASE}, QRELS, ["RR"])
    with pytest.raises(RankkitError, match="--plot needs"):
        plot_evaluation(result, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
    curves = recall_curves({"base": BASE}, QRELS, [1, 2])
    plot_evaluation(result, tmp_path / "x.png", recall=curves)  # one run: just the recall curves
    assert (tmp_path / "x.png").stat().st_size > 0
