"""Every registered model trains and re-ranks from the command line (the README's model table).

One optimiser step on tiny inline data with a tiny random BERT, then ``rankkit rerank`` of a
first-stage run; the written run must be valid, keep every candidate, and carry the scores the
loaded checkpoint gives. Model-specific behaviour is tested in each model's own test file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from training_helpers import documents, tiny_backbone, write_corpus, write_groups, write_topics

from rankkit.formats import read_run, write_run
from rankkit.models import MODELS

# Long-document models split passages; small windows make the tiny documents several passages.
EXTRA = {
    "maxp": ["--window", 6, "--stride", 4, "--max-passages", 3],
    "firstp": ["--window", 6],
    "sump": ["--window", 6, "--stride", 4, "--max-passages", 3],
    "avgp": ["--window", 6, "--stride", 4, "--max-passages", 3],
    "kmaxp": ["--window", 6, "--stride", 4, "--max-passages", 3, "--k", 2],
    "matrank-split": ["--piece-length", 41, "--max-pieces", 2],  # 32 query + 3 special + 6 document tokens
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli-models")
    docids = sorted(documents())
    run = {f"t{i}": {d: float(k) for k, d in enumerate(docids[:8])} for i in range(3)}
    write_run(root / "first.run", run, "first")
    return {"corpus": write_corpus(root / "corpus.jsonl"), "topics": write_topics(root / "topics.tsv"),
            "groups": write_groups(root / "groups.jsonl", count=8), "run": root / "first.run",
            "backbone": tiny_backbone(root / "tiny", dropout=0.0)}


def model_extra(name: str) -> list[object]:
    if name.startswith("parade-"):
        return ["--window", 6, "--stride", 4, "--max-passages", 3]
    return list(EXTRA.get(name, []))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_trains_and_reranks(cli: Callable[..., object], data: dict[str, Path], tmp_path: Path,
                                        name: str) -> None:
    checkpoint = tmp_path / "ck"
    train = cli("train", "--model", name, "--train", data["groups"], "--output", checkpoint, "--backbone",
                data["backbone"], "--max-steps", 1, "--batch-size", 2, "--group-size", 3, "--device", "cpu",
                "--seed", 0, *model_extra(name))
    assert train.code == 0, train.stderr
    assert (checkpoint / "rankkit.json").is_file() and (checkpoint / "model.safetensors").is_file()
    out = tmp_path / "reranked.run"
    rerank = cli("rerank", "--model", name, "--checkpoint", checkpoint, "--run", data["run"], "--topics",
                 data["topics"], "--corpus", data["corpus"], "--depth", 5, "--output", out, "--device", "cpu")
    assert rerank.code == 0, rerank.stderr
    before, after = read_run(data["run"]), read_run(out)
    assert set(after) == set(before)
    for qid in before:
        assert set(after[qid]) == set(before[qid])
    assert cli("validate", "--quiet", out).code == 0


def test_rerank_max_passages(cli: Callable[..., object], data: dict[str, Path], tmp_path: Path) -> None:
    common = ["--run", data["run"], "--topics", data["topics"], "--corpus", data["corpus"], "--depth", 4,
              "--device", "cpu"]
    for name in ("maxp", "parade-transformer", "mono"):
        train = cli("train", "--model", name, "--train", data["groups"], "--output", tmp_path / name, "--backbone",
                    data["backbone"], "--max-steps", 1, "--batch-size", 2, "--group-size", 3, "--device", "cpu",
                    *model_extra(name))
        assert train.code == 0, train.stderr
    runs = {}
    for n in (1, 3):
        out = tmp_path / f"maxp.{n}.run"
        assert cli("rerank", "--model", "maxp", "--checkpoint", tmp_path / "maxp", *common, "--max-passages", n,
                   "--output", out).code == 0
        runs[n] = read_run(out)
    assert runs[1] != runs[3]  # one passage (the first) scores differently from the max of three
    result = cli("rerank", "--model", "parade-transformer", "--checkpoint", tmp_path / "parade-transformer",
                 *common, "--max-passages", 4, "--output", tmp_path / "x.run")
    assert result.code == 2 and "exceeds the 3 passage positions" in result.stderr and "--position-passages" in result.stderr
    result = cli("rerank", "--model", "mono", "--checkpoint", tmp_path / "mono", *common, "--max-passages", 2,
                 "--output", tmp_path / "y.run")
    assert result.code == 2 and "--max-passages applies to " in result.stderr and "maxp" in result.stderr \
        and "only, not 'mono'" in result.stderr
    assert not (tmp_path / "x.run").exists() and not (tmp_path / "y.run").exists()
