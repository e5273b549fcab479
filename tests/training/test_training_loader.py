"""Batches prepared off the training thread (``--workers N``, rankkit.training.loader)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from training_helpers import tiny_backbone, write_groups

from rankkit.errors import RankkitError
from rankkit.formats import read_groups
from rankkit.models import create_model
from rankkit.training import TrainConfig, train
from rankkit.training.loader import step_batches
from rankkit.training.sampling import MicroBatches


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("loader")
    return {"backbone": tiny_backbone(root / "tiny"), "groups": write_groups(root / "groups.jsonl")}


def config(data: dict[str, Path], output: Path, **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = dict(model="repbert", train=[data["groups"]], output=output, backbone=data["backbone"],
                                    max_steps=8, batch_size=4, group_size=3, grad_accum=2, lr=1e-3, log_every=1,
                                    seed=5, device="cpu")
    settings.update(overrides)
    return TrainConfig(**settings)


def losses(output: Path) -> list[float]:
    lines = [json.loads(line) for line in (output / "train.log").read_text().splitlines()]
    return [r["loss"] for r in lines if "loss" in r]


def test_workers_hand_over_the_in_thread_batches_in_order(data: dict[str, Path]) -> None:
    model = create_model("mono", data["backbone"])
    batches = MicroBatches(read_groups(data["groups"]), seed=2, batch_size=3, group_size=4, grad_accum=2, rank=0,
                           world=1, teacher=None)
    here = list(step_batches(batches, model, 3, 9, workers=0))
    there = list(step_batches(batches, model, 3, 9, workers=2))
    assert len(here) == len(there) == 6
    for a_step, b_step in zip(here, there):
        assert len(a_step) == len(b_step) == 2
        for a, b in zip(a_step, b_step):
            assert (a.qids, a.docids) == (b.qids, b.docids)
            assert a.features is not None and b.features is not None
            assert all(torch.equal(x, y) for x, y in zip(a.features.pairs.values(), b.features.pairs.values()))


@pytest.mark.parametrize("model", ["repbert", "mono"])
def test_training_with_workers_gives_the_same_losses_and_weights(data: dict[str, Path], tmp_path: Path,
                                                                 model: str) -> None:
    train(config(data, tmp_path / "thread", model=model))
    train(config(data, tmp_path / "workers", model=model, workers=2))
    assert losses(tmp_path / "workers") == losses(tmp_path / "thread")
    assert (tmp_path / "workers" / "model.safetensors").read_bytes() == (tmp_path / "thread" / "model.safetensors").read_bytes()


def test_resume_with_workers_is_exact(data: dict[str, Path], tmp_path: Path) -> None:
    full = tmp_path / "full"
    train(config(data, full, save_every=3, workers=2))
    part = tmp_path / "part"

    def crash(info: Any) -> None:
        if info.step == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config(data, part, save_every=3, workers=2), callbacks=[crash])
    train(config(data, part, save_every=3, workers=2, resume=True))
    assert losses(part) == losses(full)
    assert (part / "model.safetensors").read_bytes() == (full / "model.safetensors").read_bytes()


def test_negative_workers_are_refused(data: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(RankkitError, match="--workers must be at least 0"):
        train(config(data, tmp_path / "x", workers=-1))


def test_cli_workers_option(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    args = ["train", "--model", "repbert", "--train", data["groups"], "--backbone", data["backbone"], "--max-steps", 2,
            "--batch-size", 4, "--group-size", 3, "--device", "cpu", "--log-every", 1]
    assert cli(*args, "--output", tmp_path / "a", "--workers", 1).code == 0
    assert cli(*args, "--output", tmp_path / "b").code == 0
    assert losses(tmp_path / "a") == losses(tmp_path / "b")
    bad = cli(*args, "--output", tmp_path / "c", "--workers", -1)
    assert bad.code == 2 and "--workers must be at least 0" in bad.stderr


def test_workers_auto_is_none_on_the_cpu_and_a_thread_on_cuda() -> None:
    """``--workers auto`` (issue 36): on a CPU the training thread prepares its batches (workers would take the
    step's cores); on CUDA a thread prepares the next steps (faster than worker processes on an H200); a number is
    that many processes."""
    from rankkit.training.config import workers_setting
    from rankkit.training.loader import resolve_workers

    assert resolve_workers(None, torch.device("cpu"))[:2] == (0, False)
    assert resolve_workers(None, torch.device("cuda"))[:2] == (0, True)
    assert resolve_workers(3, torch.device("cuda")) == (3, False, "as given")
    assert [workers_setting(v) for v in ("auto", "AUTO", None, "2", 0)] == [None, None, None, 2, 0]
    for bad in ("lots", "-1", 1.5, True):
        with pytest.raises(RankkitError, match="--workers"):
            workers_setting(bad)


def test_a_prefetch_thread_hands_over_the_same_batches(data: dict[str, Path]) -> None:
    model = create_model("repbert", data["backbone"])
    batches = MicroBatches(read_groups(data["groups"]), seed=3, batch_size=4, group_size=3, grad_accum=1, rank=0, world=1,
                           teacher=None)
    here = list(step_batches(batches, model, 2, 7))
    there = list(step_batches(batches, model, 2, 7, thread=True))
    assert [[b.qids for b in step] for step in here] == [[b.qids for b in step] for step in there]
    assert all(torch.equal(a.features.queries["input_ids"], b.features.queries["input_ids"])
               for x, y in zip(here, there) for a, b in zip(x, y))


def test_workers_auto_is_recorded(data: dict[str, Path], tmp_path: Path, cli: Any) -> None:
    """The command's default is auto; what it chose is in rankkit.json and the training log line."""
    result = cli("train", "--model", "repbert", "--train", data["groups"], "--backbone", data["backbone"], "--output",
                 tmp_path / "out", "--max-steps", "2", "--batch-size", "2", "--group-size", "2", "--device", "cpu")
    assert result.code == 0, result.stderr
    assert json.loads((tmp_path / "out" / "rankkit.json").read_text())["training"]["workers"] == 0
    assert "0 batch workers (--workers auto: CPU training" in result.stderr
    bad = cli("train", "--model", "repbert", "--train", data["groups"], "--output", tmp_path / "bad", "--workers", "x")
    assert bad.code == 2 and bad.stderr.strip() == "rankkit: error: --workers must be auto or a number of processes, got 'x'"


def test_a_workers_rankkit_error_is_one_line(data: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """An error a worker process meets (a training file changed under it, a missing passage) reaches the command
    as the rankkit error it is (one line, its exit code), not as torch's wrapped RuntimeError and a traceback."""
    from rankkit.errors import EnvironmentFailure, InputError

    model = create_model("repbert", data["backbone"])
    batches = MicroBatches(read_groups(data["groups"]), seed=3, batch_size=4, group_size=3, grad_accum=1, rank=0,
                           world=1, teacher=None)
    calls = {"n": 0}
    prepare = model.prepare

    def failing(batch: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise InputError(data["groups"], 7, "changed while training read it")
        return prepare(batch)

    monkeypatch.setattr(model, "prepare", failing)
    with pytest.raises(RankkitError, match=r"groups.jsonl:7: changed while training read it") as caught:
        list(step_batches(batches, model, 0, 6, workers=1))
    assert type(caught.value) is RankkitError and caught.value.exit_code == 2
    calls["n"] = 0
    monkeypatch.setattr(model, "prepare", lambda batch: (_ for _ in ()).throw(EnvironmentFailure("disk gone")))
    with pytest.raises(EnvironmentFailure, match="disk gone"):
        list(step_batches(batches, model, 0, 2, workers=1))
