"""The training engine: sampling, losses, checkpoints, resume, determinism, CLI errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from training_helpers import tiny_backbone, write_groups

from rankkit.errors import RankkitError
from rankkit.formats import Passage, TrainingGroup, write_run
from rankkit.models import losses
from rankkit.models.checkpoint import load_model, read_meta, save_model
from rankkit.models.inputs import GroupBatch
from rankkit.models.outputs import InBatchOutput, RankingOutput
from rankkit.training import StepInfo, TrainConfig, sampling, train
from rankkit.training.optim import linear_schedule
from rankkit.training.resume import list_step_checkpoints
from rankkit.training.sampling import micro_batch_indices


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("engine")
    return {"backbone": tiny_backbone(root / "tiny"), "groups": write_groups(root / "groups.jsonl"),
            "dev": write_groups(root / "dev.jsonl", count=12, seed=5)}


def make_config(data: dict[str, Path], output: Path, **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = dict(model="repbert", train=[data["groups"]], output=output, backbone=data["backbone"],
                                    max_steps=6, batch_size=4, group_size=3, lr=1e-3, log_every=1, seed=7,
                                    device="cpu")
    settings.update(overrides)
    return TrainConfig(**settings)


def log_losses(output: Path) -> dict[int, float]:
    lines = [json.loads(line) for line in (output / "train.log").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in lines if "loss" in r}


# -- sampling and batching ---------------------------------------------------------------------------

def test_group_sampling_is_seeded_and_masks_missing_negatives() -> None:
    group = TrainingGroup("q", "query", [Passage("p1", "a"), Passage("p2", "b")],
                          [Passage("n1", "c"), Passage("n2", "d")])
    first = sampling.sample_group(group, 4, sampling.group_rng(3, 0, 9))
    again = sampling.sample_group(group, 4, sampling.group_rng(3, 0, 9))
    assert first == again
    assert first.docids[0] in ("p1", "p2") and sorted(first.docids[1:]) == ["n1", "n2"]  # all 2 negatives, no repeats
    batch = sampling.collate([first], 4)
    assert batch.mask.tolist() == [[True, True, True, False]]  # the 4th slot is masked, not duplicated
    assert batch.labels.tolist() == [[1.0, 0.0, 0.0, 0.0]]
    assert batch.positives == [frozenset({"p1", "p2"})]
    picks = {sampling.sample_group(group, 2, sampling.group_rng(3, e, 9)).docids for e in range(20)}
    assert len(picks) > 1  # different epochs draw different candidates


def test_data_order_depends_only_on_seed_and_epoch() -> None:
    assert np.array_equal(sampling.epoch_order(50, 1, 0), sampling.epoch_order(50, 1, 0))
    assert not np.array_equal(sampling.epoch_order(50, 1, 0), sampling.epoch_order(50, 1, 1))
    order = sampling.epoch_order(64, 1, 0)
    # Two ranks x accum 1 cover exactly the micro-batches of one process x accum 2.
    ddp = [micro_batch_indices(order, 3, 0, r, 2, 4, 1).tolist() for r in range(2)]
    single = [micro_batch_indices(order, 3, m, 0, 1, 4, 2).tolist() for m in range(2)]
    assert ddp == single


def test_teacher_scores_rank_absent_members_last(tmp_path: Path) -> None:
    from rankkit.formats import write_groups as write_group_file
    from rankkit.training.data import open_training_data

    teacher = sampling.TeacherScores({"q": {"a": 3.0, "b": -2.0}})
    assert teacher.scores("q", ["a", "zz", "b"]) == [3.0, -3.0, -2.0]
    groups = tmp_path / "g.jsonl"
    write_group_file(groups, [TrainingGroup(qid, "x", [Passage("a", "t")]) for qid in ("q", "other", "q", "other")])
    data = open_training_data([groups], cache_dir=tmp_path / "tables")
    with pytest.raises(RankkitError, match="no scores for 2 of 4 training queries \\(first: 'other'\\)"):
        teacher.check(data)
    data.close()


def test_linear_schedule() -> None:
    f = linear_schedule(2, 10)
    assert [round(f(s), 4) for s in (0, 1, 2, 6, 10)] == [0.3333, 0.6667, 1.0, 0.5, 0.0]


# -- group losses on hand-made tensors ------------------------------------------------------------

def test_ranknet_on_hand_made_tensors() -> None:
    scores = torch.tensor([[2.0, 0.0, 1.0]])
    targets = torch.tensor([[3.0, 1.0, 2.0]])
    mask = torch.tensor([[True, True, True]])
    # pairs (0,1): d=2, (0,2): d=1, (2,1): d=1 -> mean softplus(-d)
    expected = (np.log1p(np.exp(-2)) + 2 * np.log1p(np.exp(-1))) / 3
    assert losses.ranknet(scores, targets, mask).item() == pytest.approx(expected)
    masked = torch.tensor([[True, True, False]])
    assert losses.ranknet(scores, targets, masked).item() == pytest.approx(np.log1p(np.exp(-2)))


def test_margin_mse_on_hand_made_tensors() -> None:
    scores = torch.tensor([[3.0, 1.0, 2.0]])
    teacher = torch.tensor([[10.0, 9.0, 4.0]])
    mask = torch.tensor([[True, True, True]])
    # student margins 2, 1; teacher margins 1, 6 -> ((2-1)^2 + (1-6)^2) / 2 = 13
    assert losses.margin_mse(scores, teacher, mask).item() == pytest.approx(13.0)
    assert losses.margin_mse(scores, teacher, torch.tensor([[True, True, False]])).item() == pytest.approx(1.0)


def test_kl_on_hand_made_tensors() -> None:
    scores = torch.tensor([[1.0, 0.0, 9.0]])
    teacher = torch.tensor([[0.0, 1.0, -9.0]])
    mask = torch.tensor([[True, True, False]])
    p = torch.softmax(torch.tensor([0.0, 1.0]), 0)
    q = torch.softmax(torch.tensor([1.0, 0.0]), 0)
    expected = float((p * (p.log() - q.log())).sum())
    assert losses.kl_divergence(scores, teacher, mask).item() == pytest.approx(expected)
    assert losses.kl_divergence(teacher, teacher, mask).item() == pytest.approx(0.0, abs=1e-7)


def test_group_loss_registry() -> None:
    s = torch.zeros((1, 2))
    m = torch.ones((1, 2), dtype=torch.bool)
    batch = GroupBatch(qids=["q"], queries=["query"], docids=[["a", "b"]], texts=[["x", "y"]], labels=s, mask=m,
                       positives=[frozenset({"a"})])
    output = RankingOutput(s)
    assert losses.LOSSES["kl"].needs_teacher and not losses.LOSSES["listwise-ce"].needs_teacher
    with pytest.raises(RankkitError, match="needs --teacher"):
        losses.get_loss("kl")(output, batch)
    with pytest.raises(RankkitError, match="unknown loss"):
        losses.get_loss("no-such-loss")
    assert losses.get_loss("listwise-ce")(output, batch).item() == pytest.approx(np.log(2))
    # In-batch losses need a bi-encoder's output; every model output supports the group losses.
    with pytest.raises(RankkitError, match="cannot train with loss 'softmax-ce'"):
        losses.get_loss("softmax-ce", RankingOutput, "mono")
    assert losses.get_loss("listwise-ce", InBatchOutput, "repbert").name == "listwise-ce"


# -- training runs ----------------------------------------------------------------------------------

def test_resume_determinism_and_round_trip(data: dict[str, Path], tmp_path: Path) -> None:
    """Same seed -> byte-identical weights; an interrupted + resumed run equals an uninterrupted one."""
    a = tmp_path / "a"
    result = train(make_config(data, a, save_every=3, dev=[data["dev"]]))
    assert result.steps == 6
    b = tmp_path / "b"
    train(make_config(data, b, save_every=3, dev=[data["dev"]]))
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "rankkit.json").read_bytes() == (b / "rankkit.json").read_bytes()

    c = tmp_path / "c"

    def crash(info: StepInfo) -> None:
        if info.step == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(make_config(data, c, save_every=3, dev=[data["dev"]]), callbacks=[crash])
    assert [p.name for p in list_step_checkpoints(c)] == ["step-00000003"]
    assert not (c / "model.safetensors").exists()
    with pytest.raises(RankkitError, match="already holds a training run"):
        train(make_config(data, c, save_every=3))
    train(make_config(data, c, save_every=3, dev=[data["dev"]], resume=True))
    assert log_losses(c) == pytest.approx(log_losses(a), rel=1e-6)
    assert sorted(log_losses(c)) == [1, 2, 3, 4, 5, 6]
    wa, wc = load_file(str(a / "model.safetensors")), load_file(str(c / "model.safetensors"))
    assert all(torch.allclose(wa[k], wc[k], atol=1e-6) for k in wa)

    meta = read_meta(a)
    assert meta["model"] == "repbert" and meta["steps"] == 6
    assert meta["hparams"]["doc_segment_id"] == 0  # recorded for later loading (0.1 checkpoints recorded 1)
    assert len(meta["data"]["train"][0]["sha256"]) == 64
    assert "dev_mrr" in meta["metrics"] and (a / "best" / "rankkit.json").is_file()

    # train -> save -> load -> encode round trip
    model = load_model(a)
    texts = ["apple fruit red", "code python bug"]
    vectors = model.encode(texts, is_query=False)
    save_model(model, tmp_path / "again", {"steps": meta["steps"]})
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == (a / "model.safetensors").read_bytes()
    assert torch.equal(load_model(tmp_path / "again").encode(texts, is_query=False), vectors)
    # the trained model ranks a query's own topic above another topic
    q = model.encode(["apple fruit"], is_query=True)
    assert float(q @ vectors[0]) > float(q @ vectors[1])


def test_distillation_losses_train(data: dict[str, Path], tmp_path: Path) -> None:
    groups = [json.loads(line) for line in data["groups"].read_text().splitlines()]
    teacher = {g["qid"]: {p["docid"]: 10.0 - i for i, p in enumerate(g["pos"] + g["neg"][:2])} for g in groups}
    write_run(tmp_path / "teacher.run", teacher)
    out = tmp_path / "kl"
    train(make_config(data, out, max_steps=2, loss="kl", teacher=tmp_path / "teacher.run"))
    assert read_meta(out)["training"]["loss"] == "kl"
    with pytest.raises(RankkitError, match="needs --teacher"):
        train(make_config(data, tmp_path / "nokl", max_steps=2, loss="margin-mse"))


def test_cli_trains_densetrans_ablation(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "dt"
    result = cli("train", "--model", "densetrans", "--train", data["groups"], "--output", out,
                 "--backbone", data["backbone"], "--max-steps", "2", "--batch-size", "4", "--group-size", "2",
                 "--no-dense", "--device", "cpu")
    assert result.code == 0, result.stderr
    meta = read_meta(out)
    assert meta["hparams"]["variant"] == "no-dense" and meta["training"]["loss"] == "softmax-ce"
    assert load_model(out).network.dense is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "bm42"], "unknown model 'bm42'"),
        (["--model", "repbert", "--no-dense"],
         "--no-dense is not an option of model repbert; repbert's options: --doc-segment-id, --normalize/--inner-product"),
        (["--model", "densetrans", "--no-dense", "--concat-layers"], "--no-dense and --concat-layers set the same thing"),
        (["--model", "repbert", "--resume"], "nothing to resume"),
        (["--model", "repbert", "--batch-size", "100"], "fewer than one global batch"),
        (["--model", "repbert", "--optimizer", "sgd"], "unknown optimizer"),
    ],
)
def test_cli_errors_are_one_line(cli: Any, data: dict[str, Path], tmp_path: Path, args: list[str], message: str) -> None:
    result = cli("train", "--train", data["groups"], "--output", tmp_path / "o", "--backbone", data["backbone"],
                 "--max-steps", "1", "--device", "cpu", *args)
    assert result.code == 2
    assert result.stderr.startswith("rankkit: error: ") and message in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_training_file_is_an_input_error(cli: Any, tmp_path: Path) -> None:
    result = cli("train", "--model", "repbert", "--train", tmp_path / "none.jsonl", "--output", tmp_path / "o")
    assert result.code == 2 and "none.jsonl: no such file" in result.stderr
