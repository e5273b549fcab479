"""Frozen ``--encoder bi`` features computed once per run (rankkit.training.frozen)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from training_helpers import tiny_backbone, whole_groups_batch, write_groups

from rankkit.formats import read_groups
from rankkit.models import create_model
from rankkit.models.cross_encoders import frozen_vectors
from rankkit.models.cross_encoders.frozen_vectors import FrozenVectors, ids_key
from rankkit.training import TrainConfig, train
from rankkit.training import frozen as frozen_module
from rankkit.training.frozen import precompute_frozen_features
from rankkit.training.sampling import MicroBatches


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("frozen")
    return {"backbone": tiny_backbone(root / "tiny", dropout=0.0), "groups": write_groups(root / "groups.jsonl"),
            "dev": write_groups(root / "dev.jsonl", count=12, seed=5)}


def config(data: dict[str, Path], output: Path, **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = dict(model="matrank", train=[data["groups"]], output=output, backbone=data["backbone"],
                                    epochs=3, batch_size=4, group_size=4, lr=1e-2, log_every=1, seed=3,
                                    device="cpu", dev=[data["dev"]], model_options={"encoder": "bi"})
    settings.update(overrides)
    return TrainConfig(**settings)


def losses(output: Path) -> list[float]:
    lines = [json.loads(line) for line in (output / "train.log").read_text().splitlines()]
    return [r["loss"] for r in lines if "loss" in r]


def test_table_in_memory_and_on_disk_give_the_same_vectors(tmp_path: Path) -> None:
    vectors = torch.randn(5, 3)
    keys = [ids_key(torch.tensor([i, i + 1]).numpy()) for i in range(5)]
    small = FrozenVectors(5, 3, memory_limit=0, spill_dir=tmp_path)  # forced onto disk
    large = FrozenVectors(5, 3)
    for table in (small, large):
        table.add(keys[:2], vectors[:2])
        table.add(keys[2:], vectors[2:])
    assert small.on_disk and not large.on_disk
    assert list(tmp_path.glob("rankkit-frozen-vectors-*/vectors.npy"))
    order = [keys[3], keys[0], keys[3]]
    assert torch.equal(small.lookup(order), vectors[[3, 0, 3]])
    assert torch.equal(large.lookup(order), vectors[[3, 0, 3]])
    with pytest.raises(ValueError, match="full"):
        large.add([b"x"], vectors[:1])
    small.close()
    assert not list(tmp_path.glob("rankkit-frozen-vectors-*"))  # the spill file goes with the table


def batches_of(groups: list, **overrides: Any) -> MicroBatches:
    settings: dict[str, Any] = dict(seed=1, batch_size=4, group_size=4, grad_accum=1, rank=0, world=1, teacher=None)
    settings.update(overrides)
    return MicroBatches(groups, **settings)


def test_exactly_the_texts_of_the_run_are_encoded_once_and_steps_never_run_the_encoder(data: dict[str, Path]) -> None:
    model = create_model("matrank", data["backbone"], encoder="bi")
    groups = read_groups(data["groups"])
    batches = batches_of(groups)
    steps = 2 * batches.steps_per_epoch
    table = precompute_frozen_features(model, batches, steps)
    assert table is not None
    used: set[tuple[int, ...]] = set()
    tokenizer = model.pairs.tokenizer
    for step in range(steps):
        for batch in batches.at_step(step):
            _, texts, _ = batch.flat_documents()
            used |= {tuple(tokenizer(t, truncation=True, max_length=model.pairs.max_length)["input_ids"]) for t in texts}
            used |= {tuple(tokenizer(q, truncation=True, max_length=model.pairs.max_query_length)["input_ids"])
                     for q in batch.queries}
    assert len(table) == len(used)  # every text the steps draw, once, and nothing else
    one_step = precompute_frozen_features(create_model("matrank", data["backbone"], encoder="bi"), batches, 1)
    assert one_step is not None and len(one_step) < len(table)
    calls = []
    model.pairs.encoder.register_forward_hook(lambda *args: calls.append(1))
    for step in range(steps):
        for batch in batches.at_step(step):
            model(model.prepare(batch))
    assert calls == []  # every vector came from the table


def test_vectors_from_the_table_equal_the_encoders(data: dict[str, Path]) -> None:
    model = create_model("matrank", data["backbone"], encoder="bi")
    groups = read_groups(data["groups"])[:6]
    batch = whole_groups_batch(model, groups)
    model.eval()
    direct = model(batch).scores
    table = precompute_frozen_features(model, batches_of(groups), 0, groups, announce=False)  # the dev groups' texts
    assert table is not None and len(table) > 0
    cached = model(batch).scores
    torch.testing.assert_close(cached, direct, rtol=1e-5, atol=1e-6)


def test_models_without_a_frozen_encoder_are_left_alone(data: dict[str, Path]) -> None:
    batches = batches_of(read_groups(data["groups"]))
    tuned = create_model("matrank", data["backbone"], encoder="bi", freeze_encoder=False)
    assert precompute_frozen_features(tuned, batches, 3) is None
    assert precompute_frozen_features(create_model("mono", data["backbone"]), batches, 3) is None


def test_training_with_the_table_gives_todays_losses(data: dict[str, Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    train(config(data, tmp_path / "table"))
    with monkeypatch.context() as patch:  # the per-step path: encoder run (lazily cached) inside each step
        patch.setattr("rankkit.training.loop.precompute_frozen_features", lambda *a, **k: None)
        train(config(data, tmp_path / "per-step"))
    assert len(losses(tmp_path / "table")) == 3 * (48 // 4)
    assert losses(tmp_path / "table") == pytest.approx(losses(tmp_path / "per-step"), rel=1e-5, abs=1e-6)


def test_a_table_over_the_memory_limit_spills_to_disk_with_the_same_losses(data: dict[str, Path], tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    train(config(data, tmp_path / "memory", epochs=1))
    monkeypatch.setattr(frozen_vectors, "MEMORY_LIMIT", 0)
    seen: list[bool] = []
    original = frozen_module.precompute_frozen_features

    def spy(*args: Any, **kwargs: Any) -> Any:
        table = original(*args, **kwargs)
        seen.append(table.on_disk)
        return table

    monkeypatch.setattr("rankkit.training.loop.precompute_frozen_features", spy)
    train(config(data, tmp_path / "disk", epochs=1))
    assert seen == [True]
    assert losses(tmp_path / "disk") == losses(tmp_path / "memory")


def test_resume_with_the_table_is_exact(data: dict[str, Path], tmp_path: Path) -> None:
    full = tmp_path / "full"
    train(config(data, full, save_every=12, dev=[]))
    part = tmp_path / "part"

    def crash(info: Any) -> None:
        if info.step == 14:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config(data, part, save_every=12, dev=[]), callbacks=[crash])
    train(config(data, part, save_every=12, dev=[], resume=True))
    assert losses(part) == losses(full)
