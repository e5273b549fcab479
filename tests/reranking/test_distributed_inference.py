"""Encoding and re-ranking under torchrun (2 CPU processes, gloo) equal one process, byte for byte."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from training_helpers import documents, tiny_backbone, write_corpus

from rankkit.formats import write_run, write_topics

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")


def rankkit(*args: object, processes: int = 1) -> None:
    """``python -m rankkit ARGS``, or ``torchrun --nproc_per_node N -m rankkit ARGS``."""
    argv = [str(a) for a in args]
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
                 "-m", "rankkit"] if processes > 1 else [sys.executable, "-m", "rankkit"])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(launcher + argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_two_process_dense_index_equals_one_process(tmp_path: Path) -> None:
    backbone = tiny_backbone(tmp_path / "tiny")
    corpus = write_corpus(tmp_path / "corpus.jsonl", extra=164)  # 200 documents: 13 chunks of 16
    common = ["index", "--kind", "dense", "--model", "repbert", "--checkpoint", backbone, "--corpus", corpus,
              "--batch-size", 5, "--chunk-size", 16, "--device", "cpu"]
    rankkit(*common, "--index", tmp_path / "one")
    rankkit(*common, "--index", tmp_path / "two", processes=2)
    one, two = files(tmp_path / "one"), files(tmp_path / "two")
    assert sum(name.endswith(".npy") for name in one) == 13
    assert one.keys() == two.keys()
    manifests = [json.loads(f.pop("rankkit-index.json")) for f in (one, two)]
    assert [k for k in one if one[k] != two[k]] == []  # vectors, ids, the faiss index: identical bytes
    for manifest in manifests:
        del manifest["built"]  # the build's time
    assert manifests[0] == manifests[1] and manifests[0]["documents"] == 200


def test_two_process_rerank_equals_one_process(tmp_path: Path) -> None:
    backbone = tiny_backbone(tmp_path / "tiny")
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    rng = random.Random(4)
    docids = sorted(documents())
    # 61 queries x 36 candidates at depth 30: 3 chunks of >= 1024 pairs, the last one on rank 0 alone.
    run = {f"q{n}": {d: rng.random() for d in docids} for n in range(61)}
    write_run(tmp_path / "first.run", run, "first")
    write_topics(tmp_path / "topics.tsv", {q: " ".join(rng.sample(documents()[docids[i % 36]].split(), 2))
                                           for i, q in enumerate(run)})
    # --candidates, not --run: torchrun's parser reads --run as an abbreviation of its own --run-path.
    common = ["rerank", "--model", "repbert", "--checkpoint", backbone, "--candidates", tmp_path / "first.run",
              "--topics", tmp_path / "topics.tsv", "--corpus", corpus, "--depth", 30, "--batch-size", 8,
              "--device", "cpu"]
    rankkit(*common, "--output", tmp_path / "one.run")
    rankkit(*common, "--output", tmp_path / "two.run", processes=2)
    one = (tmp_path / "one.run").read_bytes()
    assert one == (tmp_path / "two.run").read_bytes()
    assert len(one.splitlines()) == 61 * 36
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no stray temporary files
