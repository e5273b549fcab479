"""``rankkit train --precision``: bf16 autocast trains every model, weights and checkpoints stay fp32."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from training_helpers import small_model_options, tiny_backbone, write_groups

from rankkit.errors import RankkitError
from rankkit.models import MODELS
from rankkit.models.checkpoint import load_model, read_meta, save_model
from rankkit.training import StepInfo, TrainConfig, train


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("precision")
    # 4 groups with exactly group_size - 1 negatives: every step sees the same candidates, so the
    # loss of a learning model must fall step after step.
    return {"backbone": tiny_backbone(root / "tiny", dropout=0.0),
            "groups": write_groups(root / "groups.jsonl", count=4, negatives=2),
            "more": write_groups(root / "more.jsonl", count=16, negatives=4)}


def config(data: dict[str, Path], name: str, output: Path, **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = dict(model=name, train=[data["groups"]], output=output, backbone=data["backbone"],
                                    max_steps=8, batch_size=4, group_size=3, lr=3e-3, warmup=0, log_every=1,
                                    device="cpu", seed=3, precision="bf16", model_options=small_model_options(name))
    settings.update(overrides)
    return TrainConfig(**settings)


def log_losses(output: Path) -> list[float]:
    lines = [json.loads(line) for line in (output / "train.log").read_text().splitlines()]
    return [r["loss"] for r in lines if "loss" in r]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_trains_under_bf16_and_saves_fp32(data: dict[str, Path], tmp_path: Path, name: str) -> None:
    out = tmp_path / "ck"
    train(config(data, name, out))
    losses = log_losses(out)
    assert len(losses) == 8 and all(map(torch.isfinite, torch.tensor(losses)))
    assert losses[-1] < losses[0], losses
    weights = load_file(str(out / "model.safetensors"))
    floating = {k: v.dtype for k, v in weights.items() if v.is_floating_point()}
    assert floating and set(floating.values()) == {torch.float32}
    assert read_meta(out)["training"]["precision"] == "bf16"
    model = load_model(out)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    save_model(model, tmp_path / "again", {})
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == (out / "model.safetensors").read_bytes()


def test_bf16_resume_is_exact_and_precision_must_match(data: dict[str, Path], tmp_path: Path) -> None:
    full = tmp_path / "full"
    train(config(data, "mono", full, train=[data["more"]], max_steps=4, save_every=2))
    cut = tmp_path / "cut"

    def crash(info: StepInfo) -> None:
        if info.step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config(data, "mono", cut, train=[data["more"]], max_steps=4, save_every=2), callbacks=[crash])
    with pytest.raises(RankkitError, match=r"settings differ from the interrupted run \(precision\)"):
        train(config(data, "mono", cut, train=[data["more"]], max_steps=4, save_every=2, precision="fp32",
                     resume=True))
    train(config(data, "mono", cut, train=[data["more"]], max_steps=4, save_every=2, resume=True))
    assert log_losses(cut) == pytest.approx(log_losses(full), rel=1e-6)
    a, b = load_file(str(full / "model.safetensors")), load_file(str(cut / "model.safetensors"))
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_fp32_resume_keys_unchanged(data: dict[str, Path], tmp_path: Path) -> None:
    """fp32 runs record no precision among the resume keys: older step checkpoints still resume."""
    out = tmp_path / "fp32"
    train(config(data, "repbert", out, precision="fp32", max_steps=2, save_every=1))
    state = json.loads((out / "checkpoints" / "step-00000001" / "trainer_state.json").read_text())
    assert "precision" not in state["resume_keys"]
    assert read_meta(out)["training"]["precision"] == "fp32"


def test_cli_refuses_fp16_on_cpu_and_unknown_precision(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    common = ["train", "--model", "mono", "--train", data["groups"], "--backbone", data["backbone"],
              "--max-steps", 1, "--batch-size", 2, "--device", "cpu"]
    result = cli(*common, "--output", tmp_path / "a", "--precision", "fp16")
    assert result.code == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "rankkit: error: --precision fp16 needs a CUDA device (fp16 autocast is not supported on CPU); "
        "use bf16 or fp32 on CPU"]
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())
    result = cli(*common, "--output", tmp_path / "b", "--precision", "int4")
    assert result.code == 2 and "unknown precision 'int4'" in result.stderr
    result = cli(*common, "--output", tmp_path / "c", "--precision", "bf16")
    assert result.code == 0, result.stderr


def test_loss_scaling_path_resumes_exactly(data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fp16's GradScaler path (scale, unscale before clipping, skipped steps, state in optimizer.pt),
    run on the CPU: fp16 autocast is CUDA-only, so the forward runs under bf16 autocast here while the
    trainer takes its fp16 branch (torch's GradScaler works on CPU tensors)."""
    from rankkit import devices
    from rankkit.training import loop

    monkeypatch.setattr(loop, "check_precision", lambda precision, device: None)
    monkeypatch.setattr(loop, "autocast", lambda precision, device: devices.autocast("bf16", device))
    full = tmp_path / "full"
    train(config(data, "mono", full, train=[data["more"]], max_steps=4, save_every=2, precision="fp16"))
    optim = torch.load(full / "checkpoints" / "step-00000002" / "optimizer.pt", weights_only=True)
    assert optim["scaler"]["scale"] > 0
    cut = tmp_path / "cut"

    def crash(info: StepInfo) -> None:
        if info.step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config(data, "mono", cut, train=[data["more"]], max_steps=4, save_every=2, precision="fp16"),
              callbacks=[crash])
    train(config(data, "mono", cut, train=[data["more"]], max_steps=4, save_every=2, precision="fp16", resume=True))
    assert log_losses(cut) == pytest.approx(log_losses(full), rel=1e-6)
    assert all(map(torch.isfinite, torch.tensor(log_losses(full))))
    weights = load_file(str(full / "model.safetensors"))
    assert {v.dtype for v in weights.values() if v.is_floating_point()} == {torch.float32}
