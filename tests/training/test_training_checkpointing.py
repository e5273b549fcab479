"""``--gradient-checkpointing``: the same gradients with and without, for every model, and less stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from training_helpers import build_model, small_model_options, tiny_backbone, write_groups

from rankkit.formats import read_groups
from rankkit.models import MODELS
from rankkit.models.checkpoint import read_meta
from rankkit.models.inputs import GroupBatch
from rankkit.models.losses import get_loss
from rankkit.training.sampling import collate, sample_group


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("checkpointing")
    # dropout on: the recomputation must replay the same dropout masks (RNG state restored).
    return {"backbone": tiny_backbone(root / "tiny", dropout=0.1),
            "groups": write_groups(root / "groups.jsonl", count=3, negatives=3)}


def stored_bytes_and_grads(model: Any, batch: GroupBatch) -> tuple[int, dict[str, torch.Tensor]]:
    """Bytes kept for the backward pass (saved-tensor hooks) and the gradients of one loss."""
    cls = type(model)
    loss = get_loss(cls.training_defaults.loss, cls.output_type, cls.name)
    stored = 0

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal stored
        stored += tensor.numel() * tensor.element_size()
        return tensor

    model.zero_grad(set_to_none=True)
    torch.manual_seed(5)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        value = loss(model(batch), batch)
    value.backward()
    return stored, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_checkpointing_keeps_gradients_and_stores_less(data: dict[str, Path], name: str) -> None:
    cls = MODELS[name]
    torch.manual_seed(0)
    model = build_model(cls, data["backbone"], small_model_options(name))
    model.train()
    rng = np.random.default_rng(0)
    batch = model.prepare(collate([sample_group(g, 3, rng) for g in read_groups(data["groups"])]))
    plain_bytes, plain = stored_bytes_and_grads(model, batch)
    parts = model.enable_gradient_checkpointing()
    assert parts
    ckpt_bytes, ckpt = stored_bytes_and_grads(model, batch)
    assert plain.keys() == ckpt.keys() and len(plain) > 10
    for key in plain:
        torch.testing.assert_close(ckpt[key], plain[key], rtol=1e-5, atol=1e-7, msg=key)
    assert ckpt_bytes < plain_bytes / 2, (ckpt_bytes, plain_bytes)
    # Inference builds no graph: checkpointing is inert and the scores unchanged.
    model.eval()
    with torch.no_grad():
        scores = model(batch).scores
    assert torch.isfinite(scores).all()


def test_set_encoder_checkpoints_its_own_layers(data: dict[str, Path]) -> None:
    """The Set-Encoder runs BERT's layers itself: its own blocks are checkpointed, not the HF encoder."""
    model = build_model(MODELS["set-encoder"], data["backbone"])
    assert model.enable_gradient_checkpointing() == ["pairs (own blocks)"]
    assert not any(getattr(m, "gradient_checkpointing", False) for m in model.pairs.encoder.modules())
    mono = build_model(MODELS["mono"], data["backbone"])
    mono.enable_gradient_checkpointing()
    assert any(getattr(m, "gradient_checkpointing", False) for m in mono.pairs.encoder.modules())


def test_cli_trains_with_checkpointing(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "ck"
    result = cli("train", "--model", "parade-transformer", "--train", data["groups"], "--output", out,
                 "--backbone", data["backbone"], "--max-steps", 2, "--batch-size", 3, "--group-size", 3,
                 "--device", "cpu", "--window", 6, "--stride", 4, "--max-passages", 3,
                 "--gradient-checkpointing", "--precision", "bf16")
    assert result.code == 0, result.stderr
    assert "activation checkpointing: model (own blocks), pairs.encoder (BertModel)" in result.stderr
    assert read_meta(out)["training"]["gradient_checkpointing"] is True
