"""Distributed training: 2 CPU processes under torchrun (gloo) equal one process with the same global batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from training_helpers import tiny_backbone, write_groups

from rankkit.models.checkpoint import read_meta
from rankkit.training import TrainConfig, train


def read_log(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "train.log").read_text().splitlines()]


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")
@pytest.mark.parametrize("workers", ["0", "1"])  # batches prepared on the training thread or by a DataLoader worker
def test_two_processes_match_one_process_with_the_same_global_batch(tmp_path: Path, workers: str) -> None:
    backbone = tiny_backbone(tmp_path / "tiny", dropout=0.0)  # dropout would differ per rank by design
    groups = write_groups(tmp_path / "groups.jsonl")
    common = ["--model", "repbert", "--train", str(groups), "--backbone", str(backbone), "--group-size", "3",
              "--max-steps", "3", "--lr", "1e-3", "--log-every", "1", "--seed", "11", "--device", "cpu"]

    ddp = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "rankkit", "train", *common, "--output", str(ddp), "--batch-size", "2",
         "--workers", workers],
        capture_output=True, text=True, env=env, timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    single = tmp_path / "single"
    train(TrainConfig(model="repbert", train=[groups], output=single, backbone=backbone, group_size=3, max_steps=3,
                      lr=1e-3, log_every=1, seed=11, device="cpu", batch_size=2, grad_accum=2))

    ddp_log, single_log = read_log(ddp), read_log(single)
    digests = ddp_log[-1]["replica_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]  # both ranks ended with identical parameters
    assert [r["loss"] for r in ddp_log if "loss" in r] == pytest.approx(
        [r["loss"] for r in single_log if "loss" in r], rel=1e-5)
    a, b = load_file(str(ddp / "model.safetensors")), load_file(str(single / "model.safetensors"))
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
    assert any(not torch.equal(a[k], load_file(str(backbone / "model.safetensors"))[k]) for k in a)  # it trained
    meta = read_meta(ddp)["training"]
    assert (meta["world_size"], meta["global_batch"]) == (2, 4) == (2, read_meta(single)["training"]["global_batch"])
    # only rank 0 wrote: a single model folder, no stray temporary folders
    assert sorted(p.name for p in ddp.iterdir() if p.name.startswith(".")) == []
