"""Distillation from a teacher checkpoint (PARADE Eq. 12): the loss by hand, the objective, training runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from training_helpers import build_model, tiny_backbone, write_groups

from rankkit.errors import RankkitError
from rankkit.formats import read_groups
from rankkit.models import losses
from rankkit.models.checkpoint import read_meta, save_model
from rankkit.models.cross_encoders.mono import Mono
from rankkit.models.inputs import PairFeatures
from rankkit.training import TrainConfig, sampling, train
from rankkit.training.objective import DistillationObjective, Teacher, check_alpha, distillation_mse


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("distill")
    backbone = tiny_backbone(root / "tiny", dropout=0.0)
    torch.manual_seed(3)
    teacher = build_model(Mono, backbone, {"max_query_length": 8, "max_doc_length": 24})
    with torch.no_grad():  # a teacher whose scores are far from an untrained student's
        teacher.pairs.encoder.classifier.bias.add_(1.0)  # mono's Hugging Face head
    save_model(teacher, root / "teacher", {})
    return {"backbone": backbone, "groups": write_groups(root / "groups.jsonl", count=16, negatives=4),
            "teacher": root / "teacher"}


def test_mse_term_by_hand_ignores_masked_slots() -> None:
    student = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 9.0]])
    teacher = torch.tensor([[2.0, 2.0, 1.0], [1.0, -1.0, -50.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    # group 0: (1 + 0 + 4) / 3; group 1: (1 + 1) / 2; mean over groups
    expected = ((1 + 0 + 4) / 3 + (1 + 1) / 2) / 2
    assert distillation_mse(student, teacher, mask).item() == pytest.approx(expected)
    assert distillation_mse(teacher, teacher, mask).item() == 0.0


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_alpha_outside_unit_interval_is_rejected(alpha: float) -> None:
    with pytest.raises(RankkitError, match="between 0 and 1"):
        check_alpha(alpha)
    assert check_alpha(0.0) == 0.0 and check_alpha(1.0) == 1.0


def test_objective_is_eq12_on_a_real_batch(data: dict[str, Path]) -> None:
    torch.manual_seed(0)
    student = build_model(Mono, data["backbone"], {"max_query_length": 8, "max_doc_length": 24})
    teacher = Teacher.load(data["teacher"], "cpu")
    groups = read_groups(data["groups"])[:3]
    sampled = [sampling.sample_group(g, 6, sampling.group_rng(0, 0, i)) for i, g in enumerate(groups)]
    # A short group: masked slots.
    sampled[1] = sampling.sample_group(groups[1], 3, sampling.group_rng(0, 0, 1))
    batch = student.prepare(sampling.collate(sampled, 6))
    own = batch.features
    assert isinstance(own, PairFeatures)
    pairs, where = dict(own.pairs), own.where.clone()
    t = teacher.scores(batch)
    # The teacher worked on its own copy: the student's features are the same object, unchanged.
    assert batch.features is own and own.pairs.keys() == pairs.keys()
    assert all(torch.equal(own.pairs[k], pairs[k]) for k in pairs) and torch.equal(own.where, where)
    assert t.shape == (3, 6) and not t.requires_grad
    lce_loss = losses.get_loss(Mono.training_defaults.loss, Mono.output_type, Mono.name)
    assert lce_loss.name == "listwise-ce"
    with torch.no_grad():
        s = student(batch).scores
        lce = losses.listwise_softmax_ce(s, batch.mask)
        mse = distillation_mse(s, t, batch.mask)
        for alpha in (0.0, 0.3, 1.0):
            got = DistillationObjective(student, lce_loss, alpha, "loss-mse")(batch, t)
            assert got.item() == pytest.approx(alpha * lce.item() + (1 - alpha) * mse.item(), rel=1e-5)
            # Eq. 12 as written: point-wise CE of every real document + its squared logit difference.
            real = batch.mask
            y = (batch.labels > 0).float()
            p = torch.sigmoid(s)
            ce = (-(y * p.log() + (1 - y) * (1 - p).log()))[real].mean()
            sq = ((t - s) ** 2)[real].mean()
            got = DistillationObjective(student, lce_loss, alpha)(batch, t)
            assert got.item() == pytest.approx(alpha * ce.item() + (1 - alpha) * sq.item(), rel=1e-5)
    assert mse.item() > 0.5  # the shifted teacher really disagrees with the fresh student
    with pytest.raises(RankkitError):
        DistillationObjective(student, lce_loss, 2.0)
    with pytest.raises(RankkitError, match="--distillation"):
        DistillationObjective(student, lce_loss, 0.5, "mse")


def test_eq12_terms_by_hand() -> None:
    scores = torch.tensor([[2.0, -1.0, 0.5], [0.0, 3.0, 9.0]])
    teacher = torch.tensor([[1.0, -1.0, 2.5], [1.0, 1.0, -50.0]])
    labels = torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    # L_CE: -log sigmoid(s) for the relevant, -log(1 - sigmoid(s)) for the others, over 5 real documents.
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    ce = -(math.log(sig(2.0)) + math.log(1 - sig(-1.0)) + math.log(1 - sig(0.5))
           + math.log(sig(0.0)) + math.log(1 - sig(3.0))) / 5
    assert losses.pointwise_cross_entropy(scores, labels, mask).item() == pytest.approx(ce, rel=1e-6)
    # ||z^t - z^s||^2 per document, over the 5 real documents (not a per-group mean: 2 groups of 3 and 2).
    sq = (1.0 + 0.0 + 4.0 + 1.0 + 4.0) / 5
    assert losses.squared_logit_distance(scores, teacher, mask).item() == pytest.approx(sq)
    assert distillation_mse(scores, teacher, mask).item() == pytest.approx((5 / 3 + 5 / 2) / 2)  # the old form
    for alpha in (0.0, 0.25, 1.0):
        got = losses.parade_eq12(scores, teacher, labels, mask, alpha).item()
        assert got == pytest.approx(alpha * ce + (1 - alpha) * sq, rel=1e-6)


def config(data: dict[str, Path], output: Path, **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = dict(model="mono", train=[data["groups"]], output=output,
                                    backbone=data["backbone"], max_steps=6, batch_size=4, group_size=4,
                                    lr=3e-2, log_every=1, seed=5, device="cpu", max_query_length=8,
                                    max_doc_length=24, warmup=0.0,
                                    teacher_checkpoint=data["teacher"], alpha=0.0)
    settings.update(overrides)
    return TrainConfig(**settings)


def test_kd_training_pulls_the_student_towards_the_teacher(data: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "kd"
    train(config(data, out))
    lines = [json.loads(line) for line in (out / "train.log").read_text().splitlines() if "loss" in line]
    first, last = lines[0]["loss"], lines[-1]["loss"]
    assert last < 0.5 * first, (first, last)  # alpha 0: the loss is the teacher-student MSE alone
    meta = read_meta(out)
    assert meta["training"]["teacher_checkpoint"] == str(data["teacher"]) and meta["training"]["alpha"] == 0.0
    plain = read_meta(data["teacher"])
    assert "training" not in plain  # the teacher folder is untouched


def test_kd_works_for_native_loss_and_set_encoder_students(data: dict[str, Path], tmp_path: Path) -> None:
    train(config(data, tmp_path / "rep", model="repbert", max_steps=2, alpha=0.5, distillation="loss-mse"))
    training = read_meta(tmp_path / "rep")["training"]
    assert training["loss"] == "multilabel-margin" and training["distillation"] == "loss-mse"
    train(config(data, tmp_path / "rep12", model="repbert", max_steps=2, alpha=0.5))
    training = read_meta(tmp_path / "rep12")["training"]
    assert training["loss"] == "pointwise-ce" and training["distillation"] == "eq12"
    with pytest.raises(RankkitError, match="not used by --distillation eq12"):
        train(config(data, tmp_path / "rep-x", model="repbert", max_steps=2, loss="multilabel-margin"))
    train(config(data, tmp_path / "set", model="set-encoder", max_steps=2, alpha=0.7))
    meta = read_meta(tmp_path / "set")
    assert meta["model"] == "set-encoder" and meta["training"]["alpha"] == 0.7


def test_cli_options_and_errors(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    base = ["train", "--model", "mono", "--train", data["groups"], "--backbone", data["backbone"],
            "--max-steps", "1", "--batch-size", "4", "--group-size", "3", "--device", "cpu",
            "--max-doc-length", "24", "--max-query-length", "8"]
    res = cli(*base, "--output", tmp_path / "a", "--teacher-checkpoint", data["teacher"], "--alpha", "1.5")
    assert res.code == 2 and "--alpha must be between 0 and 1" in res.stderr and "Traceback" not in res.stderr
    res = cli(*base, "--output", tmp_path / "b", "--alpha", "0.3")
    assert res.code == 2 and "needs --teacher-checkpoint" in res.stderr
    res = cli(*base, "--output", tmp_path / "c", "--teacher-checkpoint", tmp_path / "nope")
    assert res.code == 2 and "no such checkpoint folder" in res.stderr
    res = cli(*base, "--output", tmp_path / "d", "--teacher-checkpoint", data["teacher"], "--alpha", "0.25")
    assert res.code == 0, res.stderr
    assert read_meta(tmp_path / "d")["training"]["alpha"] == 0.25
