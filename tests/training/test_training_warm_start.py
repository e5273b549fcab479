"""``--init-checkpoint``: weights carried tensor by tensor into the same or a compatible model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from training_helpers import tiny_backbone, write_groups

from rankkit.errors import InputError
from rankkit.models import MODELS, create_model
from rankkit.models.checkpoint import read_meta
from rankkit.training import TrainConfig, train
from rankkit.training.warm_start import carry_weights


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("warm")
    paths = {"backbone": tiny_backbone(root / "tiny", dropout=0.0), "wide": tiny_backbone(root / "wide", hidden=32),
             "groups": write_groups(root / "groups.jsonl", count=8, negatives=3)}
    for name in ("mono", "repbert", "set-encoder", "densetrans"):
        extra = {"d_model": 12, "num_heads": 2} if name == "densetrans" else {}
        train(TrainConfig(model=name, train=[paths["groups"]], output=root / name, backbone=paths["backbone"],
                          max_steps=2, batch_size=4, group_size=3, lr=1e-2, warmup=0, device="cpu",
                          model_options=extra))
        paths[name] = root / name
    return paths


def saved(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def test_same_model_carries_every_tensor(data: dict[str, Path]) -> None:
    model = create_model("set-encoder", data["backbone"])
    report = carry_weights(model, data["set-encoder"])
    state, source = model.state_dict(), saved(data["set-encoder"])
    assert report.fresh == [] and report.unused == [] and len(report.carried) == len(state)
    for name, tensor in state.items():
        assert torch.equal(tensor, source[name]), name


def test_mono_encoder_into_matrank_head_fresh(data: dict[str, Path]) -> None:
    torch.manual_seed(1)
    fresh = create_model("matrank", data["backbone"]).state_dict()
    torch.manual_seed(1)
    model = create_model("matrank", data["backbone"])
    report = carry_weights(model, data["mono"])
    # mono checkpoints are HF sequence-classifier folders (file names without "pairs.encoder.").
    state, source = model.state_dict(), {"pairs.encoder." + k: v for k, v in saved(data["mono"]).items()}
    encoder = [k for k in state if k.startswith("pairs.encoder.")]
    assert encoder and set(encoder) <= set(report.carried)
    for name in encoder:  # mono is a sequence classifier: its encoder sits under .bert
        assert report.carried[name] == "pairs.encoder.bert." + name[len("pairs.encoder."):]
        assert torch.equal(state[name], source[report.carried[name]]), name
        assert not torch.equal(state[name], fresh[name]) or "pooler" in name or "position_ids" in name
    assert report.fresh == ["mlp_in.bias", "mlp_in.weight", "mlp_out.bias", "mlp_out.weight"]
    for name in report.fresh:  # the new head keeps the seed's own initialisation
        assert torch.equal(state[name], fresh[name])
    assert report.unused == ["pairs.encoder.classifier.bias", "pairs.encoder.classifier.weight"]


def test_repbert_encoder_renamed_into_mono(data: dict[str, Path]) -> None:
    model = create_model("mono", data["backbone"])
    report = carry_weights(model, data["repbert"])
    source = saved(data["repbert"])  # RepBERT saves the bare HF encoder: names without a prefix
    state = model.state_dict()
    inner = "pairs.encoder.bert."  # mono's sequence classifier keeps its encoder under .bert
    carried = {k: v for k, v in report.carried.items() if k.startswith("pairs.encoder.")}
    assert len(carried) == len([k for k in state if k.startswith(inner)])
    for target, src in carried.items():
        assert src == "encoder." + target[len(inner):]
        assert torch.equal(state[target], source[src[len("encoder."):]]), target
    assert "pairs.encoder.classifier.weight" in report.fresh


@pytest.mark.parametrize(("name", "source", "message"), [
    ("mono", "densetrans", "a densetrans checkpoint shares no weights with a mono model"),
    ("mono", "wide-mono", r"weight\(s\) of another shape than the mono model.s"),
])
def test_refusals_are_one_line(data: dict[str, Path], name: str, source: str, message: str) -> None:
    if source == "wide-mono":
        model = create_model(name, data["wide"])
        folder = data["mono"]
    else:
        model = create_model(name, data["backbone"])
        folder = data[source]
    with pytest.raises(InputError, match=message) as err:
        carry_weights(model, folder)
    assert "\n" not in str(err.value)


def test_cli_init_checkpoint_logs_and_records(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "stage2"
    result = cli("train", "--model", "set-encoder", "--train", data["groups"], "--output", out, "--backbone",
                 data["backbone"], "--init-checkpoint", data["set-encoder"], "--max-steps", 1, "--batch-size", 4,
                 "--group-size", 3, "--device", "cpu", "--lr", 0)
    assert result.code == 0, result.stderr
    assert f"initialised from {data['set-encoder']} (set-encoder): carried" in result.stderr
    assert read_meta(out)["training"]["init_checkpoint"] == str(data["set-encoder"])
    first = json.loads((out / "train.log").read_text().splitlines()[0])
    assert first["event"] == "init" and first["fresh"] == [] and first["carried"] == len(saved(out))
    # lr 0: the one step changes nothing, so the output holds the stage-1 weights exactly
    a, b = saved(out), saved(data["set-encoder"])
    assert all(torch.equal(a[k], b[k]) for k in a)
    bad = cli("train", "--model", "mono", "--train", data["groups"], "--output", tmp_path / "x", "--backbone",
              data["backbone"], "--init-checkpoint", data["groups"], "--max-steps", 1, "--batch-size", 4, "--device", "cpu")
    assert bad.code == 2 and "no such checkpoint folder" in bad.stderr and "Traceback" not in bad.stderr
    assert sorted(MODELS)  # registry loaded
