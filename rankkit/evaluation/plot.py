"""Plots of evaluation results (matplotlib, Agg backend, imported only when a plot is asked for).

One panel per compared run shows its per-query difference to the baseline on one measure, bars
sorted from largest gain to largest loss (the usual "where does the new system win" plot); when
recall curves are given, a last panel draws mean recall@k against k for every run.
"""

from __future__ import annotations

import io
from typing import Mapping, Sequence

import numpy as np

from rankkit.errors import RankkitError
from rankkit.evaluation.evaluate import EvalResult
from rankkit.files import PathLike, atomic_write


def _write_bytes_atomic(path: PathLike, data: bytes) -> None:
    """Write bytes through :func:`rankkit.formats.atomic_write` (no half-written image, no stray temporary)."""
    with atomic_write(path) as handle:
        handle.flush()
        handle.buffer.write(data)  # type: ignore[attr-defined]


def query_differences(
    result: EvalResult, run: str, baseline: str, measure: str
) -> tuple[list[str], np.ndarray]:
    """Per-query ``run - baseline`` on ``measure`` over their common queries, sorted descending."""
    row = result.row(measure)
    base = result.runs[baseline]
    other = result.runs[run]
    base_col = {qid: i for i, qid in enumerate(base.qids)}
    pairs = [(col, base_col[qid], qid) for col, qid in enumerate(other.qids) if qid in base_col]
    qids = [qid for _, _, qid in pairs]
    diffs = np.array([other.values[row, col] - base.values[row, bcol] for col, bcol, _ in pairs], dtype=float)
    # Stable sort on the negated differences: largest gains first, ties keep query order.
    order = np.argsort(-diffs, kind="stable")
    return [qids[i] for i in order], diffs[order]


def plot_evaluation(
    result: EvalResult,
    path: PathLike,
    *,
    baseline: str | None = None,
    measure: str | None = None,
    recall: Mapping[str, Sequence[tuple[int, float]]] | None = None,
) -> None:
    """Save a PNG: per-query differences to ``baseline`` (default: the first run) on ``measure``
    (default: the first measure), one panel per other run, plus recall@k curves if given."""
    from matplotlib.figure import Figure  # Agg canvas, no pyplot state; imported only for --plot

    names = list(result.runs)
    baseline = baseline or names[0]
    measure = measure or result.labels[0]
    if baseline not in result.runs:
        raise RankkitError(f"baseline {baseline} is not among the evaluated runs")
    others = [name for name in names if name != baseline]
    if not others and not recall:
        raise RankkitError("--plot needs a baseline and another run, or a recall measure (e.g. R@1000)")
    panels = len(others) + (1 if recall else 0)
    fig = Figure(figsize=(8.0, 2.8 * panels), dpi=100, layout="constrained")
    axes = fig.subplots(panels, 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, others):
        qids, diffs = query_differences(result, name, baseline, measure)
        colors = ["#2a9d8f" if d > 0 else "#e76f51" if d < 0 else "#999999" for d in diffs]
        ax.bar(np.arange(len(diffs)), diffs, width=0.9, color=colors)
        ax.axhline(0.0, color="black", linewidth=0.6)
        wins, losses = int((diffs > 0).sum()), int((diffs < 0).sum())
        ties = len(diffs) - wins - losses
        title = f"{name}: mean Δ {diffs.mean():+.4f} ({wins} better, {ties} tied, {losses} worse)"
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(f"Δ {measure}", fontsize=9)
        ax.set_xlabel(f"queries sorted by difference to {baseline}", fontsize=8)
        if len(qids) <= 60:
            ax.set_xticks(np.arange(len(qids)), qids, rotation=90, fontsize=6)
        else:
            ax.set_xticks([])
        ax.set_xlim(-0.6, max(len(diffs), 1) - 0.4)
    if recall:
        ax = axes[-1]
        for name, points in recall.items():
            ks = [k for k, _ in points]
            ax.plot(ks, [value for _, value in points], marker="o", markersize=3, label=name)
        ax.set_xscale("log")
        ax.set_xlabel("cutoff k", fontsize=9)
        ax.set_ylabel("mean recall@k", fontsize=9)
        ax.set_ylim(0.0, 1.0)
        ax.grid(True, which="both", linewidth=0.3)
        ax.legend(fontsize=7)
        ax.set_title("recall@k", fontsize=9)
    buffer = io.BytesIO()
    # No "Software" metadata (it names the matplotlib version): same results, same bytes.
    fig.savefig(buffer, format="png", metadata={"Software": None})
    _write_bytes_atomic(path, buffer.getvalue())
