"""Training you can watch: ``metrics.csv``, ``training.png`` and (optionally) TensorBoard beside ``train.log``.

Every run of ``rankkit train`` writes, in its output folder:

* ``metrics.csv``: one row per logged step (every ``--log-every`` steps, the last step, and every
  dev evaluation) with the columns :data:`COLUMNS`: ``step, epoch, loss, lr, dev_mrr, dev_ndcg@10,
  seconds`` (``loss``: the mean training loss over the steps since the previous row, as train.log's
  ``loss`` with its ``loss_steps``; dev cells empty where no dev evaluation ran; ``seconds`` since training began,
  continued across ``--resume``). Appended a line at a time, so ``tail -f`` and pandas can read it
  while training runs;
* ``training.png``: the training loss (each logged value and a smoothed line) and the dev metrics
  against the optimiser step, drawn at each dev evaluation and at the end, written atomically
  (a reader never sees half a picture);
* with ``--report-to tensorboard``: TensorBoard event files in ``tensorboard/`` (scalars
  ``train/loss``, ``train/lr``, ``dev/mrr``, ``dev/ndcg@10``). tensorboard is not a dependency of
  rankkit; asking for it without it installed is a one-line error before any work.

``rankkit plot-training CK [CK ...]`` draws several runs in one picture (:func:`plot_curves`), from
their ``metrics.csv``, or from ``train.log`` for runs trained before metrics.csv existed.
Nothing here imports torch; matplotlib is imported only to draw.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from rankkit.errors import InputError, RankkitError, excerpt
from rankkit.files import PathLike, atomic_write, iter_lines

METRICS_CSV = "metrics.csv"
TRAINING_PNG = "training.png"
TENSORBOARD_DIR = "tensorboard"
TRAIN_LOG = "train.log"
#: Dev metrics of :mod:`rankkit.training.dev` (the first selects the best model).
DEV_COLUMNS: tuple[str, ...] = ("dev_mrr", "dev_ndcg@10")
COLUMNS: tuple[str, ...] = ("step", "epoch", "loss", "lr", *DEV_COLUMNS, "seconds")
#: ``--report-to`` targets.
REPORT_TO: tuple[str, ...] = ("tensorboard",)
#: How dev metrics are named on plots.
DEV_NAMES = {"dev_mrr": "dev MRR", "dev_ndcg@10": "dev nDCG@10"}


def check_report_to(targets: Sequence[str]) -> None:
    """Refuse, before any work, an unknown ``--report-to`` target or one whose package is not installed."""
    for target in targets:
        if target not in REPORT_TO:
            raise RankkitError(f"--report-to must be {' or '.join(REPORT_TO)}, got {target!r} "
                               f"(metrics.csv and training.png are always written)")
        if target == "tensorboard" and importlib.util.find_spec("tensorboard") is None:
            raise RankkitError("--report-to tensorboard needs the tensorboard package, which is not installed "
                               "(pip install tensorboard)")


@dataclass
class Curves:
    """One run's logged rows (``step`` and the metrics that row has), for plotting and resuming."""

    label: str
    rows: list[dict[str, float]] = field(default_factory=list)

    def series(self, column: str) -> tuple[list[float], list[float]]:
        """``(steps, values)`` of the rows that have ``column``."""
        points = [(row["step"], row[column]) for row in self.rows if column in row]
        return [p[0] for p in points], [p[1] for p in points]

    def dev_columns(self) -> list[str]:
        return [c for c in DEV_COLUMNS if any(c in row for row in self.rows)]


#: Largest magnitude of a logged value plotted: training logs 32-bit floats (at most ~3.4e38); a larger
#: value comes from a damaged or hand-made file, and near 1e308 matplotlib's axis arithmetic overflows.
MAX_VALUE = 1e39
#: Largest step read (a whole number: 2^53, past any ``max_steps``).
MAX_STEP = 2**53
#: Longest line of a metrics.csv (a row is ~100 characters) or train.log (a record is a few hundred).
MAX_ROW = 1 << 20


def _value(path: Path, number: int, key: str, value: Any) -> float | None:
    """A logged value as a float; ``None`` for an empty or non-finite one (left out, as a step without it);
    a value that is not a number, or one beyond :data:`MAX_VALUE`, is one line naming the file and line."""
    if value is None or value == "":
        return None
    name = excerpt(key)[1:-1]  # a column name of the file: cut, unquoted
    if isinstance(value, bool):
        raise InputError(path, number, f"{name} = {value!r} is not a number")
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise InputError(path, number, f"{name} = {excerpt(value)} is not a number") from None
    if not math.isfinite(result):
        return None
    if abs(result) > MAX_VALUE:
        raise InputError(path, number, f"{name} = {excerpt(value)} is beyond {MAX_VALUE:g}, more than a "
                                       "training run logs (32-bit floats); refusing to plot it")
    if key == "step" and (not result.is_integer() or not 0 <= result <= MAX_STEP):
        raise InputError(path, number, f"step = {excerpt(value)} is not a whole number from 0 to 2^53")
    return result


def _rows(path: Path) -> Iterator[tuple[int, str]]:
    """The non-blank lines of a log file: strict UTF-8, bounded length (:data:`MAX_ROW`), gzip by content."""
    for number, line in iter_lines(path):
        if len(line) > MAX_ROW:
            raise InputError(path, number, f"a line of {len(line):,} characters, longer than any row a training run "
                                           f"logs ({MAX_ROW:,}); not a rankkit training log")
        yield number, line


def read_metrics_csv(path: Path) -> list[dict[str, float]]:
    """The rows of a ``metrics.csv`` (empty cells left out); a file without a ``step`` column is an error.

    Read line by line through rankkit's bounded reader (a 100 MB line is one line of error, not the csv
    module's field-size traceback), every value checked (:func:`_value`)."""
    header: list[str] | None = None
    rows = []
    for number, line in _rows(path):
        try:
            fields = next(csv.reader([line]))
        except csv.Error as err:
            raise InputError(path, number, f"not a CSV row ({err})") from None
        if header is None:
            header = [name.strip() for name in fields]
            if "step" not in header:
                raise InputError(path, number, "not a rankkit metrics.csv (no 'step' column)")
            continue
        values = {key: _value(path, number, key, text) for key, text in zip(header, fields)}
        if values.get("step") is None:
            raise InputError(path, number, "row without a step")
        rows.append({key: value for key, value in values.items() if value is not None})
    return rows


def read_train_log(path: Path) -> list[dict[str, float]]:
    """Rows like metrics.csv's from a ``train.log`` (JSON lines): loss lines and dev lines of the same step merged."""
    by_step: dict[int, dict[str, float]] = {}
    for number, line in _rows(path):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            raise InputError(path, number, "not a JSON line (is this a rankkit train.log?)") from None
        if not isinstance(record, dict) or "step" not in record or "event" in record:
            continue
        values = {k: _value(path, number, k, record.get(k)) for k in ("epoch", "loss", "lr", *DEV_COLUMNS)}
        kept = {k: v for k, v in values.items() if v is not None}
        if not kept:
            continue
        step = _value(path, number, "step", record["step"])
        if step is None:
            raise InputError(path, number, "a record without a step")
        row = by_step.setdefault(int(step), {"step": step})
        row.update(kept)
    return [by_step[step] for step in sorted(by_step)]


def read_curves(source: PathLike, label: str | None = None) -> Curves:
    """The curves of a training output folder (its metrics.csv, else its train.log) or of a metrics.csv file."""
    path = Path(source)
    if path.is_dir():
        if (path / METRICS_CSV).is_file():
            rows = read_metrics_csv(path / METRICS_CSV)
        elif (path / TRAIN_LOG).is_file():
            rows = read_train_log(path / TRAIN_LOG)
        else:
            raise InputError(path, None, f"no {METRICS_CSV} or {TRAIN_LOG}: not a rankkit train output folder")
    elif path.is_file():
        rows = read_train_log(path) if path.name.endswith(".log") else read_metrics_csv(path)
    else:
        raise InputError(path, None, "no such folder or file")
    if not rows:
        raise InputError(path, None, "no logged training step yet")
    return Curves(label or (path.name if path.is_dir() else path.parent.name or str(path)), rows)


def _cell(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))


class TrainingCurves:
    """Writes one run's ``metrics.csv``, ``training.png`` and TensorBoard events (the main process only)."""

    def __init__(self, output: Path, *, title: str, report_to: Sequence[str] = (), resume_step: int | None = None) -> None:
        self.output = Path(output)
        self.csv = self.output / METRICS_CSV
        self.png = self.output / TRAINING_PNG
        self.title = title
        self.curves = Curves(self.output.name)
        self.offset = 0.0  # seconds of the interrupted run, when resumed
        if resume_step is not None:
            self._resume(resume_step)
        else:
            self._rewrite()
        self.tensorboard: Any = None
        if "tensorboard" in report_to:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step: events a resumed run will redo are dropped from the view.
            self.tensorboard = SummaryWriter(str(self.output / TENSORBOARD_DIR), purge_step=resume_step)

    def _resume(self, step: int) -> None:
        """Keep the rows up to ``step`` (rebuilt from train.log when an older run wrote no metrics.csv)."""
        rows: list[dict[str, float]] = []
        if self.csv.is_file():
            try:
                rows = read_metrics_csv(self.csv)
            except InputError:
                rows = []
        elif (self.output / TRAIN_LOG).is_file():
            rows = read_train_log(self.output / TRAIN_LOG)
        self.curves.rows = [row for row in rows if row["step"] <= step]
        self.offset = max((row.get("seconds", 0.0) for row in self.curves.rows), default=0.0)
        self._rewrite()

    def _rewrite(self) -> None:
        with atomic_write(self.csv) as handle:
            handle.write(",".join(COLUMNS) + "\n")
            for row in self.curves.rows:
                handle.write(",".join(_cell(row.get(c)) for c in COLUMNS) + "\n")

    def log(self, step: int, epoch: int, *, loss: float, lr: float, seconds: float,
            dev: Mapping[str, float] | None = None) -> None:
        """One row: appended to metrics.csv (and sent to TensorBoard)."""
        row = {"step": float(step), "epoch": float(epoch), "loss": float(loss), "lr": float(lr),
               "seconds": round(self.offset + seconds, 3)}
        row.update({k: float(v) for k, v in (dev or {}).items() if k in DEV_COLUMNS})
        self.curves.rows.append(row)
        with open(self.csv, "a", encoding="utf-8", newline="\n") as handle:
            handle.write(",".join(_cell(row.get(c)) for c in COLUMNS) + "\n")
        if self.tensorboard is not None:
            self.tensorboard.add_scalar("train/loss", loss, step)
            self.tensorboard.add_scalar("train/lr", lr, step)
            for key, value in (dev or {}).items():
                if key in DEV_COLUMNS:
                    self.tensorboard.add_scalar("dev/" + key.removeprefix("dev_"), value, step)
            self.tensorboard.flush()

    def plot(self) -> None:
        """Redraw training.png; a picture that cannot be drawn is a warning, never the end of a training run."""
        from rankkit.console import warn

        try:
            plot_curves([self.curves], self.png, title=self.title)
        except (OSError, RankkitError, ValueError, RuntimeError) as err:
            warn(f"could not draw {self.png}: {err}")

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()
            self.tensorboard = None


def smooth(values: Sequence[float], weight: float = 0.6) -> list[float]:
    """TensorBoard's smoothing: a debiased exponential moving average over the logged values."""
    out, last, norm = [], 0.0, 0.0
    for value in values:
        last = weight * last + (1 - weight) * value
        norm = weight * norm + (1 - weight)
        out.append(last / norm)
    return out


def plot_curves(runs: Sequence[Curves], path: PathLike, *, title: str | None = None,
                metric: str | None = None) -> None:
    """Write :func:`training_figure` as a PNG, atomically (a reader never sees half a picture)."""
    fig = training_figure(runs, title=title, metric=metric)
    buffer = io.BytesIO()
    # No "Software" metadata (it names the matplotlib version): the same curves, the same bytes.
    fig.savefig(buffer, format="png", metadata={"Software": None})
    with atomic_write(path) as handle:
        handle.flush()
        handle.buffer.write(buffer.getvalue())  # type: ignore[attr-defined]


def training_figure(runs: Sequence[Curves], *, title: str | None = None, metric: str | None = None) -> Any:
    """A matplotlib Figure of training loss (top) and dev metric (bottom) against the step for one or more runs.

    One run: each logged loss (thin) and its smoothed line, every dev metric, the best dev MRR marked.
    Several runs: one colour per run, the smoothed loss and the dev ``metric`` (default: dev MRR).
    """
    from matplotlib.figure import Figure  # Agg canvas, no pyplot state

    if not runs:
        raise RankkitError("no training run to plot")
    if metric is not None and metric not in DEV_COLUMNS:
        raise RankkitError(f"--metric must be one of {', '.join(DEV_COLUMNS)}, got {metric!r}")
    single = len(runs) == 1
    fig = Figure(figsize=(8.0, 6.0), dpi=100, layout="constrained")
    loss_ax, dev_ax = fig.subplots(2, 1, sharex=True)
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for run, color in zip(runs, colors):
        steps, losses = run.series("loss")
        if not steps:
            continue
        if single:
            loss_ax.plot(steps, losses, color=color, linewidth=0.8, alpha=0.35, marker="." if len(steps) < 60 else None,
                         label="loss (each logged step)")
            loss_ax.plot(steps, smooth(losses), color=color, linewidth=1.8, label="smoothed (EMA 0.6)")
        else:
            loss_ax.plot(steps, losses, color=color, linewidth=0.6, alpha=0.25)
            loss_ax.plot(steps, smooth(losses), color=color, linewidth=1.6, label=run.label)
    loss_ax.set_ylabel("training loss")
    loss_ax.grid(True, linewidth=0.3)
    loss_ax.legend(fontsize=8)
    loss_ax.set_title(title or ("training: " + ", ".join(r.label for r in runs)), fontsize=10)
    drawn = False
    for run, color in zip(runs, colors):
        columns = run.dev_columns() if single and metric is None else [metric or "dev_mrr"]
        for j, column in enumerate(columns):
            steps, values = run.series(column)
            if not steps:
                continue
            drawn = True
            name = DEV_NAMES.get(column, column)
            style = {"color": f"C{j}" if single else color, "marker": "o", "markersize": 4, "linewidth": 1.4}
            dev_ax.plot(steps, values, label=name if single else run.label, **style)
            if column == "dev_mrr" or not single:
                best = max(range(len(values)), key=values.__getitem__)
                dev_ax.plot([steps[best]], [values[best]], marker="*", markersize=12, color=style["color"],
                            linestyle="none", label=f"best {name} {values[best]:.4f} (step {int(steps[best])})"
                            if single else None)
    if drawn and not single:
        dev_ax.plot([], [], marker="*", markersize=10, linestyle="none", color="0.3", label="best of each run")
    if drawn:
        dev_ax.set_ylabel(DEV_NAMES.get(metric or "", "dev metric") if not single or metric else "dev metric")
        dev_ax.legend(fontsize=8)
    else:
        dev_ax.set_ylabel("dev metric")
        dev_ax.text(0.5, 0.5, "no dev evaluation (train with --dev GROUPS)", ha="center", va="center",
                    transform=dev_ax.transAxes, fontsize=9, color="0.4")
        dev_ax.set_yticks([])
    dev_ax.grid(True, linewidth=0.3)
    dev_ax.set_xlabel("optimiser step")
    return fig


def steps_table(runs: Iterable[Curves]) -> list[str]:
    """One summary line per run: steps logged, last loss, best dev MRR (what plot-training prints)."""
    lines = []
    for run in runs:
        steps, losses = run.series("loss")
        dev_steps, dev = run.series("dev_mrr")
        line = f"{run.label}: {len(steps)} logged steps up to step {int(steps[-1]) if steps else 0}"
        if losses:
            line += f", last loss {losses[-1]:.4f}"
        if dev:
            best = max(range(len(dev)), key=dev.__getitem__)
            line += f", best dev MRR {dev[best]:.4f} at step {int(dev_steps[best])}"
        lines.append(line)
    return lines


__all__ = ["COLUMNS", "Curves", "DEV_COLUMNS", "METRICS_CSV", "REPORT_TO", "TENSORBOARD_DIR", "TRAINING_PNG",
           "TrainingCurves", "check_report_to", "plot_curves", "read_curves", "read_metrics_csv", "read_train_log",
           "smooth", "steps_table", "training_figure"]
