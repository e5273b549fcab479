"""Training you can watch (issue 27): metrics.csv, training.png, --report-to tensorboard, rankkit plot-training."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from training_helpers import tiny_backbone, write_groups

from rankkit.errors import RankkitError
from rankkit.training import StepInfo, TrainConfig, train
from rankkit.training.curves import (
    COLUMNS, DEV_COLUMNS, METRICS_CSV, TRAINING_PNG, Curves, read_curves, read_train_log, smooth, training_figure,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("curves")
    return {"backbone": tiny_backbone(root / "tiny"), "groups": write_groups(root / "groups.jsonl"),
            "dev": write_groups(root / "dev.jsonl", count=12, seed=5)}


def config(data: dict[str, Path], output: Path, **overrides: Any) -> TrainConfig:
    # 48 groups / 8 per step: 6 steps per epoch, 2 epochs, a dev evaluation at steps 6 and 12.
    settings: dict[str, Any] = dict(model="repbert", train=[data["groups"]], output=output, backbone=data["backbone"],
                                    epochs=2, batch_size=8, group_size=3, lr=2e-3, log_every=4, seed=3, device="cpu",
                                    dev=[data["dev"]])
    settings.update(overrides)
    return TrainConfig(**settings)


def csv_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def log_records(output: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (output / "train.log").read_text().splitlines()]


def test_a_short_training_run_writes_metrics_csv_and_training_png(data: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "run"
    train(config(data, out))
    header, rows = csv_rows(out / METRICS_CSV)
    assert header == list(COLUMNS) == ["step", "epoch", "loss", "lr", "dev_mrr", "dev_ndcg@10", "seconds"]
    # A row every --log-every 4 steps, at each epoch's dev evaluation (6, 12) and at the last step (12).
    assert [int(r["step"]) for r in rows] == [4, 6, 8, 12]
    assert [r["epoch"] for r in rows] == ["0", "0", "1", "1"]
    dev_rows = [r for r in rows if r["dev_mrr"]]
    assert [int(r["step"]) for r in dev_rows] == [6, 12] and all(r["dev_ndcg@10"] for r in dev_rows)
    assert rows[0]["dev_mrr"] == "" and rows[2]["dev_ndcg@10"] == ""
    seconds = [float(r["seconds"]) for r in rows]
    assert seconds == sorted(seconds) and seconds[0] > 0
    # The same numbers as train.log (its JSON lines stay, unchanged).
    log = log_records(out)
    losses = {r["step"]: r for r in log if "loss" in r}
    devs = {r["step"]: r for r in log if "dev_mrr" in r}
    for row in rows:
        step = int(row["step"])
        if step in losses:
            assert float(row["loss"]) == losses[step]["loss"] and float(row["lr"]) == losses[step]["lr"]
        if step in devs:
            assert float(row["dev_mrr"]) == devs[step]["dev_mrr"]
            assert float(row["dev_ndcg@10"]) == devs[step]["dev_ndcg@10"]
    assert set(devs) == {6, 12} and log[-1]["event"] == "done"
    png = (out / TRAINING_PNG).read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temporary left behind
    # Deterministic on CPU: the same seed draws the same picture (no time axis, no metadata that varies).
    again = tmp_path / "again" / "run"  # same folder name: the title names it
    train(config(data, again))
    assert (again / TRAINING_PNG).read_bytes() == png
    assert [r["loss"] for r in csv_rows(again / METRICS_CSV)[1]] == [r["loss"] for r in rows]


def test_the_picture_has_labelled_axes_and_both_curves(data: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "run"
    train(config(data, out, log_every=1))
    curves = read_curves(out)
    fig = training_figure([curves])
    loss_ax, dev_ax = fig.axes
    assert loss_ax.get_ylabel() == "training loss" and dev_ax.get_ylabel() == "dev metric"
    assert dev_ax.get_xlabel() == "optimiser step"
    loss_lines = {line.get_label(): line for line in loss_ax.get_lines()}
    assert list(loss_lines["loss (each logged step)"].get_xdata()) == list(range(1, 13))
    assert list(loss_lines["smoothed (EMA 0.6)"].get_ydata()) == pytest.approx(smooth(curves.series("loss")[1]))
    dev_lines = {line.get_label(): line for line in dev_ax.get_lines()}
    assert list(dev_lines["dev MRR"].get_xdata()) == [6, 12] and list(dev_lines["dev nDCG@10"].get_xdata()) == [6, 12]
    best = [name for name in dev_lines if name.startswith("best dev MRR")]
    assert len(best) == 1 and "step" in best[0]
    # Without --dev the lower panel says so instead of staying empty.
    bare = tmp_path / "bare"
    train(config(data, bare, dev=[]))
    _, bare_dev = training_figure([read_curves(bare)]).axes
    assert not bare_dev.get_lines() and "no dev evaluation" in bare_dev.texts[0].get_text()
    assert DEV_COLUMNS == ("dev_mrr", "dev_ndcg@10")


def test_training_png_is_redrawn_at_each_dev_evaluation(data: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "run"
    seen: list[bool] = []

    def look(info: StepInfo) -> None:  # runs before the step's dev evaluation
        seen.append((out / TRAINING_PNG).is_file())

    train(config(data, out), callbacks=[look])
    assert seen[:6] == [False] * 6 and all(seen[6:])  # first drawn at the step-6 dev evaluation, before the end


def same_rows(got: list[dict[str, str]], want: list[dict[str, str]]) -> bool:
    """Equal metrics.csv rows but for the seconds (losses to float rounding: a resumed run restores RNG states)."""
    def numbers(row: dict[str, str]) -> list[float]:
        return [float(row[k]) if row[k] else -1.0 for k in COLUMNS if k != "seconds"]  # -1: an empty cell

    return len(got) == len(want) and all(numbers(g) == pytest.approx(numbers(w), rel=1e-6) for g, w in zip(got, want))


@pytest.mark.parametrize("older_run", [False, True])
def test_resume_continues_metrics_csv(data: dict[str, Path], tmp_path: Path, older_run: bool) -> None:
    whole = tmp_path / "whole"
    train(config(data, whole, log_every=1, save_every=3))
    cut = tmp_path / "cut"

    def crash(info: StepInfo) -> None:
        if info.step == 8:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config(data, cut, log_every=1, save_every=3), callbacks=[crash])
    # Rows of steps 7 and 8 were written before the crash; the resume from step 6 drops and redoes them.
    assert [int(r["step"]) for r in csv_rows(cut / METRICS_CSV)[1]] == list(range(1, 8))
    if older_run:  # a run trained before metrics.csv existed: its rows are rebuilt from train.log
        (cut / METRICS_CSV).unlink()
    train(config(data, cut, log_every=1, save_every=3, resume=True))
    _, rows = csv_rows(cut / METRICS_CSV)
    assert [int(r["step"]) for r in rows] == list(range(1, 13))
    assert same_rows(rows, csv_rows(whole / METRICS_CSV)[1])
    if older_run:
        assert [r["seconds"] for r in rows[:6]] == [""] * 6  # train.log's loss lines hold no seconds: left blank
    else:
        seconds = [float(r["seconds"]) for r in rows]
        assert seconds == sorted(seconds)  # continued from the interrupted run's, not restarted at 0


def test_report_to_tensorboard(data: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    train(config(data, out, report_to=["tensorboard"]))
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == {"train/loss", "train/lr", "dev/mrr", "dev/ndcg@10"}
    _, rows = csv_rows(out / METRICS_CSV)
    assert [e.step for e in events.Scalars("train/loss")] == [int(r["step"]) for r in rows]
    assert [e.value for e in events.Scalars("dev/mrr")] == pytest.approx(
        [float(r["dev_mrr"]) for r in rows if r["dev_mrr"]])


def test_report_to_errors_are_one_line(data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       cli: Any) -> None:
    with pytest.raises(RankkitError, match="--report-to must be tensorboard, got 'wandb'"):
        train(config(data, tmp_path / "a", report_to=["wandb"]))
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a))
    result = cli("train", "--model", "repbert", "--train", data["groups"], "--output", tmp_path / "b",
                 "--backbone", data["backbone"], "--max-steps", "1", "--device", "cpu", "--report-to", "tensorboard")
    assert result.code == 2 and result.stderr == (
        "rankkit: error: --report-to tensorboard needs the tensorboard package, which is not installed "
        "(pip install tensorboard)\n")
    assert not (tmp_path / "b").exists()  # refused before any work


def test_plot_training_compares_runs(data: dict[str, Path], tmp_path: Path, cli: Any) -> None:
    a, b = tmp_path / "lr-2e-3", tmp_path / "lr-1e-4"
    train(config(data, a, log_every=2))
    train(config(data, b, log_every=2, lr=1e-4))
    legacy = tmp_path / "legacy"  # a run trained before metrics.csv: its train.log is read
    legacy.mkdir()
    (legacy / "train.log").write_text((b / "train.log").read_text())
    assert read_curves(legacy).rows == [{k: v for k, v in r.items() if k != "seconds"} for r in read_curves(b).rows]
    png = tmp_path / "cmp.png"
    result = cli("plot-training", a, b, legacy, "--label", "A", "--label", "B", "--label", "old", "-o", png)
    assert result.code == 0, result.stderr
    assert png.read_bytes().startswith(PNG_MAGIC)
    assert "A: 6 logged steps up to step 12, last loss" in result.stderr and "best dev MRR" in result.stderr
    fig = training_figure([read_curves(a, "A"), read_curves(b, "B")], metric="dev_ndcg@10")
    loss_ax, dev_ax = fig.axes
    assert [line.get_label() for line in loss_ax.get_lines() if not line.get_label().startswith("_")] == ["A", "B"]
    assert dev_ax.get_ylabel() == "dev nDCG@10" and loss_ax.get_ylabel() == "training loss"
    assert [line.get_label() for line in dev_ax.get_lines() if not line.get_label().startswith("_")] == [
        "A", "B", "best of each run"]


@pytest.mark.parametrize(("args", "message"), [
    (["nope"], "nope: no such folder or file"),
    (["RUN", "--metric", "ndcg"], "--metric must be one of dev_mrr, dev_ndcg@10, got 'ndcg'"),
    (["RUN", "RUN"], "two runs are labelled"),
    (["RUN", "--label", "a", "--label", "b"], "--label given 2 times for 1 runs"),
    (["EMPTY"], "no metrics.csv or train.log: not a rankkit train output folder"),
])
def test_plot_training_errors_are_one_line(data: dict[str, Path], tmp_path: Path, cli: Any, args: list[str],
                                           message: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / METRICS_CSV).write_text(",".join(COLUMNS) + "\n1,0,0.5,0.001,,,0.1\n")
    (tmp_path / "empty").mkdir()
    given = [str(run) if a == "RUN" else str(tmp_path / "empty") if a == "EMPTY" else
             str(tmp_path / a) if a == "nope" else a for a in args]
    result = cli("plot-training", *given, "-o", tmp_path / "out.png")
    assert result.code == 2 and result.stderr.startswith("rankkit: error: ") and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "out.png").exists()


def test_read_train_log_merges_loss_and_dev_lines(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("\n".join(json.dumps(r) for r in [
        {"event": "warm_start", "from": "x"}, {"step": 2, "epoch": 0, "loss": 0.5, "lr": 1e-3, "examples_per_s": 9},
        {"step": 2, "epoch": 0, "dev_mrr": 0.25, "dev_ndcg@10": 0.5}, {"step": 2, "event": "done", "seconds": 1.0}]) + "\n")
    assert read_train_log(log) == [{"step": 2.0, "epoch": 0.0, "loss": 0.5, "lr": 1e-3, "dev_mrr": 0.25,
                                    "dev_ndcg@10": 0.5}]
    assert Curves("x", read_train_log(log)).dev_columns() == ["dev_mrr", "dev_ndcg@10"]


def test_the_logged_loss_is_the_mean_since_the_previous_log_line(data: dict[str, Path], tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 39: one step's loss was logged, so the bar could end at 3.21 while the final line, metrics.csv and the
    model card said 6.05; each record is now the mean over its steps and says how many (loss_steps)."""
    steps: list[StepInfo] = []
    out = tmp_path / "run"
    capsys.readouterr()
    result = train(config(data, out), [steps.append])
    err = capsys.readouterr().err
    rows = csv_rows(out / METRICS_CSV)[1]
    ends = [int(r["step"]) for r in rows]
    assert ends == [4, 6, 8, 12]  # --log-every 4, the dev evaluations at 6 and 12
    starts = [0, *ends[:-1]]
    means = [sum(s.loss for s in steps[a:b]) / (b - a) for a, b in zip(starts, ends)]
    assert means[-1] != steps[-1].loss  # the last step alone says something else
    assert [float(r["loss"]) for r in rows] == pytest.approx(means, rel=1e-9)
    logged = [r for r in log_records(out) if "loss" in r]
    assert [(r["step"], r["loss_steps"]) for r in logged] == [(4, 4), (6, 2), (8, 2), (12, 4)]
    assert [r["loss"] for r in logged] == pytest.approx(means, rel=1e-12)
    assert result.metrics["loss"] == pytest.approx(means[-1], rel=1e-12) and result.metrics["loss_steps"] == 4
    assert f"loss {means[-1]:.4f}: the mean of the last 4 steps" in err
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"| loss | {means[-1]:.4f} |" in card and "| loss\\_steps | 4 |" in card and "last `loss_steps`" in card
