"""Learning-rate schedules: linear decay to a fraction of the peak (--lr-decay-to) and PARADE's
inverse-time decay (--lr-schedule inverse-time), the default unchanged bit for bit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from training_helpers import tiny_backbone, write_groups

from rankkit.errors import RankkitError
from rankkit.models.checkpoint import read_meta
from rankkit.training import TrainConfig, train
from rankkit.training.optim import inverse_time_schedule, linear_schedule, lr_schedule


def old_linear(warmup: int, total: int, step: int) -> float:
    """rankkit's schedule before --lr-decay-to existed (copied from the 2026-11-26 optim.py)."""
    if step < warmup:
        return (step + 1) / (warmup + 1)
    return max(0.0, (total - step) / max(1, total - warmup))


def test_default_linear_decay_is_the_old_schedule_bit_for_bit() -> None:
    for warmup, total in [(0, 1), (0, 7), (2, 10), (3, 3), (100, 6144), (1700, 6120)]:
        f = linear_schedule(warmup, total)
        assert all(f(s) == old_linear(warmup, total, s) for s in range(0, total + 2, max(1, total // 97)))


def test_linear_decay_to_a_fraction_of_the_peak() -> None:
    f = linear_schedule(2, 10, 0.1)
    assert [round(f(s), 4) for s in (0, 1, 2, 6, 10)] == [0.3333, 0.6667, 1.0, 0.55, 0.1]
    constant = linear_schedule(0, 10, 1.0)
    assert [constant(s) for s in range(11)] == [1.0] * 11
    with pytest.raises(RankkitError, match="between 0 and 1"):
        linear_schedule(0, 10, 1.5)


def test_inverse_time_is_capreolus_linear_decay() -> None:
    """PARADE's "linear decay rate of 0.1": Capreolus multiplies by 1 / (1 + 0.1 x epochs after warm-up)."""
    f = inverse_time_schedule(10, 0.1, 5.0)
    assert f(9) == pytest.approx(10 / 11)
    assert f(10) == 1.0
    assert f(15) == pytest.approx(1 / 1.1)  # one "epoch" of 5 steps after the warm-up
    assert f(10 + 26 * 5) == pytest.approx(1 / 3.6)  # PARADE: 26 epochs after 10 of warm-up end at 0.278
    assert lr_schedule("inverse-time", 10, 200, rate=0.1, every=5.0)(15) == f(15)
    with pytest.raises(RankkitError, match="needs --lr-decay-rate"):
        lr_schedule("inverse-time", 10, 200)
    with pytest.raises(RankkitError, match="unknown --lr-schedule"):
        lr_schedule("cosine", 10, 200)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("schedule")
    return {"backbone": tiny_backbone(root / "tiny"), "groups": write_groups(root / "groups.jsonl", count=16)}


def logged_lrs(output: Path) -> list[float]:
    lines = [json.loads(line) for line in (output / "train.log").read_text().splitlines()]
    return [r["lr"] for r in lines if "lr" in r]


def run(data: dict[str, Path], output: Path, **schedule: Any) -> Path:
    train(TrainConfig(model="mono", train=[data["groups"]], output=output, backbone=data["backbone"], max_steps=6,
                      batch_size=2, group_size=3, lr=1e-3, warmup=2, log_every=1, seed=3, device="cpu", **schedule))
    return output


def test_training_follows_the_schedule_and_records_it(data: dict[str, Path], tmp_path: Path) -> None:
    linear = run(data, tmp_path / "linear")
    tenth = run(data, tmp_path / "tenth", lr_decay_to=0.1)
    inverse = run(data, tmp_path / "inverse", lr_schedule="inverse-time", lr_decay_rate=0.5, lr_decay_every=2.0)
    f0, f1, fi = linear_schedule(2, 6), linear_schedule(2, 6, 0.1), inverse_time_schedule(2, 0.5, 2.0)
    # train.log: the rate each of the 6 steps ran with.
    assert logged_lrs(linear) == pytest.approx([1e-3 * f0(s) for s in range(6)])
    assert logged_lrs(tenth) == pytest.approx([1e-3 * f1(s) for s in range(6)])
    assert logged_lrs(inverse) == pytest.approx([1e-3 * fi(s) for s in range(6)])
    # The default writes the record it wrote before the options existed; the others record themselves.
    assert not {"lr_schedule", "lr_decay_to"} & set(read_meta(linear)["training"])
    assert read_meta(tenth)["training"]["lr_decay_to"] == 0.1
    assert read_meta(inverse)["training"]["lr_schedule"] == "inverse-time"
    # The same seed and the same schedule give the same weights; another schedule, other weights.
    again = run(data, tmp_path / "again")
    assert (again / "model.safetensors").read_bytes() == (linear / "model.safetensors").read_bytes()
    assert (tenth / "model.safetensors").read_bytes() != (linear / "model.safetensors").read_bytes()


@pytest.mark.parametrize("args, message", [
    (["--lr-decay-to", "1.5"], "--lr-decay-to must be between 0 and 1"),
    (["--lr-schedule", "cosine"], "unknown --lr-schedule 'cosine'"),
    (["--lr-schedule", "inverse-time"], "needs --lr-decay-rate"),
    (["--lr-decay-rate", "0.1"], "set --lr-schedule inverse-time"),
    (["--lr-schedule", "inverse-time", "--lr-decay-rate", "0.1", "--lr-decay-every", "0"], "--lr-decay-every must be"),
    (["--lr-schedule", "inverse-time", "--lr-decay-rate", "0.1", "--lr-decay-every", "5", "--lr-decay-to", "0.1"],
     "--lr-decay-to sets where --lr-schedule linear ends"),
])
def test_bad_schedule_options_are_one_line_errors(cli: Any, data: dict[str, Path], tmp_path: Path, args: list[str],
                                                  message: str) -> None:
    result = cli("train", "--model", "mono", "--train", data["groups"], "--output", tmp_path / "o", "--backbone",
                 data["backbone"], "--max-steps", 1, "--device", "cpu", *args)
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    assert not (tmp_path / "o").exists()
