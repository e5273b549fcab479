"""``rankkit explain``: MatRank's matrix for one query as a figure plus the top passages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from training_helpers import build_model, tiny_backbone, write_corpus, write_topics

from rankkit.formats import write_run
from rankkit.models.checkpoint import save_model
from rankkit.models.cross_encoders.matrank import MatRank


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("explain")
    backbone = tiny_backbone(root / "tiny", dropout=0.0)
    ck = save_model(build_model(MatRank, backbone, {"encoder": "bi"}), root / "ck", {})
    write_run(root / "run.txt", {"t0": {f"d{i}_0": float(-i) for i in range(6)}}, "x")
    return {"ck": ck, "run": root / "run.txt", "topics": write_topics(root / "topics.tsv"),
            "corpus": write_corpus(root / "corpus.jsonl")}


def test_explain_writes_a_png_and_prints_top_passages(data: dict[str, Path], tmp_path: Path, cli: Any) -> None:
    fig = tmp_path / "fig.png"
    res = cli("explain", "--model", "matrank", "--checkpoint", data["ck"], "--run", data["run"], "--topics",
              data["topics"], "--corpus", data["corpus"], "--qid", "t0", "--output", fig, "--depth", "5",
              "--top", "3", "--device", "cpu")
    assert res.code == 0, res.stderr
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The bi-encoder MatRank starts at the cosine ranking: the apple document (d0_0) wins for "apple fruit".
    assert "d0_0" in res.stdout.split("\n", 4)[-1][:400]
    assert res.stdout.count(" d") >= 3


@pytest.mark.parametrize("args, message", [
    (["--qid", "nope"], "has no text"),
    (["--qid", "t1"], "is not in"),
    (["--qid", "t0", "--model", "mono"], "matrank"),
])
def test_explain_errors(data: dict[str, Path], tmp_path: Path, cli: Any, args: list[str], message: str) -> None:
    fig = tmp_path / "fig.png"
    res = cli("explain", "--checkpoint", data["ck"], "--run", data["run"], "--topics", data["topics"],
              "--corpus", data["corpus"], "--output", fig, *args)
    assert res.code == 2 and message in res.stderr and "Traceback" not in res.stderr
    assert not fig.exists()
